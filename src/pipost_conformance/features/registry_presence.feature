Feature: Presence, and records that outlive their processes
  A session is live while its process runs, is the process that registered,
  and refreshed its record within 45 s (it beats every 30 s); stalled while
  the process exists but stopped refreshing; offline when it has no pid, a dead
  pid or a recycled one. Shutdown takes the pid out and keeps the record.

  Background:
    Given a live session "alice" in "{scratch}/home/dev/alice"

  @INV-15 @must
  Scenario: a session that just registered is live, and its record says where it runs
    Then "alice" is live
    And the record of "alice" names the directory "{scratch}/home/dev/alice" and the pid of its process

  @INV-15 @must
  Scenario Outline: presence follows the heartbeat: <silence> of silence
    When the clock advances by <silence>
    Then "alice" is <presence>

    Examples:
      | silence                      | presence |
      | 30 seconds                   | live     |
      | 45 seconds                   | live     |
      | 45 seconds and 1 ms          | stalled  |
      | 3 days                       | stalled  |

  @INV-15 @must
  Scenario: a session seen ahead of the clock (the wall clock stepped back) is live, not stalled
    When the wall clock steps back by 1 hour
    Then "alice" is live

  @INV-15 @must
  Scenario: a stalled session that beats again is live again
    Given the clock advances by 2 minutes
    When "alice" heartbeats
    Then "alice" is live

  @INV-15 @must
  Scenario: a session whose process died is offline, however fresh its record
    When the process of "alice" exits
    Then "alice" is offline

  @INV-15 @must
  Scenario: a pid reused by an unrelated process does not bring back a session whose record can tell
    # SPEC 2: wherever the record lets it tell, which it does when it holds the
    # process's start time; a record without one (pi-post 0.7's) cannot.
    Given the record of "alice" holds the start time of its process
    When the pid of "alice" is taken by an unrelated process
    Then "alice" is offline

  @INV-15 @should
  Scenario: a pid reused by an unrelated process does not bring the session back
    When the pid of "alice" is taken by an unrelated process
    Then "alice" is offline

  @INV-15 @INV-21 @must
  Scenario: a record pi-post 0.7 wrote, without a process start time, is live while its pid runs
    Given the registry holds a record pi-post 0.7 wrote for "legacy" in "{scratch}/home/dev/legacy", its pid running
    When I list the sessions
    Then the sessions listed are, in order:
      | name   | presence |
      | alice  | live     |
      | legacy | live     |

  @INV-14 @INV-15 @must
  Scenario: shutdown marks the session offline and keeps its record
    When "alice" shuts down
    Then "alice" is offline
    And the record of "alice" is still there, without a pid

  @INV-14 @must
  Scenario: mail for a session that shut down waits for it
    Given "alice" shuts down
    And the process of "alice" exits
    When I send "for when you are back" to "alice"
    Then the send is queued for "alice"
    And the mailbox of "alice" holds 1 message

  @INV-14 @INV-15 @must
  Scenario: a record outlives a process that died without shutting down
    Given the process of "alice" exits
    And the clock advances by 3 days
    When I list all sessions
    Then the sessions listed are, in order:
      | name  | presence |
      | alice | offline  |

  @INV-15 @must
  Scenario: listings put live sessions first, then stalled, then offline, each newest first
    Given a stalled session "bob" in "{scratch}/home/dev/bob"
    And an offline session "carol" in "{scratch}/home/dev/carol" last seen 2 hours ago
    And an offline session "dave" in "{scratch}/home/dev/dave" last seen 1 hour ago
    And "bob" has 2 messages queued
    When I list the sessions
    Then the sessions listed are, in order:
      | name  | presence | queued |
      | alice | live     | 0      |
      | bob   | stalled  | 2      |
      | dave  | offline  | 0      |
      | carol | offline  | 0      |

  @INV-21 @must
  Scenario Outline: a listing leaves out offline sessions unseen for over a day with nothing queued (<unseen>, <queued> queued)
    Given an offline session "carol" in "{scratch}/home/dev/carol" last seen <unseen> ago
    And "carol" has <queued> messages queued
    When I list the sessions
    Then the sessions listed are <listed>
    And <hidden> sessions are hidden

    Examples:
      | unseen         | queued | listed              | hidden |
      | 1 day          | 0      | "alice" and "carol" | 0      |
      | 1 day and 1 ms | 0      | "alice"             | 1      |
      | 30 days        | 1      | "alice" and "carol" | 0      |

  @INV-13 @INV-21 @must
  Scenario: an unnamed session is known by the default name the reference gives it
    Given a live session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" registered without a name in "{scratch}/home/dev/cache-fix"
    Then "cache" is named "cache-fix-d510"
