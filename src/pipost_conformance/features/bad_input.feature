Feature: Bad input gets a clear answer, never a crash and never half a job
  What a sender gets wrong is refused before anything is written. What reaches
  a reader broken is never delivered: a bad letter is set aside, not destroyed,
  and the mail behind it still flows; a broken record is skipped.

  Background:
    Given a live session "bob" in "{scratch}/home/dev/bob"
    And the clock advances by 1 second
    And a live session "alice" in "{scratch}/home/dev/alice"

  @INV-09 @must
  Scenario Outline: a body over the cap is refused with its size and the cap (<count> × <character>)
    When I send a body of <count> "<character>" characters to "bob"
    Then the send is refused as "body_too_large" with size <bytes> and cap 32768
    And the refused body was written nowhere

    Examples:
      | count | character | bytes |
      | 32769 | x         | 32769 |
      | 16385 | é         | 32770 |
      | 8193  | 😀        | 32772 |

  @INV-09 @must
  Scenario: an empty body is refused, and nothing is written
    When I send an empty body to "bob"
    Then the send is refused as "empty_body"
    And the refused body was written nowhere

  @INV-09 @must
  Scenario: a body of nothing but blanks is refused, and nothing is written
    When I send a body of 40 " " characters to "bob"
    Then the send is refused as "empty_body"
    And the refused body was written nowhere

  @INV-12 @must
  Scenario: an unknown target is refused
    When I send "hello?" to "bobby"
    Then the send is refused as "unknown_target" with handle "bobby"
    And the refused batch wrote nothing

  @INV-12 @should
  Scenario: an unknown target is refused with the reachable sessions listed
    When I send "hello?" to "bobby"
    Then the send is refused as "unknown_target" with reachable "bob" and "alice"

  @INV-12 @must
  Scenario: an ambiguous target is refused with every candidate listed
    Given a live session "api-reviewer" in "{scratch}/home/dev/api"
    And a live session "api-fixer" in "{scratch}/srv/checkouts/api"
    When I send "which of you?" to "{scratch}/home/dev/bob", "alice" and "api"
    Then the send is refused as "ambiguous_target" with handle "api" and candidates "api-reviewer" and "api-fixer"
    And the refused batch wrote nothing

  @INV-12 @must
  Scenario: more than eight targets are refused
    When I send "everyone" to "bob", "alice", "bob", "alice", "bob", "alice", "bob", "alice" and "bob"
    Then the send is refused as "too_many_targets" with count 9 and cap 8
    And the refused batch wrote nothing

  @INV-10 @INV-09 @must
  Scenario Outline: a letter with <field> set to <value> is set aside, and the mail behind it flows
    Given the oldest letter in the mailbox of "bob" is a valid letter with <field> set to <value>
    And I sent "after the bad one" to "bob"
    When "bob" takes the next message
    Then "bob" receives "after the bad one"
    And the bad letter was set aside as <reason>
    And the mailbox of "bob" holds 0 messages

    Examples: wrong version, bad field types, bad addresses, an id that is not its file name
      | field        | value                    | reason                                |
      | v            | 0                        | "bad_field" with field "v"            |
      | v            | "1"                      | "bad_field" with field "v"            |
      | sentAt       | "1796078534000"          | "bad_field" with field "sentAt"       |
      | body         | 42                       | "bad_field" with field "body"         |
      | from         | "hand-written"           | "bad_field" with field "from"         |
      | from.kind    | "robot"                  | "bad_field" with field "from.kind"    |
      | from.name    | ""                       | "bad_field" with field "from.name"    |
      | from.address | "../../x"                | "bad_field" with field "from.address" |
      | replyTo      | "../../x"                | "bad_field" with field "replyTo"      |
      | replyTo      | 7                        | "bad_field" with field "replyTo"      |
      | id           | "0000000000001-00000000" | "id_mismatch"                         |
      | unknown      | "field"                  | "bad_field" with field "unknown"      |

  @INV-10 @INV-09 @must
  Scenario Outline: a letter that is <damage> is set aside, and the mail behind it flows
    Given the oldest letter in the mailbox of "bob" is damaged: <damage>
    And I sent "after the bad one" to "bob"
    When "bob" takes the next message
    Then "bob" receives "after the bad one"
    And the bad letter was set aside as <reason>

    Examples:
      | damage                              | reason                          |
      | an empty file                                | "not_json"                      |
      | half of a letter, cut off mid-write | "not_json"                      |
      | a JSON array                        | "not_object"                    |
      | a letter with a duplicated key      | "duplicate_key" with key "body" |
      | bytes that are not UTF-8            | "not_utf8"                      |
      | JSON nested 100000 deep             | "too_deep"                      |
      | a file of 300000 bytes                       | "oversize"                      |
      | a letter whose body is one byte over the cap | "bad_field" with field "body" |

  @INV-10 @should
  Scenario Outline: a bad letter that is <damage> is kept outside the mailboxes, not destroyed
    Given the oldest letter in the mailbox of "bob" is damaged: <damage>
    When "bob" takes the next message
    Then the bad letter is kept outside the mailboxes, whole or its head when oversize

    Examples:
      | damage                              |
      | half of a letter, cut off mid-write |
      | a file of 300000 bytes              |

  @INV-12 @INV-16 @must
  Scenario Outline: <garbage> in the registry is skipped by listing and resolution
    Given the registry holds, for a session "ghost", <garbage>
    And I remember the tree
    When I list all sessions
    Then the sessions listed are "alice" and "bob"
    When I resolve "ghost"
    Then it is refused as "unknown_target" with handle "ghost"
    And the tree is byte-identical to what I remembered

    Examples:
      | garbage                                         |
      | an empty file                                   |
      | half of a record, cut off mid-write             |
      | a JSON array                                    |
      | a record of version 0                           |
      | a record whose pid is text                      |
      | a record without a cwd                          |
      | a record whose address is not its session id's  |
      | a record filed under another address            |

  @INV-12 @INV-21 @must
  Scenario: a well-formed record written by hand is listed and resolved, so the garbage above is what is skipped
    Given the registry holds a record pi-post 0.7 wrote for "ghost" in "{scratch}/home/dev/ghost", its pid running
    When I resolve "ghost"
    Then it resolves to the session named "ghost"
