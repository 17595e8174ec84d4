@INV-05 @INV-10 @must
Feature: verdicts per assertion (the kit checks itself)

  Scenario: a failed assertion fails only the invariant its step names
    Given a world
    Then the INV-10 assertion fails
    And the INV-05 assertion passes

  Scenario: a step that checks two invariants fails the one its message names
    Given a world
    Then the INV-05 and INV-10 assertion fails naming INV-10
    And the INV-05 assertion passes

  Scenario: a step that checks two invariants fails only the one the scenario pins
    Given a world
    Then the INV-08 and INV-10 assertion fails
    And the INV-05 assertion passes

  Scenario: an assertion of an invariant the scenario does not pin is a precondition
    Given a world
    Then the INV-08 assertion passes
    And the INV-08 assertion fails
    And the INV-05 assertion passes

  @should
  Scenario: a failing precondition is an error
    Given a precondition that fails
    Then the INV-05 assertion passes

  Scenario: an assertion step that names no invariant is an error
    Given a world
    Then an assertion that names no invariant fails
    And the INV-05 assertion passes

  Scenario: an error answer is an error
    Given a world
    When the implementation answers an error
    Then the INV-05 assertion passes

  Scenario: an unanswered call is a timeout
    Given a world
    When the implementation does not answer

  @should @must
  Scenario: every assertion passes
    Given a world
    Then the INV-05 assertion passes
