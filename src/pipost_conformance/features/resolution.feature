Feature: Resolution: every handle resolves, nothing is guessed
  A target is an address, a path, a session id or a unique prefix of one (8 or
  more hex characters), a name, or the basename of a session's directory.
  Sessions whose process exists outrank offline ones; what is still ambiguous is
  refused with every candidate listed, and what matches nothing is refused with
  the reachable sessions listed. A send resolves all of its at most 8 targets
  before it writes anything.

  Background:
    Given a live session "gtm-summoner" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01" in "{scratch}/home/dev/gtm"
    And a live session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" registered without a name in "{scratch}/home/dev/cache-fix"
    And a live session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/home/dev/old"
    And I am working in "{scratch}/home/dev/gtm"
    And my home is "{scratch}/home/dev"

  @INV-13 @must
  Scenario Outline: a session is found by its <kind>
    When I resolve "<handle>"
    Then it resolves to "<session>"

    Examples:
      | kind                       | handle                               | session      |
      | address                    | {dashboard.address}                  | dashboard    |
      | name                       | dashboard                            | dashboard    |
      | default name               | cache-fix-d510                       | cache        |
      | default name, though named | old-6bb4                             | dashboard    |
      | directory's basename       | cache-fix                            | cache        |
      | absolute path              | {scratch}/home/dev/old                        | dashboard    |
      | path with detours          | {scratch}/home/dev//old/../old/               | dashboard    |
      | caller's own directory     | .                                    | gtm-summoner |
      | relative path              | ../cache-fix                         | cache        |
      | path from home             | ~/old                                | dashboard    |
      | session id                 | 019a3f30-1111-7222-8333-444455556666 | dashboard    |
      | unique session id prefix   | 019a3f30                             | dashboard    |
      | prefix in capitals         | 019A3F30-1111                        | dashboard    |

  @INV-13 @must
  Scenario: a path through a symlink finds the session in the real directory
    Given a directory "{scratch}/real/project" and a symlink "{scratch}/link" to "{scratch}/real"
    And a live session "linked" in "{scratch}/link/project"
    When I resolve "{scratch}/link/project"
    Then it resolves to "linked"
    And the record of "linked" names the directory "{scratch}/real/project" and the pid of its process

  @INV-13 @must
  Scenario: a hex-looking handle that is no session id is tried as a name
    Given a live session "deadbeef" in "{scratch}/home/dev/hex"
    When I resolve "deadbeef"
    Then it resolves to "deadbeef"

  @INV-12 @must
  Scenario Outline: two live sessions in one directory are never guessed between (<handle>)
    Given a live session "twin-a" in "{scratch}/home/dev/shared"
    And a live session "twin-b" in "{scratch}/home/dev/shared"
    When I send "which of you?" to "<handle>"
    Then the send is refused as "ambiguous_target" with handle "<handle>" and candidates "twin-a" and "twin-b"
    And the refused batch wrote nothing

    Examples:
      | handle           |
      | {scratch}/home/dev/shared |
      | shared           |

  @INV-12 @must
  Scenario: a prefix that two session ids share is refused, listing both
    When I resolve "019a3f2e"
    Then it is refused as "ambiguous_target" with handle "019a3f2e" and candidates "gtm-summoner" and "cache"

  @INV-12 @INV-15 @must
  Scenario Outline: a session whose process exists outranks an offline one (<a> and <b>)
    Given a session "twin-a" in "{scratch}/home/dev/shared" that is <a>, last seen 1 minute ago
    And a session "twin-b" in "{scratch}/home/dev/shared" that is <b>, last seen 2 minutes ago
    When I resolve "{scratch}/home/dev/shared"
    Then it resolves to "<winner>"

    Examples:
      | a       | b       | winner |
      | stalled | offline | twin-a |
      | offline | stalled | twin-b |

  @INV-12 @should
  Scenario: an unknown handle is refused, offering the sessions that can be reached
    Given an offline session "ghost" in "{scratch}/home/dev/ghost" last seen 1 hour ago
    When I send "anyone?" to "nobody"
    Then the send is refused as "unknown_target" with handle "nobody"
    And the refusal offers the reachable sessions "gtm-summoner", "cache" and "dashboard"
    And the refused batch wrote nothing

  @INV-12 @must
  Scenario: seven hex characters are not a session id prefix
    When I resolve "019a3f3"
    Then it is refused as "unknown_target" with handle "019a3f3"

  @INV-12 @must
  Scenario: one unknown target refuses the whole send
    When I send "fan-out" to "cache-fix", "nobody" and "dashboard"
    Then the send is refused as "unknown_target" with handle "nobody"
    And the refused batch wrote nothing

  @INV-12 @must
  Scenario: more than eight targets are a broadcast, and refused
    When I send "to all" to "dashboard" 9 times over
    Then the send is refused as "too_many_targets" with count 9 and cap 8
    And the refused batch wrote nothing

  @INV-12 @INV-13 @must
  Scenario: eight handles for one session make one deposit
    When I send "once only" to "dashboard" 8 times over
    Then the send is queued for "dashboard"
    And the mailbox of "dashboard" holds 1 message

  @INV-12 @INV-13 @must
  Scenario: handles of different kinds naming one session collapse, in the order first named
    When I send "fan-out" to "cache-fix", "dashboard" and "{scratch}/home/dev/cache-fix"
    Then the send is queued for "cache" and "dashboard"
    And the mailbox of "cache" holds 1 message
