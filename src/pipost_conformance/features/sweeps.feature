Feature: Sweeps: messages outrank tidiness
  A record is swept only when its session is offline, unseen for more than 7
  days, and its mailbox holds nothing. A mailbox folder is swept only when it is
  empty and no record names it; mail is never swept, at any age. A temporary
  file (*.tmp, in a mailbox or in the registry) untouched for more than 36 hours
  was left by a writer that died: the sweep removes it first, and nothing else.

  @INV-17 @must
  Scenario Outline: a record is swept only when all three conditions hold (<presence>, <unseen>, <queued> queued)
    Given a session "old" in "{scratch}/home/dev/old" that is <presence>, last seen <unseen> ago
    And "old" has <queued> messages queued
    When the post office is swept
    Then the record of "old" was <fate>

    Examples:
      | presence | unseen             | queued | fate    |
      | offline  | 8 days             | 0      | removed |
      | offline  | 7 days and 1 ms    | 0      | removed |
      | offline  | 7 days             | 0      | kept    |
      | offline  | 365 days           | 1      | kept    |
      | stalled  | 365 days           | 0      | kept    |
      | live     | 10 seconds         | 0      | kept    |

  @INV-17 @must
  Scenario: a record seen ahead of the clock (the wall clock stepped back 8 days) is not unseen for 7 days
    Given a session "old" in "{scratch}/home/dev/old" that is offline, last seen 1 minute ago
    And the wall clock steps back by 8 days
    When the post office is swept
    Then the record of "old" was kept

  @INV-17 @must
  Scenario: the sweep judges every record: a live or stalled one does not shield the stale ones after it
    # By address, "dave" comes first, then "alice", "carol", "erin" and "bob". The
    # stale ones register last: an implementation may sweep when a session starts
    # (SPEC 5), and the sweep judged is the one below.
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And a stalled session "bob" in "{scratch}/home/dev/bob"
    And an offline session "dave" in "{scratch}/home/dev/dave" last seen 30 days ago
    And an offline session "carol" in "{scratch}/home/dev/carol" last seen 30 days ago
    And an offline session "erin" in "{scratch}/home/dev/erin" last seen 30 days ago
    When the post office is swept
    Then the record of "dave" was removed
    And the record of "carol" was removed
    And the record of "erin" was removed
    And the record of "alice" was kept
    And the record of "bob" was kept

  @INV-17 @must
  Scenario: a session offline for a year keeps its mail, its mailbox and its record
    Given an offline session "hermit" in "{scratch}/home/dev/hermit" last seen 365 days ago
    And I sent "still waiting for you" to "hermit"
    And the clock advances by 365 days
    When the post office is swept
    Then the sweep removed nothing
    And the mailbox of "hermit" holds 1 message
    When "hermit" takes the next message
    Then "hermit" receives "still waiting for you"

  @INV-17 @must
  Scenario: mail that no record names is never swept
    Given the mailbox of "s-0123456789ab" holds letters written newest first:
      | id                     | body                   |
      | 1700000000000-0000000a | for a session long gone |
    And the clock advances by 365 days
    When the post office is swept
    Then the sweep removed nothing
    And the mailbox of "s-0123456789ab" holds 1 message

  @INV-17 @must
  Scenario: an empty mailbox folder that no record names is swept; a registered one is kept
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And an empty mailbox folder for "alice"
    And an empty mailbox folder for "s-0123456789ab"
    When the post office is swept
    Then the sweep removed the mailbox folder of "s-0123456789ab"
    And the mailbox folder of "alice" exists
    And the record of "alice" was kept

  @INV-17 @must
  Scenario: a session that registers while the sweep waits for its mailbox is judged by its new record
    # Its receiver starting, as the sweep that found its old record waits for the
    # mailbox's lock: the record is read again under the lock, and kept.
    Given an offline session "back" in "{scratch}/home/dev/back" last seen 8 days ago
    And an empty mailbox folder for "back"
    When the post office is swept while "back" registers again, the sweep waiting for its mailbox
    Then the record of "back" was kept
    And the mailbox folder of "back" exists

  @INV-17 @must
  Scenario: a swept record takes its empty mailbox folder with it
    Given an offline session "gone" in "{scratch}/home/dev/gone" last seen 30 days ago
    And an empty mailbox folder for "gone"
    When the post office is swept
    Then the record of "gone" was removed
    And the sweep removed the mailbox folder of "gone"

  @INV-17 @INV-03 @must
  Scenario: a deposit in flight keeps its mailbox folder from being swept
    Given the mailbox of "s-0123456789ab" holds a deposit in flight "1796078534000-0000000f.json.tmp"
    When the post office is swept
    Then the sweep removed nothing
    And the deposit in flight "1796078534000-0000000f.json.tmp" is still in the mailbox of "s-0123456789ab", untouched

  @INV-17 @INV-03 @should
  Scenario: a temporary untouched for more than 36 hours is swept, and then its orphan mailbox
    Given the mailbox of "s-0123456789ab" holds a deposit in flight "1796078534000-0000000f.json.tmp"
    And the files in the mailbox of "s-0123456789ab" were last modified 36 hours and 1 ms ago
    When the post office is swept
    Then the sweep removed only the stale temporary "inbox/s-0123456789ab/1796078534000-0000000f.json.tmp"
    And the sweep removed the mailbox folder of "s-0123456789ab"

  @INV-17 @INV-03 @should
  Scenario: beside a stale temporary, a letter a year old is kept with its mailbox
    Given the mailbox of "s-0123456789ab" holds letters written newest first:
      | id                     | body                    |
      | 1700000000000-0000000a | for a session long gone |
    And the mailbox of "s-0123456789ab" holds a deposit in flight "1796078534000-0000000f.json.tmp"
    And the files in the mailbox of "s-0123456789ab" were last modified 365 days ago
    When the post office is swept
    Then the sweep removed only the stale temporary "inbox/s-0123456789ab/1796078534000-0000000f.json.tmp"
    And the mailbox folder of "s-0123456789ab" holds only "1700000000000-0000000a.json"
    And the mailbox of "s-0123456789ab" holds 1 message

  @INV-17 @INV-03 @should
  Scenario: in the registry, a record write in flight for more than 36 hours is swept; one of 36 hours is kept
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And the registry holds a record write in flight ".s-0123456789ab.0a1b2c3d.tmp", last modified 36 hours and 1 ms ago
    And the registry holds a record write in flight ".s-0123456789ab.4e5f6a7b.tmp", last modified 36 hours ago
    When the post office is swept
    Then the sweep removed only the stale temporary "registry/.s-0123456789ab.0a1b2c3d.tmp"
    And the record write in flight ".s-0123456789ab.4e5f6a7b.tmp" is still in the registry, untouched
    And the record of "alice" was kept
