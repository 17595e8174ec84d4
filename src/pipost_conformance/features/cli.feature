@cli @must
Feature: The command line as SPEC 8 has it, run as a separate process
  These scenarios run a pi-post command line — pipost's own, or, with
  `nox -s conformance -- --cli "<command>"`, any command compatible with the
  pi-post 0.7 CLI — against a post office laid out by hand, and read the files
  it writes. Sessions are offline, so that no send waits for a receipt.
  They assert exit codes, the facts an output names and the bytes on disk;
  pipost's own wording is pinned in tests/test_cli.py.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And I work in "{scratch}/gtm"

  @INV-21 @INV-11
  Scenario: a send to a name writes one letter named after its id, and prints queued
    When at the shell I run pi-post send --to dashboard --body "main moved; rebase before you push"
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And the mailbox of "dashboard" holds just that letter, in a file 0600 named after its id
    And that letter is a message of the current version from the process "process:gtm" in "{scratch}/gtm", with no reply address
    And the body of that letter is "main moved; rebase before you push"

  @INV-21 @INV-11
  Scenario: the body comes from standard input, the sender's name from --from
    When at the shell I run pi-post send --to cache-fix --from golem:gtmeng-2573 with "gate green\n" on standard input
    Then it succeeds, printing "queued {cache.address} <id>"
    And that letter is a message of the current version from the process "golem:gtmeng-2573" in "{scratch}/gtm", with no reply address
    And the body of that letter is "gate green\n"

  @INV-21 @INV-16
  Scenario: a letter pi-post 0.7 wrote is shown by peek and left where it is
    Given the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534364-bb43be6c.json"
    When at the shell I run pi-post peek dashboard
    Then it succeeds, printing "2026-11-30T22:42:14.364Z process:gtm: main moved; rebase before you push"
    And the command wrote nothing

  @INV-13
  Scenario Outline: resolve finds a session by its <kind>
    When at the shell I run pi-post resolve <handle>
    Then it succeeds, printing a card with "address:  {<session>.address}"

    Examples:
      | kind                 | handle                               | session   |
      | address              | {dashboard.address}                  | dashboard |
      | name                 | dashboard                            | dashboard |
      | default name         | cache-fix-d510                       | cache     |
      | directory's basename | cache-fix                            | cache     |
      | absolute path        | {scratch}/old                        | dashboard |
      | relative path        | ../old                               | dashboard |
      | session id           | 019a3f30-1111-7222-8333-444455556666 | dashboard |
      | session id prefix    | 019a3f30                             | dashboard |

  @INV-12
  Scenario: an unknown target fails the whole send, and nothing is written
    When at the shell I run pi-post send --to cache-fix --to nobody --body "x"
    Then it fails for its targets, saying "nobody", and writes nothing

  @INV-12
  Scenario: a directory with two sessions is refused, every candidate listed
    Given a session "twin-a" with id "019a3f32-0000-7000-8000-00000000000a" in "{scratch}/shared", offline
    And a session "twin-b" with id "019a3f32-0000-7000-8000-00000000000b" in "{scratch}/shared", offline
    When at the shell I run pi-post send --to {scratch}/shared --body "x"
    Then it fails for its targets, saying "{twin-a.address}" and "{twin-b.address}", and writes nothing

  @INV-12
  Scenario: more than eight targets are refused
    When at the shell I run pi-post send --to dashboard --to dashboard --to dashboard --to dashboard --to dashboard --to dashboard --to dashboard --to dashboard --to dashboard --body "x"
    Then it fails for its targets, saying "9" and "8", and writes nothing

  @INV-09
  Scenario: a body over the cap is refused, naming its size and the cap
    When at the shell I send a body of 32769 "x" characters to "dashboard"
    Then it fails for its body, saying "32769" and "32768", and writes nothing

  @INV-09
  Scenario: a body on standard input past the cap is refused, and nothing is written
    When at the shell I pipe 40000 "x" characters into pi-post send --to dashboard
    Then it fails for its body, saying "32768", and writes nothing

  @INV-09
  Scenario Outline: a bad body to an unknown target is refused for the body (<bad body>)
    When at the shell I run pi-post send --to stranger <body>
    Then it fails for its body, not naming "stranger", and writes nothing

    Examples:
      | bad body        | body          |
      | empty           | --body ""     |
      | blank           | --body "   "  |
      | none at all     |               |

  @INV-09
  Scenario: a body over the cap to an unknown target is refused for its size
    When at the shell I send a body of 32769 "x" characters to "stranger"
    Then it fails for its body, saying "32769" and "32768", not "stranger", and writes nothing

  @INV-09 @INV-21
  Scenario: a body of exactly 32768 bytes in two-byte characters is sent whole
    When at the shell I send a body of 16384 "é" characters to "dashboard"
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And the body of that letter is 16384 "é" characters

  @INV-16 @INV-21 @INV-13
  Scenario: list and resolve show the queued mail, and change nothing
    Given at the shell I ran pi-post send --to dashboard --body "for later"
    When at the shell I run pi-post list --all
    Then it succeeds, printing a line with "dashboard", "{dashboard.address}" and "1 queued"
    And the command wrote nothing
    When at the shell I run pi-post resolve dashboard
    Then it succeeds, printing a card with "address:  {dashboard.address}"
    And the command wrote nothing

  @INV-22
  Scenario Outline: a post office folder that <danger> is refused by <command>, saying what to fix
    Given the post office folder <danger>
    When at the shell I run pi-post <command>
    Then it refuses the post office folder, saying "{scratch}/post", and writes nothing

    Examples:
      | danger                        | command                                  |
      | is writable by others         | list                                     |
      | is writable by others         | send --to dashboard --body "hello there" |
      | belongs to another user       | resolve dashboard                        |
      | is a symlink to another folder | peek dashboard                          |

  @INV-22 @INV-21 @should
  Scenario: a post office folder given as ~/post is the folder post in my home
    Given HOME is "{scratch}"
    And PI_POST_DIR is "~/post"
    When at the shell I run pi-post send --to dashboard --body "found from my home"
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And that letter lies in "{scratch}/post/inbox/{dashboard.address}"
    And the body of that letter is "found from my home"

  @INV-22 @should
  Scenario Outline: a relative PI_POST_DIR is refused by <command>, naming it
    Given PI_POST_DIR is "post"
    When at the shell I run pi-post <command>
    Then it refuses the post office folder, saying "PI_POST_DIR", and writes nothing

    Examples:
      | command                            |
      | list                               |
      | send --to dashboard --body "hello" |
      | peek dashboard                     |
