@cli @must
Feature: Every kind of handle leads a send to one session, and nothing is guessed
  A target is an address, a path (absolute, relative, starting with ~, with its
  symlinks resolved), a session id or a prefix of one of at least 8 hex
  characters, a session name or default name, or the basename of a session's
  folder (SPEC 4). A send resolves every target before it writes anything; a
  handle that names no session, or more than one, refuses the whole send.
  Every folder named here exists.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And a session "homework" with id "019a3f35-6666-7777-8888-999900001111" in "{scratch}/home/proj", offline
    And the folder "{scratch}/link-to-old" is a symlink to "{scratch}/old"
    And I work in "{scratch}/gtm"

  @INV-13
  Scenario Outline: a send to <kind> reaches the mailbox of <session>
    When at the shell I run pi-post send --to <handle> --body "to <kind>"
    Then it succeeds, and its one letter is in the mailbox of "<session>", as its receipt says

    Examples:
      | kind                            | handle                               | session   |
      | an address                      | {dashboard.address}                  | dashboard |
      | a session id                    | 019a3f30-1111-7222-8333-444455556666 | dashboard |
      | a session id prefix of 8        | 019a3f30                             | dashboard |
      | a session id prefix in capitals | 019A3F30-1111                        | dashboard |
      | a name                          | dashboard                            | dashboard |
      | a default name                  | cache-fix-d510                       | cache     |
      | a folder's basename             | cache-fix                            | cache     |
      | an absolute path                | {scratch}/old                        | dashboard |
      | a path ending in a slash        | {scratch}/old/                       | dashboard |
      | a relative path                 | ../old                               | dashboard |
      | a path through a symlink        | {scratch}/link-to-old                | dashboard |
      | a path starting with ~          | ~/proj                               | homework  |

  @INV-13
  Scenario Outline: <handle> in the folder of a session names it
    Given I work in "{scratch}/old"
    When at the shell I run pi-post send --to <handle> --body "here"
    Then it succeeds, and its one letter is in the mailbox of "dashboard", as its receipt says

    Examples:
      | handle |
      | .      |
      | ./     |

  @INV-13
  Scenario: ~ alone is my home, and names the session that runs there
    Given a session "at-home" with id "019a3f36-7777-7888-8999-000011112222" in "{scratch}/home", offline
    When at the shell I run pi-post send --to ~ --body "home"
    Then it succeeds, and its one letter is in the mailbox of "at-home", as its receipt says

  @INV-12
  Scenario: handles that name one session write one letter to it
    When at the shell I run pi-post send --to dashboard --to {scratch}/old --to 019a3f30 --to {dashboard.address} --body "once"
    Then it succeeds, writing one letter for them all, in the mailbox of "dashboard"

  @INV-12
  Scenario Outline: <what> is refused, and nothing is written
    Given a session "twin-a" with id "019a3f32-0000-7000-8000-00000000000a" in "{scratch}/shared", offline
    And a session "twin-b" with id "019a3f32-0000-7000-8000-00000000000b" in "{scratch}/shared", offline
    And a session "namesake" with id "019a3f37-8888-7999-8000-111122223333" in "{scratch}/elsewhere", offline
    And a session "dashboard" with id "019a3f38-9999-7000-8111-222233334444" in "{scratch}/also-old", offline
    And the folder "{scratch}/nobody-here"
    When at the shell I run pi-post send --to cache-fix --to <handle> --body "x"
    Then it fails for its targets, saying <facts>, and writes nothing

    Examples:
      | what                                    | handle                  | facts                                                    |
      | a name two sessions carry               | dashboard               | "{dashboard.address}" and "s-6bb4b1bc7f53"               |
      | a folder two sessions run in            | {scratch}/shared        | "{twin-a.address}" and "{twin-b.address}"                |
      | a session id prefix two sessions share  | 019a3f32-0000           | "{twin-a.address}" and "{twin-b.address}"                |
      | a session id prefix shorter than 8      | 019a3f3                 | "019a3f3"                                                |
      | a folder no session runs in             | {scratch}/nobody-here   | "{scratch}/nobody-here"                                  |
      | a name no session carries               | nobody                  | "nobody"                                                 |
      | a name's prefix                         | dashb                   | "dashb"                                                  |

  @INV-13
  Scenario: of two sessions with one name, the one that runs is the one meant
    Given a session "dashboard" with id "019a3f38-9999-7000-8111-222233334444" in "{scratch}/new", running as this process
    When at the shell I run pi-post resolve dashboard
    Then it succeeds, printing a card with "address:  s-1c00d87aad3a"
