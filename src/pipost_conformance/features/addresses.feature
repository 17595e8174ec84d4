Feature: Addresses belong to conversations
  An address is "s-" and the first 12 hex characters of SHA-256 over "session",
  a NUL byte and the session id. It is a pure function of the session id, so
  every process and every restart derives the same one. Only sessions have
  addresses: a directory is a query that finds the session running in it.

  @INV-01 @INV-21 @must
  Scenario: the address of a session id is the one the reference computed
    When I ask for the address of session id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e01"
    Then the address is "s-52c78af935a3"

  @INV-01 @INV-21 @must
  Scenario: every vector of the addresses, control characters included
    Then every address of the vectors is the one derived from its session id

  @INV-01 @INV-14 @must
  Scenario: a conversation resumed elsewhere keeps its address and its mail
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And I sent "while you were away" to "alice"
    And "alice" shuts down
    And the process of "alice" exits
    When "alice" starts again in "{scratch}/home/dev/elsewhere"
    Then "alice" has the address it had before
    And "alice" is live
    And the mailbox of "alice" holds 1 message

  @INV-02 @must
  Scenario: a directory names whichever session runs in it now
    Given an offline session "first" in "{scratch}/home/dev/project" last seen 2 hours ago
    And a live session "second" in "{scratch}/home/dev/project"
    When I send "hello" to "{scratch}/home/dev/project"
    Then the send is queued for "second"
    And the mailbox of "first" holds 0 messages
    And every mailbox folder is named by a session address

  @INV-02 @INV-12 @must
  Scenario: a directory with no session in it is refused, never made into a mailbox
    Given a live session "alice" in "{scratch}/home/dev/alice"
    And a directory "{scratch}/home/dev/nobody-here"
    When I send "hello" to "{scratch}/home/dev/nobody-here"
    Then the send is refused as "unknown_target" with handle "{scratch}/home/dev/nobody-here" and path "{scratch}/home/dev/nobody-here"
    And the refused batch wrote nothing
    And no mailbox was made but for the sessions of the scenario

  @INV-02 @INV-12 @should
  Scenario: an address that no session registered and no mailbox holds is refused
    When I send "hello" to "s-0123456789ab"
    Then the send is refused as "unknown_address" with address "s-0123456789ab"
    And the refused batch wrote nothing

  @INV-02 @INV-21 @must
  Scenario: an address whose mailbox exists is reachable without a record
    Given an empty mailbox folder for "s-0123456789ab"
    When I send "left for you" to "s-0123456789ab"
    Then the send is queued for "s-0123456789ab"
    And the mailbox of "s-0123456789ab" holds 1 message
