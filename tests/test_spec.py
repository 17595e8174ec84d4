"""The references into the specification resolve (issue 13).

Code, tests, features, tools and docs cite sections of SPEC.md ("SPEC 4",
"SPEC 1.2, 1.3", "SPEC §8") and of DESIGN.md ("DESIGN §4", "DESIGN §1/§4"), and
invariants by id ("INV-08"). Each must name a section heading that exists, and
each invariant id one of SPEC.md §9's, so that a porter who follows a reference
finds what it meant. A dangling one is reported with its file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipost import (
    droplog,
    files,
    host,
    mailbox,
    message,
    policy,
    post,
    quarantine,
    resolve,
    session,
)
from pipost.driver_protocol import DEFAULT_NOW

REPOSITORY = Path(__file__).resolve().parent.parent

SCANNED = (
    "src",
    "tests",
    "tools",
    "docs",
    "ports",
    "benchmarks",
    "scripts",
    "README.md",
    "CONTRIBUTING.md",
    "CHANGELOG.md",
    "DESIGN.md",
    "SPEC.md",
    "noxfile.py",
    "pyproject.toml",
)
"""Where references are looked for: every text file below these, but for folders
that hold no sources of the project (dependencies, caches)."""

SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__"})

NOT_REFERENCES = {
    # Spelled in two pieces, or this very line would be one.
    ("tests/test_mutants_table.py", "INV-" + "99"): "a tag no scenario has, on purpose",
    ("tests/invariants/test_machine_verdicts.py", "INV-" + "8"): "an id spelled wrong, on purpose",
}
"""Invariant ids that are written on purpose to name nothing."""

_NUMBER = r"\d+(?:\.\d+)?"
_NUMBERS = rf"§?[ \t]*{_NUMBER}(?:(?:\s*[,/]\s*|\s+and\s+)§?[ \t]*{_NUMBER})*"
# "SPEC 3, 6", "SPEC 1.3 and 4", "SPEC §8", "SPEC.md §11"; "DESIGN §1/§4", and either
# broken across lines.
# Between the page and its number: blanks, or one line break (in a comment, its
# marker too), never a blank line: "DESIGN.md" as a heading is no citation of what
# follows it.
_GAP = r"(?:[ \t]+|[ \t]*\n[ \t]*(?:#[ \t]*)?)"
_CITATION = re.compile(rf"\b(SPEC|DESIGN)(?:\.md)?(?:{_GAP}|(?=§))({_NUMBERS})")
_OWN_SECTION = re.compile(rf"(?<![\w.])§\s*({_NUMBER})")
_DESIGN_SECTION = re.compile(rf"\b[Ss]ections?\s+({_NUMBER}(?:(?:\s*,\s*|\s+and\s+){_NUMBER})*)")
_INVARIANT = re.compile(r"\bINV-(\d+)\b")
_HEADING = re.compile(rf"^#{{2,3}} ({_NUMBER})\.? ", re.MULTILINE)


def headings(text: str) -> set[str]:
    """The section numbers of a Markdown page: ``## 3. …`` and ``### 3.1 …``."""
    return set(_HEADING.findall(text))


def numbers(cited: str) -> list[str]:
    return re.findall(_NUMBER, cited)


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def citations(text: str) -> list[tuple[int, str, str]]:
    """(line, "SPEC" or "DESIGN", section number) for every citation in ``text``."""
    found = []
    for match in _CITATION.finditer(text):
        line = line_of(text, match.start())
        found += [(line, match[1], number) for number in numbers(match[2])]
    return found


def own_sections(text: str) -> list[tuple[int, str]]:
    """(line, number) for every bare ``§n`` of a page about itself; the § of a
    citation ("DESIGN §4" in SPEC.md) is not one of these."""
    cited = [match.span() for match in _CITATION.finditer(text)]
    return [
        (line_of(text, match.start()), match[1])
        for match in _OWN_SECTION.finditer(text)
        if not any(start <= match.start() < end for start, end in cited)
    ]


def design_sections(text: str) -> list[tuple[int, str]]:
    """(line, number) for every ``section 4`` DESIGN.md says of itself."""
    return [
        (line_of(text, match.start()), number)
        for match in _DESIGN_SECTION.finditer(text)
        for number in numbers(match[1])
    ]


def invariant_ids(text: str) -> list[tuple[int, str]]:
    return [(line_of(text, m.start()), f"INV-{m[1]}") for m in _INVARIANT.finditer(text)]


