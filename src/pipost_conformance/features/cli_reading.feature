@cli @must @INV-16
Feature: Reading through the command line changes nothing on disk
  list, resolve and peek only look: after each of them every file and folder of
  the post office is as it was — the same bytes, mode, inode and modification
  time — whatever they were asked, whether they found it or refused, and
  whatever the tree holds: mail, a letter that is not a message, a deposit in
  flight, a mailbox with no record, a session that runs.

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "cache" with id "019a3f2e-7c41-7b3a-9d2e-5f1c8a4b6e02" named by default, in "{scratch}/cache-fix", offline
    And a session "builder" with id "019a3f31-2222-7333-8444-555566667777" in "{scratch}/builder", running as this process
    And a session "twin-a" with id "019a3f32-0000-7000-8000-00000000000a" in "{scratch}/shared", offline
    And a session "twin-b" with id "019a3f32-0000-7000-8000-00000000000b" in "{scratch}/shared", offline
    And the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534364-bb43be6c.json"
    And the mailbox of "dashboard" holds the letter pi-post 0.7 wrote, "1796078534425-b8972926.json"
    And the mailbox of "dashboard" holds a file "0000000000001-00000000.json" that is not JSON
    And the mailbox of "dashboard" holds a deposit in flight untouched for 1 hours
    And the session id "019a3f34-5555-7666-8777-888899990000", which no record names, has a mailbox holding 2 letters, called "orphan"
    And the folder "{scratch}/nobody-here"
    And I work in "{scratch}/gtm"

  Scenario Outline: pi-post <command> leaves the post office as it was
    When at the shell I run pi-post <command>
    Then it exits <code>, and the command wrote nothing

    Examples: what is found
      | command                                  | code |
      | list                                     | 0    |
      | list --all                               | 0    |
      | resolve dashboard                        | 0    |
      | resolve {dashboard.address}              | 0    |
      | resolve {scratch}/old                    | 0    |
      | resolve 019a3f30                         | 0    |
      | resolve builder                          | 0    |
      | resolve cache-fix                        | 0    |
      | resolve {orphan.address}                 | 0    |
      | resolve s-0123456789ab                   | 0    |
      | peek dashboard                           | 0    |
      | peek {dashboard.address}                 | 0    |
      | peek cache-fix                           | 0    |
      | peek builder                             | 0    |
      | peek {orphan.address}                    | 0    |
      | peek s-0123456789ab                      | 0    |

    Examples: what is refused
      | command                                  | code |
      | resolve nobody                           | 1    |
      | resolve {scratch}/shared                 | 1    |
      | resolve {scratch}/nobody-here            | 1    |
      | resolve 019a3f3                          | 1    |
      | peek nobody                              | 1    |
      | peek {scratch}/shared                    | 1    |

  Scenario: an empty post office, with no folder yet, stays without one
    Given there is no post office folder yet
    When at the shell I run pi-post list
    Then it exits 0, and the command wrote nothing
    When at the shell I run pi-post peek s-0123456789ab
    Then it exits 0, and the command wrote nothing
