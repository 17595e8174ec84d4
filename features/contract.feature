Feature: The contract gate — a change to the wire needs a version bump
  The wire contract (the message schema and its rules, the record fields, the
  address rule and its vectors, how files are named) is fingerprinted and pinned
  per message-schema version v in src/pipost/contract_pins.json. `nox -s check`
  fails when the contract differs from the pin of its v, saying what changed.
  These scenarios change a copy of the contract and of the pins, never the
  project's own.

  @INV-21
  Scenario: the contract as it is matches the pin of its version
    When I ask pi-post for its contract
    Then it prints the message schema version and the fingerprint pinned for it

  @INV-21
  Scenario Outline: a change to <part> without a version bump fails the gate, saying what changed; the bump passes it
    Given the contract and its pins as they are
    When <change>, the version staying the same
    Then the contract gate fails, naming "<part>" and showing "<shown>"
    When the version is bumped and the changed contract is pinned for it
    Then the contract gate passes
    And the pin of the version before is unchanged

    Examples:
      | part            | change                                          | shown          |
      | message_schema  | the message schema gains a property "priority"  | priority       |
      | message_rules   | the body cap becomes 65536 bytes                | 65536          |
      | record_fields   | records gain a written field "host"             | host           |
      | address_vectors | the address of "abc" becomes "s-000000000000"   | s-000000000000 |
      | file_naming     | letters are named "inbox/<address>/<id>.msg"    | .msg           |

  @INV-21
  Scenario: a changed contract cannot be pinned under the version already published
    Given the contract and its pins as they are
    When the message schema gains a property "priority", the version staying the same
    Then pinning it under the same version is refused, saying "bump the version"
    And the contract gate still fails
