@cli @must @INV-21
Feature: Letters cross between the command line and pi-post 0.7 both ways
  What pi-post send writes is the wire form of SPEC 1.2 byte for byte — compact
  JSON, keys in their order, non-ASCII characters as they are — which every
  other implementation reads; and what pi-post 0.7 wrote, laid into a mailbox
  as it is, is what peek shows, as the reference showed it. Escaping is for
  terminals: a body keeps its control characters on the wire.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "gtm" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01" in "{scratch}/gtm", offline
    And I work in "{scratch}/gtm"

  Scenario Outline: a letter the command line writes is the wire form (<body>)
    When at the shell I give pi-post the arguments "send", "--to", "dashboard", "--body", "<body>"
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And that letter is the wire form, byte for byte as pi-post 0.7 writes it
    And that letter is a message of the current version from the process "process:gtm" in "{scratch}/gtm", with no reply address
    And the body of that letter is "<body>"

    Examples:
      | body                                         |
      | plain ASCII                                  |
      | héllo — wörld, 会话, 😀                       |
      | two\nlines\tand a tab                        |
      | \x1b[31mred\x1b[0m, a bell \x07, CSI \x9b, \u202e |
      | 'quoted' and back\\slashed                   |

  Scenario: a letter sent from inside a session carries that session's address to reply to
    Given PI_SESSION_ID is "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01"
    When at the shell I run pi-post send --to dashboard --body "ping"
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And that letter is the wire form, byte for byte as pi-post 0.7 writes it
    And that letter's reply address is "{gtm.address}"

  Scenario: --reply-to none sends no reply address, even from inside a session
    Given PI_SESSION_ID is "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01"
    When at the shell I run pi-post send --to dashboard --body "ping2" --reply-to none
    Then it succeeds, printing "queued {dashboard.address} <id>"
    And that letter is the wire form, byte for byte as pi-post 0.7 writes it
    And that letter has no reply address

  Scenario: letters pi-post 0.7 wrote are shown by peek oldest first, as the reference showed them
    Given the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534425-b8972926.json"
    And the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534364-bb43be6c.json"
    When at the shell I run pi-post peek dashboard
    Then it succeeds, printing the lines "2026-11-30T22:42:14.364Z process:gtm: main moved; rebase before you push" and "2026-11-30T22:42:14.425Z golem:gtmeng-2573: gate green, log at ~/scratch/2573.log "

  Scenario: a letter pi-post 0.7 wrote with a reply address is shown by peek
    Given a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And the mailbox of "cache" holds the letter pi-post 0.7 wrote, "1796078535542-42015a25.json"
    When at the shell I run pi-post peek cache-fix
    Then it succeeds, printing "2026-11-30T22:42:15.542Z process:gtm: ping"

  Scenario: a letter pi-post 0.7 wrote at the cap, in two-byte characters, is shown whole
    Given a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And the mailbox of "cache" holds the letter pi-post 0.7 wrote, "1796078535934-7739307a.json"
    When at the shell I run pi-post peek cache-fix
    Then it succeeds, printing a line with "2026-11-30T22:42:15.934Z process:gtm: éééé"
    And the line it printed holds 16384 "é" characters
