@cli @must @INV-15
Feature: Listings say honestly whether a session is live, stalled or offline
  A record names the pid of the process that runs the session, and the time it
  last beat (every 30 s). A session is live when that process exists and beat
  within 45 s, stalled when it exists and stopped beating, and offline when it
  has no pid or its process has ended. The records are laid out by hand with
  the pids of real processes: this one, which runs, and one that ended. list
  says "live" or "offline" as the reference does, and a stalled session is
  neither; resolve's card says it on its "presence:" line.

  Background:
    Given I work in "{scratch}/gtm"

  Scenario Outline: a session whose record <has> is <presence> in list and resolve
    Given <session>
    When at the shell I run pi-post list --all
    Then the listing shows "probe" as <presence>
    When at the shell I run pi-post resolve probe
    Then the card shows it <presence>

    Examples:
      | has                                         | presence | session                                                                                                                        |
      | the pid of this process, seen just now      | live     | a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", running as this process                  |
      | the pid of this process, silent for 60 s    | stalled  | a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", running as this process but silent for 60 seconds |
      | the pid of a process that ended             | offline  | a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", seen just now, whose pid is that of a process that ended |
      | no pid: it shut down                        | offline  | a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", offline                                  |

  Scenario: a session silent for 40 s is still live
    Given a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", running as this process but silent for 40 seconds
    When at the shell I run pi-post list
    Then the listing shows "probe" as live

  Scenario: live, stalled and offline sessions side by side are each shown as they are
    Given a session "runs" with id "019a3f40-0000-7000-8000-000000000002" in "{scratch}/runs", running as this process
    And a session "hangs" with id "019a3f40-0000-7000-8000-000000000003" in "{scratch}/hangs", running as this process but silent for 120 seconds
    And a session "ended" with id "019a3f40-0000-7000-8000-000000000004" in "{scratch}/ended", seen just now, whose pid is that of a process that ended
    And a session "stopped" with id "019a3f40-0000-7000-8000-000000000005" in "{scratch}/stopped", offline
    When at the shell I run pi-post list --all
    Then the listing shows "runs" as live
    And the listing shows "hangs" as stalled
    And the listing shows "ended" as offline
    And the listing shows "stopped" as offline

  @INV-11
  Scenario: a send to a live session that takes the letter at once says delivered
    Given a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", running as this process
    And "probe" takes each letter the moment it lands
    When at the shell I send "hello" to "probe" until it is taken within a second
    Then its receipt says delivered

  @INV-11
  Scenario: a send to a live session that leaves the letter on disk says queued
    Given a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe", running as this process
    When at the shell I run pi-post send --to probe --body "hello"
    Then its receipt says queued

  @should
  Scenario: a pid another process has taken since is not the session's process
    The record's pidStart (pipost's addition to the record) is the start time of
    the process that registered; this process runs under the pid but started at
    another time, so the session is offline.
    Given a session "probe" with id "019a3f40-0000-7000-8000-000000000001" in "{scratch}/probe" whose pid another process has now
    When at the shell I run pi-post list --all
    Then the listing shows "probe" as offline
    When at the shell I run pi-post resolve probe
    Then the card shows it offline
