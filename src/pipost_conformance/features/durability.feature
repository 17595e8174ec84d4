@must
Feature: Durable writes, as the system calls show them
  A letter or a record is written under a temporary name readers ignore,
  flushed, renamed into place, and its folder flushed; nothing is ever written
  in place under a ".json" name (SPEC 1, 3.1, 1.3). A claim leaves the letter at
  its name until the unlink (SPEC 3.3). The kit runs the one operation in a
  second process of the implementation under strace and reads what it did;
  where it cannot trace (no strace on PATH, ptrace refused, not Linux), these
  scenarios are not checked.

  Background:
    Given the implementation's system calls can be traced
    And a live session "bob" in "{scratch}/home/dev/bob"

  @INV-03 @INV-04 @INV-08
  Scenario: a deposit is renamed into place and flushed before its receipt, counted under its lock
    When I send "kept across a power loss" to "bob", its system calls traced
    Then no letter or record was opened for writing or truncated
    And the letter got its name by a rename from a temporary in its folder
    And its bytes and its name were flushed before the answer
    And it counted the mailbox holding an exclusive lock on it, before the rename

  @INV-03 @INV-04
  Scenario: a record is renamed into place and flushed before the session is told
    When a session "carol" registers in "{scratch}/home/dev/carol", its system calls traced
    Then no letter or record was opened for writing or truncated
    And the record got its name by a rename from a temporary in its folder
    And its bytes and its name were flushed before the answer

  @INV-03 @INV-04
  Scenario: a claim reads the letter and leaves it at its name until the unlink
    Given I sent "taken once" to "bob"
    When "bob" takes the next message, its system calls traced
    Then no letter or record was opened for writing or truncated
    And the letter stayed at its name until its unlink
