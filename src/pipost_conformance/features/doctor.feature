@cli @pipost-only @should
Feature: pi-post doctor checks the post office, and changes nothing
  `pi-post doctor` looks at the post office folder, the machine and the wire
  contract, and gives one finding per line with its fix: exit 0 when nothing
  needs attention, 1 when something does. `--json` gives the same findings as a
  document, each with a stable code. These scenarios lay a post office out by
  hand, plant problems in it, and read the codes; the tree stays byte-identical.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "builder" with id "019a3f31-2222-7333-8444-555566667777" in "{scratch}/builder", running as this process
    And the mailbox of "dashboard" holds 3 letters
    And I work in "{scratch}/gtm"

  @INV-16
  Scenario: a healthy post office: exit 0, every finding ok, nothing written
    When at the shell I run pi-post doctor --json
    Then it exits 0, printing a "doctor" document the shipped schema accepts
    And every finding is ok
    And the findings include "root-ok", "registry-ok", "inbox-ok", "temporaries-ok", "records-ok", "mailboxes-ok" and "contract-ok"
    And the document names the post office "{scratch}/post"
    And the command wrote nothing
    When at the shell I run pi-post doctor
    Then it exits 0, each finding of that document on a line of its own
    And the command wrote nothing

  @INV-16
  Scenario: a post office with planted problems: exit 1, each problem found, nothing written
    Given the mailbox of "builder" holds 40 letters
    And a session "crashed" with id "019a3f32-3333-7444-8555-666677778888" in "{scratch}/crashed" whose pid no process has
    And a session "recycled" with id "019a3f33-4444-7555-8666-777788889999" in "{scratch}/recycled" whose pid another process has now
    And the mailbox of "dashboard" holds a deposit in flight untouched for 37 hours
    And the registry holds a record being replaced for "crashed", untouched for 37 hours
    And the quarantine of "crashed" holds "0000000000001-00000000.json", set aside because "not JSON"
    When at the shell I run pi-post doctor --json
    Then it exits 1, printing a "doctor" document the shipped schema accepts
    And the findings that need attention are, in any order, "mailbox-near-cap", "dead-pid", "recycled-pid", "stale-temporary", "stale-temporary" and "quarantine-held"
    And the finding "mailbox-near-cap" is about "{builder.address}"
    And the finding "dead-pid" is about "{crashed.address}"
    And the finding "recycled-pid" is about "{recycled.address}"
    And the command wrote nothing
    When at the shell I run pi-post doctor
    Then it exits 1, each finding of that document on a line of its own
    And the command wrote nothing

  @INV-16
  Scenario: a session with two listeners running is found, and nothing is written
    Given "builder" has 2 listeners running
    When at the shell I run pi-post doctor --json
    Then it exits 1, printing a "doctor" document the shipped schema accepts
    And the findings that need attention are, in any order, "listeners-several"
    And the finding "listeners-several" is about "{builder.address}"
    And the command wrote nothing

  @INV-16
  Scenario: a deposit in flight for less than 36 hours is not stale
    Given the mailbox of "dashboard" holds a deposit in flight untouched for 35 hours
    When at the shell I run pi-post doctor --json
    Then it exits 0, printing a "doctor" document the shipped schema accepts
    And the findings include "temporaries-ok"
    And the command wrote nothing

  @INV-16
  Scenario Outline: a post office folder that <danger> is found by doctor, which changes nothing
    Given the post office folder <danger>
    When at the shell I run pi-post doctor --json
    Then it exits 1, printing a "doctor" document the shipped schema accepts
    And the findings that need attention are, in any order, "<code>"
    And the command wrote nothing

    Examples:
      | danger                         | code         |
      | is writable by others          | root-mode    |
      | belongs to another user        | root-owner   |
      | is a symlink to another folder | root-symlink |
