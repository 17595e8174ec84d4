@cli @must
Feature: The caps hold through the command line: 50 letters a mailbox, 32768 bytes a body
  A mailbox holds at most 50 unread letters, and a send that would pass the cap
  is refused whole, before anything is written. A body is at most 32768 bytes of
  UTF-8, whether it comes from --body or from standard input (some systems
  limit the size of an argument, so long bodies are piped). Every send here is
  its own pi-post process, as a hook or a script runs it.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And I work in "{scratch}/gtm"

  @INV-08
  Scenario: fifty sends fill a mailbox, and the fifty-first is refused with nothing written
    When at the shell I send 50 letters to "dashboard", one command each
    Then each of them succeeded, and the mailbox of "dashboard" holds 50 letters
    When at the shell I run pi-post send --to dashboard --body "one too many"
    Then it fails for the full mailbox, saying "{dashboard.address}" and "50", and writes nothing
    And the mailbox of "dashboard" still holds 50 letters

  @INV-08
  Scenario Outline: a send to a full mailbox and another is refused whole (<order>)
    Given the mailbox of "dashboard" holds 50 letters
    When at the shell I run pi-post send <targets> --body "both or neither"
    Then it fails for the full mailbox, saying "{dashboard.address}" and "50", and writes nothing
    And the mailbox of "dashboard" still holds 50 letters
    And the mailbox of "cache" still holds 0 letters

    Examples:
      | order          | targets                     |
      | the full first | --to dashboard --to cache-fix |
      | the full last  | --to cache-fix --to dashboard |

  @INV-08
  Scenario: a mailbox of 49 takes one more
    Given the mailbox of "dashboard" holds 49 letters
    When at the shell I run pi-post send --to dashboard --body "the fiftieth"
    Then the mailbox takes it: one letter, in the mailbox of "dashboard"
    And the mailbox of "dashboard" still holds 50 letters

  @INV-09
  Scenario Outline: a body of <size> bytes on standard input is sent whole (<characters>)
    When at the shell I pipe <count> "<character>" characters into pi-post send --to dashboard
    Then the body is taken: one letter, in the mailbox of "dashboard"
    And the body of that letter is <count> "<character>" characters

    Examples:
      | size  | characters          | count | character |
      | 1     | one byte            | 1     | x         |
      | 32768 | one byte each       | 32768 | x         |
      | 32768 | two bytes each      | 16384 | é         |
      | 32768 | four bytes each     | 8192  | 😀        |

  @INV-09
  Scenario Outline: a body of <size> bytes on standard input is refused, and nothing is written
    When at the shell I pipe <count> "<character>" characters into pi-post send --to dashboard
    Then it fails for its body, saying "32768", and writes nothing

    Examples:
      | size    | count   | character |
      | 32769   | 32769   | x         |
      | 32770   | 16385   | é         |
      | 1048576 | 1048576 | x         |

  @INV-09
  Scenario: a body of exactly 32768 bytes given with --body is sent whole
    When at the shell I send a body of 32768 "x" characters to "dashboard"
    Then the body is taken: one letter, in the mailbox of "dashboard"
    And the body of that letter is 32768 "x" characters

  @INV-09
  Scenario: a body over the cap on standard input to two targets writes to neither
    When at the shell I pipe 32769 "x" characters into pi-post send --to dashboard --to cache-fix
    Then it fails for its body, saying "32768", and writes nothing
