Feature: Wire compatibility with pi-post 0.7, both directions
  pipost reads what the reference pi-post 0.7 CLI wrote and writes what it
  would read: the golden files in tests/fixtures/interop are real output of
  the reference, and the registry its transcripts were made with.

  @INV-21 @must
  Scenario: every message file the reference wrote parses to exactly its content
    Then every message file the reference wrote parses, its id matching its file name

  @INV-21 @INV-07 @must
  Scenario Outline: mail the reference queued for <address> is drained oldest first, as written
    Given the message files the reference wrote are in their mailboxes
    When "<address>" takes every message
    Then the messages taken are the reference's files for "<address>", oldest first
    And the mailbox of "<address>" holds 0 messages

    Examples:
      | address        |
      | s-d51010b8f7a1 |
      | s-6bb4b1bc7f53 |
      | s-52c78af935a3 |

  @INV-21 @must
  Scenario Outline: pipost writes the bytes the reference wrote: "<body>" to <target>
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    And the clock reads <sent at>
    When I send "<body>" to "<target>" with the reply address "<reply to>"
    Then the letter pipost wrote to "<address>" is the reference's "<file>" but for its random part

    Examples:
      | target       | body                               | reply to       | sent at       | address        | file                                                     |
      | dashboard    | main moved; rebase before you push | none           | 1796078534364 | s-6bb4b1bc7f53 | s-6bb4b1bc7f53--1796078534364-bb43be6c.json              |
      | cache-fix    | ping                               | s-52c78af935a3 | 1796078535542 | s-d51010b8f7a1 | s-d51010b8f7a1--1796078535542-42015a25.json              |
      | gtm-summoner | are you there?                     | none           | 1796078536114 | s-52c78af935a3 | s-52c78af935a3--1796078536114-ab36f83c.json              |

  @INV-21 @INV-09 @must
  Scenario: pipost writes the reference's letter of exactly 32768 bytes of "é"
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    And the clock reads 1796078535934
    When I send a body of 16384 "é" characters to "cache-fix"
    Then the letter pipost wrote to "s-d51010b8f7a1" is the reference's "s-d51010b8f7a1--1796078535934-7739307a.json" but for its random part

  @INV-21 @INV-15 @must
  Scenario: sessions the reference registered are listed as the reference listed them
    Given the registry the reference's transcripts were made with, its live session running
    When I list the sessions
    Then the sessions listed are, in order:
      | name           | presence |
      | gtm-summoner   | live     |
      | twin-a         | offline  |
      | twin-b         | offline  |
      | cache-fix-d510 | offline  |
    And 2 sessions are hidden

  @INV-21 @INV-15 @must
  Scenario: with --all, every session the reference registered is listed, queued mail counted
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    And I sent "main moved; rebase before you push" to "dashboard"
    And I sent "gate green" to "dashboard"
    When I list all sessions
    Then the sessions listed are, in order:
      | name           | presence | queued |
      | gtm-summoner   | live     | 0      |
      | twin-a         | offline  | 0      |
      | twin-b         | offline  | 0      |
      | cache-fix-d510 | offline  | 0      |
      | dashboard      | offline  | 2      |
      | old-idea       | offline  | 0      |

  @INV-21 @INV-13 @must
  Scenario Outline: "<handle>" resolves as the reference resolved it
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    When I resolve "<handle>"
    Then it resolves to the session named "<name>"

    Examples:
      | handle                               | name           |
      | gtm-summoner                         | gtm-summoner   |
      | cache-fix-d510                       | cache-fix-d510 |
      | cache-fix                            | cache-fix-d510 |
      | {scratch}/home/dev/gtm                        | gtm-summoner   |
      | .                                    | gtm-summoner   |
      | 019a3f30-1111-7222-8333-444455556666 | dashboard      |
      | 019a3f30                             | dashboard      |

  @INV-21 @INV-12 @must
  Scenario Outline: "<handle>" is refused as the reference refused it
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    And a directory "{scratch}/home/dev/elsewhere"
    When I resolve "<handle>"
    Then it is refused as "<code>" with handle "<handle>"<facts>

    Examples:
      | handle              | code             | facts                                                  |
      | 019a3f3             | unknown_target   |                                                        |
      | nobody              | unknown_target   |                                                        |
      | {scratch}/home/dev/elsewhere | unknown_target   | and path "{scratch}/home/dev/elsewhere"                         |
      | {scratch}/home/dev/shared    | ambiguous_target | and candidates "s-1cd883c34fbb" and "s-747efe845211"   |
      | {scratch}/home/dev/old       | ambiguous_target | and candidates "s-6bb4b1bc7f53" and "s-f5e9b8d9f56c"   |

  @INV-21 @INV-12 @must
  Scenario: a fan-out whose handles name one session twice deposits once per session, as the reference did
    Given the registry the reference's transcripts were made with, its live session running
    And I am working in "{scratch}/home/dev/gtm"
    When I send "fan-out" to "cache-fix", "dashboard" and "{scratch}/home/dev/cache-fix"
    Then the send is queued for "s-d51010b8f7a1" and "s-6bb4b1bc7f53"
