@cli @must @INV-22
Feature: A post office folder that is not safely the user's own is refused, and nothing is followed
  Whoever can write into the post office can forge mail or swap a folder for a
  symlink. So every command refuses a post office folder that is a symlink, a
  file, someone else's or writable by others, and a registry, inbox or mailbox
  folder that is a symlink: it exits 1 with an error after "pi-post: " that
  names the folder, writes nothing, and reaches nothing through the link (the
  folders it points to stay as they were).

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And the mailbox of "dashboard" holds 2 letters
    And I work in "{scratch}/gtm"

  Scenario Outline: a post office folder that <danger> is refused by pi-post <command>
    Given the post office folder <danger>
    When at the shell I run pi-post <command>
    Then it refuses the post office folder, saying "{scratch}/post", and writes nothing

    Examples: a symlink
      | danger                         | command                                  |
      | is a symlink to another folder | send --to dashboard --body "hello there" |
      | is a symlink to another folder | send --to {dashboard.address} --body "x" |
      | is a symlink to another folder | list                                     |
      | is a symlink to another folder | list --all                               |
      | is a symlink to another folder | resolve dashboard                        |
      | is a symlink to another folder | resolve {dashboard.address}              |
      | is a symlink to another folder | peek dashboard                           |
      | is a symlink to another folder | peek {dashboard.address}                 |

    Examples: a file
      | danger                         | command                                  |
      | is a file                      | send --to dashboard --body "hello there" |
      | is a file                      | list                                     |
      | is a file                      | resolve dashboard                        |
      | is a file                      | peek {dashboard.address}                 |

    Examples: someone else's
      | danger                         | command                                  |
      | belongs to another user        | send --to dashboard --body "hello there" |
      | belongs to another user        | list                                     |
      | belongs to another user        | resolve dashboard                        |
      | belongs to another user        | peek dashboard                           |

    Examples: writable by others
      | danger                         | command                                  |
      | is writable by others          | send --to dashboard --body "hello there" |
      | is writable by others          | list --all                               |
      | is writable by others          | resolve {dashboard.address}              |
      | is writable by others          | peek dashboard                           |

  Scenario Outline: a <folder> folder that is a symlink is refused by pi-post <command>
    Given the <folder> folder is a symlink to another folder
    When at the shell I run pi-post <command>
    Then it refuses the post office folder, saying "<folder>", and writes nothing

    Examples:
      | folder   | command                                  |
      | registry | send --to dashboard --body "hello there" |
      | registry | list                                     |
      | inbox    | send --to {dashboard.address} --body "x" |
      | inbox    | peek {dashboard.address}                 |

  Scenario Outline: a mailbox folder that is a symlink is refused by pi-post <command>
    Given the mailbox folder of "dashboard" is a symlink to another folder
    When at the shell I run pi-post <command>
    Then it refuses the post office folder, saying "{dashboard.address}", and writes nothing

    Examples:
      | command                                  |
      | send --to dashboard --body "hello there" |
      | peek dashboard                           |
