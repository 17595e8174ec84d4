@cli @pipost-only @should
Feature: --json documents for scripts, valid against the shipped schema
  `list`, `resolve`, `peek`, `log` and `quarantine` take `--json` and print one
  JSON document instead of their text, valid against
  src/pipost/schemas/cli.v1.schema.json, carrying the facts a script needs with
  the real strings. Reading stays free of side effects.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And a session "builder" with id "019a3f31-2222-7333-8444-555566667777" in "{scratch}/builder", running as this process
    And a session "recycled" with id "019a3f33-4444-7555-8666-777788889999" in "{scratch}/recycled" whose pid another process has now
    And I work in "{scratch}/gtm"

  @INV-16 @INV-15
  Scenario: list --json gives each session's presence and queued mail, and changes nothing
    Given the mailbox of "dashboard" holds 2 letters
    When at the shell I run pi-post list --all --json
    Then it exits 0, printing a "list" document the shipped schema accepts
    And the document lists "builder" as live with 0 queued
    And the document lists "dashboard" as offline with 2 queued
    And the document lists "recycled" as offline with 0 queued
    And the command wrote nothing

  @INV-16 @INV-13
  Scenario Outline: resolve --json finds a session by its <kind>, and changes nothing
    When at the shell I run pi-post resolve --json <handle>
    Then it exits 0, printing a "resolve" document the shipped schema accepts
    And the document's "address" is "{<session>.address}"
    And the command wrote nothing

    Examples:
      | kind                 | handle                               | session   |
      | address              | {dashboard.address}                  | dashboard |
      | name                 | dashboard                            | dashboard |
      | default name         | cache-fix-d510                       | cache     |
      | directory's basename | cache-fix                            | cache     |
      | absolute path        | {scratch}/old                        | dashboard |
      | relative path        | ../builder                           | builder   |
      | session id           | 019a3f30-1111-7222-8333-444455556666 | dashboard |
      | session id prefix    | 019a3f30                             | dashboard |

  @INV-12
  Scenario: a refused target prints no document
    When at the shell I run pi-post resolve --json nobody
    Then it fails for its targets, saying "nobody", and writes nothing
    And it prints nothing on standard output

  @INV-16 @INV-10 @INV-13
  Scenario: peek --json gives each letter's id, sender, time and body, or why it is not a message
    # The second letter is a message in a file not named after its id: a receiver sets it aside.
    Given the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534364-bb43be6c.json"
    And the mailbox of "dashboard" holds a file "0000000000001-00000000.json" that is not JSON
    And the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534364-bb43be6c.json", named "0000000000002-00000000.json"
    When at the shell I run pi-post peek dashboard --json
    Then it exits 0, printing a "peek" document the shipped schema accepts
    And the document's "address" is "{dashboard.address}"
    And the document's "letters" are, each with its "name", "id", "from.name", "sentAt", "body" and "rejected":
      | name                        | id                     | from.name   | sentAt                   | body                               | rejected |
      | 0000000000001-00000000.json | -                      | -           | -                        | -                                  | <any>    |
      | 0000000000002-00000000.json | -                      | -           | -                        | -                                  | <any>    |
      | 1796078534364-bb43be6c.json | 1796078534364-bb43be6c | process:gtm | 2026-11-30T22:42:14.364Z | main moved; rebase before you push | -        |
    And the command wrote nothing

  @INV-16 @INV-10
  Scenario: log --json and quarantine --json give what was dropped and set aside
    Given the drop log says "1796078534257-0badf00d.json" for "builder" from "process:pong" was dropped: "duplicate: identical body within 10 s"
    And the quarantine of "dashboard" holds "0000000000002-00000000.json", set aside because "not JSON"
    When at the shell I run pi-post log --json
    Then it exits 0, printing a "log" document the shipped schema accepts
    And the document's "drops" are, each with its "at", "address", "letter", "from" and "reason":
      | at                       | address           | letter                      | from         | reason                                |
      | 2026-11-30T22:42:14.257Z | {builder.address} | 1796078534257-0badf00d.json | process:pong | duplicate: identical body within 10 s |
    And the command wrote nothing
    When at the shell I run pi-post quarantine --json
    Then it exits 0, printing a "quarantine" document the shipped schema accepts
    And the document's "letters" are, each with its "address", "name", "reason" and "path":
      | address             | name                        | reason   | path                                                                |
      | {dashboard.address} | 0000000000002-00000000.json | not JSON | {scratch}/post/quarantine/{dashboard.address}/0000000000002-00000000.json |
    And the command wrote nothing

  @INV-16
  Scenario: an empty log and an empty quarantine are empty lists
    When at the shell I run pi-post log --json
    Then it exits 0, printing a "log" document the shipped schema accepts
    And the document's "drops" is empty
    When at the shell I run pi-post quarantine --json
    Then it exits 0, printing a "quarantine" document the shipped schema accepts
    And the document's "letters" is empty
