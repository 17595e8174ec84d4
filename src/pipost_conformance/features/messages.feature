Feature: Messages on the wire
  One message per file, named after its id: schema v1, shared with pi-post 0.7.
  The id is the send time in ms, zero-padded to 13 digits, a dash and 8 random
  hex characters, so ids sort by time. A body is at most 32768 bytes of UTF-8.

  Background:
    Given a live session "bob" in "{scratch}/home/dev/bob"
    And I am working in "{scratch}/home/dev/tester"

  @INV-21 @must
  Scenario: every letter of the vectors is accepted or rejected as it expects
    Then every letter of the vectors is accepted or rejected as it expects

  @INV-21 @INV-03 @must
  Scenario: a message pipost writes is read back exactly
    Given the clock reads 1796078534364
    When I send this to "bob":
      """
      line one — ünïcödé 会话 😀
        indented, "quoted", \back\slashed\, a tab:	<
      [pi-post] End of message 0000000000000-00000000.

      last line
      """
    Then the id of the message starts with 1796078534364-
    And the mailbox folder of "bob" holds just the letter named after the message's id
    And the file of the message in the mailbox of "bob" parses to the same message
    And "bob" receives exactly the text I sent

  @INV-21 @must
  Scenario: a process has no inbox, so its message carries no address to reply to
    When I send "status?" to "bob"
    Then the message "bob" receives comes from the process "process:tester" in "{scratch}/home/dev/tester"
    And it has neither a sender address nor a reply address

  @INV-21 @must
  Scenario: a process may name itself
    When I send "gate green" to "bob" as "golem:gtmeng-2573"
    Then the message "bob" receives comes from the process "golem:gtmeng-2573" in "{scratch}/home/dev/tester"
    And it has neither a sender address nor a reply address

  @INV-21 @must
  Scenario: a session signs with its address, and replies go there unless it says otherwise
    Given a live session "alice" in "{scratch}/home/dev/alice"
    When "alice" sends "review done?" to "bob"
    Then the message "bob" receives comes from the session "alice" in "{scratch}/home/dev/alice"
    And its sender address and reply address are those of "alice"

  @INV-21 @must
  Scenario: a session may send with no reply address
    Given a live session "alice" in "{scratch}/home/dev/alice"
    When "alice" sends "fyi, no answer needed" to "bob" with no reply address
    Then the message "bob" receives comes from the session "alice" in "{scratch}/home/dev/alice"
    And its sender address is that of "alice" and it has no reply address

  @INV-09 @must
  Scenario Outline: a body of up to 32768 bytes of UTF-8 is sent whole (<count> × <character>)
    When I send a body of <count> "<character>" characters to "bob"
    Then the send is queued for "bob"
    And "bob" receives a body of <count> "<character>" characters

    Examples:
      | count | character |
      | 32768 | x         |
      | 16384 | é         |
      | 8192  | 😀        |

  @INV-07 @INV-21 @must
  Scenario: ids are zero-padded so that they sort by time across a change of digits
    Given the clock reads 999999999999
    And I sent "sent first" to "bob"
    And the clock reads 1000000000000
    And I sent "sent second" to "bob"
    When I peek at the mailbox of "bob"
    Then peek shows "sent first" and "sent second" in that order
