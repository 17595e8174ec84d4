Feature: Reading has no side effects
  Listing, resolving, peeking, counting and looking up a record leave the tree
  byte-identical: every path, mode and byte as it was, whatever the tree holds.

  Background:
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And a stalled session "bob" in "{scratch}/home/dev/bob"
    And an offline session "carol" in "{scratch}/home/dev/carol" last seen 30 days ago
    And "alice" has 2 messages queued
    And the oldest letter in the mailbox of "alice" is damaged: half of a letter, cut off mid-write
    And the mailbox of "alice" holds a deposit in flight "1796078534000-0000000f.json.tmp"
    And an empty mailbox folder for "s-0123456789ab"
    And the registry holds, for a session "ghost", half of a record, cut off mid-write
    And I remember the tree

  @INV-16 @must
  Scenario Outline: <reading> leaves the tree byte-identical
    When I <reading>
    Then the tree is byte-identical to what I remembered

    Examples:
      | reading                            |
      | list the sessions                  |
      | list all sessions                  |
      | resolve "alice"                    |
      | resolve "{scratch}/home/dev/carol"          |
      | resolve "s-0123456789ab"           |
      | resolve "nobody"                   |
      | peek at the mailbox of "alice"     |
      | count the messages of "alice"      |
      | look up the record of "carol"      |
      | look up the record of "ghost"      |

  @INV-16 @INV-15 @must
  Scenario: a listing sees everything there is, and changes none of it
    When I list all sessions
    Then the sessions listed are, in order:
      | name  | presence | queued |
      | alice | live     | 3      |
      | bob   | stalled  | 0      |
      | carol | offline  | 0      |
    And the tree is byte-identical to what I remembered

  @INV-16 @INV-15 @must
  Scenario: a listing without --all leaves out who has been gone for over a day
    When I list the sessions
    Then the sessions listed are "alice" and "bob"
    And 1 session is hidden

  @INV-16 @INV-10 @must
  Scenario: peeking shows a bad letter for what it is and leaves it in place
    When I peek at the mailbox of "alice"
    Then peek shows 2 messages and 1 letter that is not a message
    And the tree is byte-identical to what I remembered