def section(text: str, number: str) -> str:
    """The body of ``## <number>.`` up to the next ``## `` heading."""
    start = re.search(rf"^## {re.escape(number)}\. .*$", text, re.MULTILINE)
    assert start is not None, f"no section {number}"
    end = re.search(r"^## ", text[start.end() :], re.MULTILINE)
    return text[start.end() : start.end() + end.start() if end else len(text)]


def table_ids(text: str) -> list[str]:
    return re.findall(r"^\| (INV-\d+) \|", text, re.MULTILINE)


def scanned_files() -> list[Path]:
    found = []
    for name in SCANNED:
        path = REPOSITORY / name
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            found += [
                file
                for file in sorted(path.rglob("*"))
                if file.is_file()
                and not SKIPPED_FOLDERS.intersection(file.relative_to(REPOSITORY).parts)
            ]
    return found


def texts() -> dict[str, str]:
    """Every scanned file that is text, by its path in the repository."""
    found = {}
    for path in scanned_files():
        try:
            found[path.relative_to(REPOSITORY).as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # not text: no reference in it
    return found


SPEC = (REPOSITORY / "SPEC.md").read_text(encoding="utf-8")
DESIGN = (REPOSITORY / "DESIGN.md").read_text(encoding="utf-8")
SECTIONS = {"SPEC": headings(SPEC), "DESIGN": headings(DESIGN)}
INVARIANTS = table_ids(section(SPEC, "9"))


OWN_PAGES = {"SPEC.md": "SPEC", "DESIGN.md": "DESIGN"}
"""The pages whose bare references (``§4``, and in DESIGN.md ``section 4``) are to
their own sections."""


def dangling(files: dict[str, str]) -> list[str]:
    """``path:line: what`` for every reference in ``files`` that names nothing."""
    problems = []
    for path, text in sorted(files.items()):
        for line, document, number in citations(text):
            if number not in SECTIONS[document]:
                problems.append(f"{path}:{line}: {document} {number}: no such section")
        own = OWN_PAGES.get(path)
        if own is not None:
            bare = own_sections(text) + (design_sections(text) if own == "DESIGN" else [])
            for line, number in bare:
                if number not in SECTIONS[own]:
                    problems.append(f"{path}:{line}: section {number} of {path}: no such section")
        for line, invariant in invariant_ids(text):
            if invariant not in INVARIANTS and (path, invariant) not in NOT_REFERENCES:
                problems.append(f"{path}:{line}: {invariant} is not an invariant of SPEC 9")
    return problems


# -- the pages themselves ----------------------------------------------------------------


def test_the_specification_has_the_twelve_sections_the_references_use() -> None:
    assert {str(n) for n in range(1, 13)} <= SECTIONS["SPEC"]
    assert {"1.1", "1.2", "1.3"} <= SECTIONS["SPEC"]


def test_the_invariants_are_inv_01_to_inv_23_in_spec_and_in_design() -> None:
    expected = [f"INV-{n:02d}" for n in range(1, 24)]
    assert expected == INVARIANTS
    assert table_ids(section(DESIGN, "12")) == expected


def test_every_invariant_of_the_specification_says_its_tier() -> None:
    rows = re.findall(r"^\| (INV-\d+) \| .* \| (.+) \|$", section(SPEC, "9"), re.MULTILINE)
    assert [invariant for invariant, _ in rows] == INVARIANTS
    untiered = [invariant for invariant, tier in rows if not tier.startswith("MUST")]
    assert untiered == []


# -- the figures are the code's --------------------------------------------------------


def _ms_as_seconds(ms: int) -> str:
    return f"{ms // 1000} s"


FIGURES = [
    ("mailbox cap", f"at **{mailbox.CAP}** or more"),
    ("body cap", f"at most **{message.BODY_CAP} bytes**"),
    ("letter read bound", f"the bound is {message.LETTER_READ_LIMIT} bytes"),
    ("record read bound", f"(*pipost:* {session.RECORD_READ_LIMIT} bytes)"),
    ("targets per send", f"at most **{resolve.MAX_TARGETS}** targets"),
    ("heartbeat", f"every **{_ms_as_seconds(session.HEARTBEAT_MS)}**"),
    ("live window", f"now − lastSeen ≤ {session.LIVE_WINDOW_MS}"),
    ("receipt wait", f"within **{post.RECEIPT_WAIT_S:g} s**"),
    ("poll", f"every **{host.POLL_S:g} s**"),
    ("retry", f"after {host.RETRY_FIRST_S:g} s, doubling up to {host.RETRY_MAX_S:g} s"),
    ("duplicate window", f"**less than {_ms_as_seconds(policy.DUPLICATE_WINDOW_MS)}**"),
    (
        "rate cap",
        f"**{policy.RATE_LIMIT}** messages entered in the last "
        f"**{_ms_as_seconds(policy.RATE_WINDOW_MS)}**",
    ),
    ("rate window", f"entered less than {policy.RATE_WINDOW_MS} ms ago"),
    ("sweep age", f"now − lastSeen > {session.SWEEP_AFTER_MS}"),
    ("stale temporaries", f"more than {session.TEMPORARY_STALE_MS // 3_600_000} hours"),
    ("quarantine cap", f"at most {quarantine.CAP} letters per address"),
    ("drop log size", f"past {droplog.LIMIT // (1 << 20)} MiB"),
    (
        "lock wait",
        f"every {files.LOCK_POLL_S * 1000:g} ms for at most {files.LOCK_WAIT_S:g} s",
    ),
    ("folder mode", f"MUST be made {files.DIR_MODE:04o}"),
    ("file mode", f"every file {files.FILE_MODE:04o}"),
    ("driver clock", f"(default {DEFAULT_NOW})"),
]
"""Each figure SPEC.md states, as the phrase that states it, made from the value
the code uses: a change of either side fails here."""


@pytest.mark.parametrize(("what", "phrase"), FIGURES, ids=[what for what, _ in FIGURES])
def test_the_specification_states_the_figure_the_code_uses(what: str, phrase: str) -> None:
    assert phrase in " ".join(SPEC.split())


# -- every reference resolves ------------------------------------------------------------


def test_every_reference_names_a_section_or_an_invariant_that_exists() -> None:
    files = texts()
    assert "src/pipost/cli.py" in files and "SPEC.md" in files
    problems = dangling(files)
    assert not problems, "dangling references:\n" + "\n".join(problems)


def test_the_references_in_use_are_found() -> None:
    """The finder sees the references the project makes today; a finder that saw
    none would pass the test above whatever they say."""
    found = [
        (document, number) for text in texts().values() for _, document, number in citations(text)
    ]
    assert len(found) > 60
    assert {document for document, _ in found} == {"SPEC", "DESIGN"}


# -- the finder, on text made up here ---------------------------------------------------

# Spelled in pieces, so that this file holds no dangling reference of its own.
S, D = "SPEC", "DESIGN"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"as {S} 4 says", [(1, S, "4")]),
        (f"({S} 3, 6, 7; INV-05)", [(1, S, "3"), (1, S, "6"), (1, S, "7")]),
        (f"({S}\n1.3, 2)", [(1, S, "1.3"), (1, S, "2")]),
        (f"{S} 1.3 and 4 see it", [(1, S, "1.3"), (1, S, "4")]),
        (f"{S} §8, {S}.md §11.2", [(1, S, "8"), (1, S, "11.2")]),
        (f"{D} §1/§4: one open", [(1, D, "1"), (1, D, "4")]),
        (f"{S}.md and {D}.md hold no number", []),
        (f"(# {S}\n# 4)", [(1, S, "4")]),
        (f"## {D}.md\n\n15. a list item", []),
    ],
)
def test_a_citation_is_found_in_each_spelling(
    text: str, expected: list[tuple[int, str, str]]
) -> None:
    assert citations(text) == expected


def test_a_dangling_reference_is_reported_with_its_file_and_line() -> None:
    made_up = {
        "src/x.py": f'"""Fine ({S} 4).\n\nNot fine ({S} 4, 13; {D} §99)."""\n',
        "tests/y.py": f"# INV-{24} is no invariant\n",
        "SPEC.md": "see §42\n",
        "DESIGN.md": "as section 77 says\n",
    }
    assert dangling(made_up) == [
        "DESIGN.md:1: section 77 of DESIGN.md: no such section",
        "SPEC.md:1: section 42 of SPEC.md: no such section",
        f"src/x.py:3: {S} 13: no such section",
        f"src/x.py:3: {D} 99: no such section",
        f"tests/y.py:1: INV-{24} is not an invariant of SPEC 9",
    ]
