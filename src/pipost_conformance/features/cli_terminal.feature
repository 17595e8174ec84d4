@cli @must @INV-22
Feature: Escape sequences from names, folders and bodies never reach the terminal
  Anyone who can write into the post office, or send a letter, chooses the bytes
  of a session's name, folder and id and of a letter's sender and body. A
  terminal acts on some of them rather than showing them: ESC starts CSI and OSC
  sequences (clear the screen, move the cursor, set the window title, write to
  the clipboard), C1 controls do the same in one character (U+009B is CSI), BEL
  rings, backspace and carriage return overwrite what was shown, bidi controls
  reorder it. Whatever list, resolve, peek and their errors print holds none of
  them raw: each is shown in some visible form (pipost spells them out, `\x1b`),
  and the text around them stays recognisable. The line feed that ends a line
  and the tab are the only controls a line may hold.
  (Hostile text enters these files the way hostile_input.feature describes; it
  is judged here as the command line shows it, so this is INV-22: hostile input
  is neutralised, not acted on.)

  Background:
    Given a session "dashboard" with id "019a3f30-1111-7222-8333-444455556666" in "{scratch}/old", offline
    And a session "mallory" whose name, folder and session id carry the escapes "\x1b[2J\x1b]0;owned\x07\x1b]52;c;cm0gLXJmIH4=\x07\x08\r\x9b2K\x85\u202e\u2066\u200f\u061c\x7f", offline
    And a letter queued for "dashboard" whose sender name and body carry the escapes "\x1b[2J\x1b]0;owned\x07\x08\r\x9b1A\x85\u202e\u2066\u200f\x7f\x00"
    And I work in "{scratch}/gtm"

  Scenario Outline: what pi-post <command> prints of hostile text is inert and recognisable
    When at the shell I give pi-post the arguments <arguments>
    Then it exits <code>, and nothing it printed holds a raw control character
    And what it printed shows <shown>

    Examples: a letter's sender and body
      | command        | arguments                         | code | shown                                 |
      | peek           | "peek", "dashboard"               | 0    | "look", "here", "eve" and "owned"     |
      | peek           | "peek", "{dashboard.address}"     | 0    | "look", "here", "eve" and "owned"     |

    Examples: a session's name, folder and id
      | command        | arguments                         | code | shown                                 |
      | list           | "list"                            | 0    | "mallory", "{mallory.address}" and "owned" |
      | list --all     | "list", "--all"                   | 0    | "mallory", "{mallory.address}" and "owned" |
      | resolve        | "resolve", "{mallory.address}"    | 0    | "mallory", "{mallory.address}" and "owned" |
      | peek           | "peek", "{mallory.address}"       | 0    | "{mallory.address}"                   |

    Examples: errors that name what was asked
      | command        | arguments                                                      | code | shown               |
      | send           | "send", "--to", "\x1b]0;owned\x07nobody\x9b2J", "--body", "x"   | 1    | "owned" and "nobody" |
      | resolve        | "resolve", "\x1b[2J\u202enobody\r"                              | 1    | "nobody"            |
      | peek           | "peek", "\x08\x08\x08nobody\x85"                                | 1    | "nobody"            |
      | resolve        | "resolve", "{scratch}/gtm"                                      | 1    | "{scratch}/gtm"     |

  Scenario: the candidates of an ambiguous folder are shown inert
    Given a session "twin" whose name, folder and session id carry the escapes "\x1b[31m\x9b2J\u202e", offline
    And a session "twin-b" with id "019a3f32-0000-7000-8000-00000000000b" in "{scratch}/twin\x1b[31m\x9b2J\u202efolder", offline
    When at the shell I give pi-post the arguments "resolve", "{scratch}/twin\x1b[31m\x9b2J\u202efolder"
    Then it exits 1, and nothing it printed holds a raw control character
    And what it printed shows "{twin.address}" and "{twin-b.address}"

  Scenario: a file in a mailbox named with escapes is shown inert, if at all
    Given a file in the mailbox of "dashboard" named with the escapes "\x1b]0;owned\x07\x9b"
    When at the shell I give pi-post the arguments "peek", "dashboard"
    Then it exits 0, and nothing it printed holds a raw control character
    And what it printed shows "look" and "here"

  Scenario: a post office folder named with escapes is named inert when it is refused
    Given the post office folder is "{scratch}/post\x1b]0;owned\x07\x9b2J", writable by others
    When at the shell I give pi-post the arguments "list"
    Then it exits 1, and nothing it printed holds a raw control character
    And what it printed is an error after "pi-post: "
    And what it printed shows "owned"

  @should
  Scenario: an option it does not know, holding escapes, is named inert
    When at the shell I give pi-post the arguments "list", "--all\x1b]0;owned\x07\x9b2J"
    Then it exits 1, and nothing it printed holds a raw control character
    And what it printed is an error after "pi-post: "
