@must
Feature: Mailboxes
  A session's mailbox holds at most 50 queued messages, taken oldest first.
  A deposit is written under a temporary name and renamed into place, so a
  reader sees a whole letter or none; readers look only at names ending in
  ".json" that do not start with a dot.

  Background:
    Given a live session "bob" in "{scratch}/home/dev/bob"

  @INV-07
  Scenario: messages are taken oldest first, and a taken message is gone
    Given I sent "one" to "bob"
    And the clock advances by 1 ms
    And I sent "two" to "bob"
    And the clock advances by 1 second
    And I sent "three" to "bob"
    When "bob" takes every message
    Then "bob" received "one", "two" and "three" in that order
    And the mailbox of "bob" holds 0 messages

  @INV-07
  Scenario: the order comes from the ids, not from when the files appeared
    Given the mailbox of "bob" holds letters written newest first:
      | id                     | body   |
      | 1796078534300-00000003 | third  |
      | 1796078534200-ffffffff | second |
      | 1796078534100-00000001 | first  |
    When "bob" takes every message
    Then "bob" received "first", "second" and "third" in that order

  @INV-08
  Scenario: the 51st message is refused, naming the mailbox, and nothing is written
    Given "bob" has 50 messages queued
    When I send "one too many" to "bob"
    Then the send is refused as "mailbox_full" with address "bob"
    And nothing was written
    And the mailbox of "bob" holds 50 messages

  @INV-08 @INV-12
  Scenario: a full mailbox refuses the whole send, the other targets included
    Given a live session "carol" in "{scratch}/home/dev/carol"
    And "bob" has 50 messages queued
    When I send "to both of you" to "carol" and "bob"
    Then the send is refused as "mailbox_full" with address "bob"
    And nothing was written
    And the mailbox of "carol" holds 0 messages

  @INV-08
  Scenario: a full mailbox takes mail again once a message is taken out
    Given "bob" has 50 messages queued
    And "bob" takes the next message
    When I send "there is room again" to "bob"
    Then the send is queued for "bob"
    And the mailbox of "bob" holds 50 messages

  @INV-03
  Scenario: a deposit in flight is not counted, peeked or taken
    Given I sent "a whole letter" to "bob"
    And the mailbox of "bob" holds a deposit in flight "1796078534000-0000000f.json.tmp"
    When I count the messages of "bob"
    Then the count is 1
    When I peek at the mailbox of "bob"
    Then peek shows "a whole letter" in that order
    When "bob" takes every message
    Then "bob" received "a whole letter" in that order
    And the deposit in flight "1796078534000-0000000f.json.tmp" is still in the mailbox of "bob", untouched

  @INV-03
  Scenario Outline: a file named "<name>" is not mail
    Given the mailbox of "bob" holds a valid letter in a file named "<name>"
    When I peek at the mailbox of "bob"
    Then peek shows nothing
    When "bob" takes the next message
    Then "bob" receives nothing
    And the mailbox folder of "bob" holds only "<name>"

    Examples:
      | name                             |
      | .1796078534000-0000000d.json     |
      | 1796078534000-0000000d.json.part |
      | 1796078534000-0000000d.txt       |

  @INV-03
  Scenario: a send leaves the finished letter and nothing half-written
    When I send "hello" to "bob"
    Then the mailbox folder of "bob" holds just the letter named after the message's id
    And no file in the tree is a deposit in flight
    And every folder in the tree is 0700 and every file 0600
