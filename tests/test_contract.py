"""The contract gate (INV-21): every part of the contract, gathered from the code,
against its pins. Each case the issue found passing the old gate is here: the
parser alone, the encoder alone, a cap, a re-pin inside one change (see
test_gate.py for history), and the compatible change that needs no bump."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pipost import driver, driver_protocol, files, mailbox, message, schemas, session
from pipost.contract import compatibility, gate, gathering
from pipost.contract.compatibility import (
    BREAKING,
    COMPATIBLE,
    UNCHANGED,
    Content,
    Json,
    PartVerdict,
    Revision,
)
from pipost_conformance import INTEROP, vector_bytes, vectors
from tests.helpers import python_under_c_locale

CHECKOUT = Path(__file__).resolve().parents[1]


def judged() -> dict[str, PartVerdict]:
    """Each part now, against the pins of the tree."""
    pins = gathering.load_pins()
    contents = gathering.gather_all(pins, gathering.load_corpus())
    return {verdict.part: verdict for verdict in gathering.judge_all(pins, contents)}


def rules_of(verdict: PartVerdict) -> set[tuple[str, str]]:
    return {(finding.rule, finding.facet) for finding in verdict.findings}


def test_the_contract_matches_its_pins() -> None:
    """The gate itself. If this fails, `pi-post contract` says which part changed, how,
    and the commands that resolve it (docs/contract.md)."""
    report = gate.judge_tree(None, CHECKOUT)
    data = gate.report_data(report, CHECKOUT)
    assert report.exit_status == 0, json.dumps(data, indent=1, ensure_ascii=False)[:4000]
    assert {v.part: v.state for v in report.verdicts} == dict.fromkeys(gathering.PARTS, UNCHANGED)


def test_every_part_has_its_version_and_is_pinned_at_it() -> None:
    pins = gathering.load_pins()
    assert list(gathering.versions()) == list(gathering.PARTS)
    for part, version in gathering.versions().items():
        assert version in pins[part], f"{part} v{version} is not pinned"


def test_the_address_rule_is_the_reference_vectors_through_address_of() -> None:
    reference = vectors("address")
    content = judged()["address"]
    assert content.state == UNCHANGED
    derived = gathering.gather("address", gathering.load_corpus()["address"])
    results = {
        case["input"]: case["result"]
        for f, case in derived.items()
        if f != "pattern:address" and isinstance(case, dict) and isinstance(case["input"], str)
    }
    assert results == {given["sessionId"]: want["address"] for given, want in reference.values()}


def test_the_corpus_reads_the_letters_pi_post_0_7_wrote() -> None:
    content = gathering.gather("message", gathering.load_corpus()["message"])
    case = content["parse:process-letter-of-pi-post-0.7"]
    assert isinstance(case, dict) and isinstance(case["result"], dict)
    assert case["result"]["accepted"] == json.loads(
        (INTEROP / "messages" / "s-52c78af935a3--1796078536114-ab36f83c.json").read_bytes()
    )


def test_the_parser_alone_changing_the_wire_is_breaking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old gate fingerprinted the schema only: a parser that also accepts a
    `subject` passed it. Now the corpus's letter with a subject reads otherwise."""
    for version, rules in list(message.RULES.items()):
        monkeypatch.setitem(
            message.RULES, version, rules.replace(fields=rules.fields | {"subject"})
        )
    verdict = judged()["message"]
    assert verdict.state == BREAKING
    assert rules_of(verdict) == {("parse.changed", "parse:unknown-field")}
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    assert gathering.contradictions(contents) == [
        "message: the schema refuses parse:unknown-field, which the parser accepts"
    ]


def test_the_encoder_alone_changing_the_wire_is_breaking(monkeypatch: pytest.MonkeyPatch) -> None:
    """Swapping two keys of the encoding changes every letter's bytes (SPEC 1.2's
    order): the old gate's fingerprint did not move."""
    real = message.to_json

    def id_first(letter: message.Message) -> dict[str, Any]:
        data = real(letter)
        return {"id": data.pop("id"), **data}

    monkeypatch.setattr(message, "to_json", id_first)
    verdict = judged()["message"]
    assert verdict.state == BREAKING
    assert {rule for rule, _ in rules_of(verdict)} == {"encoding.changed"}
    assert {facet for _, facet in rules_of(verdict)} == {
        f"encode:{name}" for name in gathering.load_corpus()["message"]["encode"]
    }


def test_a_cap_changed_without_a_bump_is_breaking_and_says_how_to_bump(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(mailbox, "CAP", 51)
    verdict = judged()["interop"]
    assert verdict.state == BREAKING
    (finding,) = verdict.findings
    assert (finding.rule, finding.facet, finding.before, finding.after) == (
        "limit.changed",
        "limit:mailbox_cap",
        50,
        51,
    )
    assert gate.fixes(verdict)[0].startswith("pi-post contract bump interop ")
    assert gate.where(CHECKOUT, finding) == (
        "src/pipost/mailbox.py",
        _line_of("mailbox.py", "CAP = "),
    )


def test_a_lock_taken_otherwise_is_breaking(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock protocol is what the scripted exchange saw: a deposit that no longer
    locks its mailbox folder changes it, whatever the constants say."""
    monkeypatch.setattr(files.FolderLock, "__enter__", lambda self: self.folder)
    verdict = judged()["interop"]
    assert verdict.state == BREAKING
    assert ("lock.changed", "lock:deposit") in rules_of(verdict)


def test_a_changed_derivation_is_breaking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gathering, "address_of", lambda session_id: "s-000000000000")
    verdict = judged()["address"]
    assert verdict.state == BREAKING
    assert {rule for rule, _ in rules_of(verdict)} == {"address.derivation-changed"}


def _record_schema_with_host(monkeypatch: pytest.MonkeyPatch) -> None:
    real = schemas.load

    def load(name: str) -> dict[str, Any]:
        schema = real(name)
        if name == f"record.v{session.VERSION}":
            schema["properties"]["host"] = {"type": "string"}
        return schema

    monkeypatch.setattr(schemas, "load", load)


def test_an_optional_record_field_is_compatible_and_pins_as_the_next_revision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records are open (SPEC 1.3): a field their readers do not know is ignored, so
    no bump: the old gate demanded a bump of the message version for it."""
    _record_schema_with_host(monkeypatch)
    verdict = judged()["record"]
    assert (verdict.state, verdict.exit_status) == (COMPATIBLE, 0)
    assert rules_of(verdict) == {("record.field-added", "field:host")}
    pins = gathering.load_pins()
    contents = gathering.gather_all(pins, gathering.load_corpus())
    version = session.VERSION
    pinned, said = compatibility.pin("record", version, contents["record"], pins, pins)
    revisions = len(pins["record"][version])
    assert said.startswith(f"record v{version}: pinned revision {revisions + 1} ")
    kept = pinned["record"][version][:revisions]
    assert kept == pins["record"][version], "the published revisions were kept"


def test_a_schema_that_contradicts_the_code_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bump of the version alone leaves the schema saying v1 and the old cap: the
    old gate pinned that."""
    real, now, then = schemas.load, message.VERSION, message.VERSION + 1
    monkeypatch.setattr(message, "VERSION", then)
    monkeypatch.setattr(message, "BODY_CAP", 65536)
    monkeypatch.setattr(
        schemas, "load", lambda name: real(name.replace(f"message.v{then}", f"message.v{now}"))
    )
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    problems = gathering.contradictions(contents)
    assert problems[:3] == [
        f"message: the $id of message.v{then}.schema.json does not end in :v{then}, the version "
        "the code carries out",
        f'message: the schema\'s v is {{"const": {now}}}, the code\'s is {{"const": {then}}}',
        "message: the schema's body maxLength is not the code's cap, 65536",
    ]


def test_a_letter_an_earlier_version_accepted_must_still_read_the_same() -> None:
    """New readers read old mail: each pinned corpus of an earlier version goes
    through today's parser."""
    content = gathering.gather("message", gathering.load_corpus()["message"])
    accepted = {f: c for f, c in content.items() if f == "parse:session-letter"}
    pins = {"message": {0: [Revision.of(accepted)]}}
    assert gathering.old_mail(pins) == []
    case = accepted["parse:session-letter"]
    assert isinstance(case, dict) and isinstance(case["input"], dict)
    stranded: Content = {"parse:v-0": {**case, "input": {**case["input"], "json": {"v": 0}}}}
    problems = gathering.old_mail({"message": {0: [Revision.of(stranded)]}})
    assert problems == [
        'message v0 parse:v-0: accepted by v0, now read as {"rejected": "bad_field", "field": "v"}'
    ]


def test_a_corpus_entry_is_never_rewritten_under_a_pinned_name() -> None:
    corpus = gathering.load_corpus()
    rewritten: Json = {"argv": ["list", "--all"]}
    changed = {**corpus, "cli": {"output": {**corpus["cli"]["output"], "list": rewritten}}}
    with pytest.raises(gathering.CorpusError) as refused:
        gathering.gather_all(gathering.load_pins(), changed)
    assert str(refused.value) == (
        "corpus entry cli/output/list differs from the input its pin holds; a pinned case "
        "is never rewritten: add the new case under a new name"
    )


def test_a_new_corpus_entry_is_a_compatible_change() -> None:
    corpus = gathering.load_corpus()
    grown = {**corpus, "address": {"derive": {**corpus["address"]["derive"], "new": "n"}}}
    pins = gathering.load_pins()
    verdicts = {v.part: v for v in gathering.judge_all(pins, gathering.gather_all(pins, grown))}
    assert verdicts["address"].state == COMPATIBLE
    assert rules_of(verdicts["address"]) == {("corpus.entry-added", "derive:new")}


def test_gathering_the_contract_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripted exchange and the cli cases run in scratch folders of their own,
    removed after: nothing in the folder the gate runs from, nor in the temporary one."""
    here, scratch = tmp_path / "here", tmp_path / "tmp"
    here.mkdir()
    scratch.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    assert (os.listdir(here), os.listdir(scratch)) == ([], [])


def test_the_corpus_is_that_of_the_version_the_code_declares_not_of_a_later_pin() -> None:
    """Pins of a later version (a bump taken back in the code) hold cases of their own:
    the gate gathers from the newest pin of the version the code declares."""
    pins = gathering.load_pins()
    version = gathering.versions()["cli"]
    later: Content = {"output:later": {"input": {"argv": ["later"]}, "result": {}}}
    grown = {**pins, "cli": {**pins["cli"], version + 1: [Revision("sha256:x", later)]}}
    inputs = gathering.corpus_for("cli", {}, grown)
    assert "later" not in inputs["output"]
    assert inputs == gathering.inputs_of(pins["cli"][version][-1].content)


def test_a_corpus_entry_named_with_a_colon_is_read_back_from_its_pin_under_that_name() -> None:
    """A facet is ``kind:name``; only the first colon ends the kind, so the next run
    gathers the entry again under the name it was pinned as."""
    gathered = gathering.gather("address", {"derive": {"utf8:é": "é"}})
    assert "derive:utf8:é" in gathered
    assert gathering.inputs_of(gathered)["derive"]["utf8:é"] == "é"


def test_the_schemas_agree_with_the_parser_on_every_corpus_file() -> None:
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    assert gathering.contradictions(contents) == []


def test_prose_in_the_schemas_is_not_part_of_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    real = schemas.load

    def reworded(name: str) -> dict[str, Any]:
        schema = real(name)
        schema["description"] = "reworded"
        return schema

    monkeypatch.setattr(schemas, "load", reworded)
    assert {v.state for v in judged().values()} == {UNCHANGED}


def _line_of(module: str, needle: str) -> int:
    lines = (CHECKOUT / "src" / "pipost" / module).read_text(encoding="utf-8").splitlines()
    return next(n for n, line in enumerate(lines, 1) if needle in line)


def test_a_parser_that_raises_is_a_finding_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    real = message.parse

    def fragile(raw: bytes, file_name: str | None = None) -> message.Message | message.Rejected:
        if b"subject" in raw:
            raise KeyError("subject")
        return real(raw, file_name)

    monkeypatch.setattr(message, "parse", fragile)
    verdict = judged()["message"]
    (finding,) = verdict.findings
    assert (finding.rule, finding.facet) == ("parse.changed", "parse:unknown-field")
    assert isinstance(finding.after, dict) and finding.after["result"] == {"raised": "KeyError"}


def test_a_step_of_the_exchange_that_raises_is_a_lock_finding_not_a_crash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = driver.InProcessDriver.call

    def claim_fails(self: driver.InProcessDriver, op: str, **args: Any) -> Any:
        if op == "take":
            raise OSError("the disk went away")
        return real(self, op, **args)

    monkeypatch.setattr(driver.InProcessDriver, "call", claim_fails)
    verdict = judged()["interop"]
    assert verdict.state == BREAKING
    (claim,) = [f for f in verdict.findings if f.facet == "lock:claim"]
    assert isinstance(claim.after, list) and claim.after[-1] == "raised OSError"


def test_a_lock_on_a_file_outside_the_post_office_is_shown_as_a_question_mark(
    tmp_path: Path,
) -> None:
    (tmp_path / "post").mkdir()
    with open(tmp_path / "elsewhere", "w") as outside:
        assert gathering._where(tmp_path / "post", outside.fileno()) == "?"


def test_long_strings_inside_a_list_are_pinned_as_their_digest() -> None:
    text = "x" * (gathering._LONG + 1)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert gathering._shorten(["short", text]) == [
        "short",
        f"<{len(text)} characters, sha256 {digest}>",
    ]


def test_a_string_is_pinned_as_its_digest_only_past_the_mark_and_a_lone_surrogate_too() -> None:
    at_the_mark = "x" * gathering._LONG
    assert gathering._shorten(at_the_mark) == at_the_mark
    # A string Python holds but UTF-8 cannot encode (a lone surrogate) is pinned too.
    lone = "\ud800" * (gathering._LONG + 1)
    digest = hashlib.sha256(lone.encode("utf-8", "surrogatepass")).hexdigest()
    assert gathering._shorten(lone) == f"<{len(lone)} characters, sha256 {digest}>"


def test_a_json_file_of_the_vectors_is_written_compactly_and_in_utf_8() -> None:
    given: Json = {"json": {"body": "grüße", "n": [1, 2]}, "file_name": "x.json"}
    assert vector_bytes(given) == ('{"body":"grüße","n":[1,2]}'.encode(), "x.json")


def test_a_schema_without_properties_or_required_has_no_field_and_requires_nothing() -> None:
    assert gathering.schema_facets({"type": "object", "title": "prose"}) == {
        "required": [],
        "closed": False,
        "schema": {"type": "object"},
    }


@pytest.mark.parametrize("part", ["message", "record", "address", "cli"])
def test_a_part_gathered_from_no_cases_is_what_it_has_besides_its_cases(part: str) -> None:
    given = gathering.load_corpus()[part]
    whole = gathering.gather(part, given)
    cases = tuple(f"{kind}:" for kind in given)
    besides = {k: v for k, v in whole.items() if not k.startswith(cases)}
    assert besides != whole
    assert gathering.gather(part, {}) == besides


def test_a_schema_without_defs_names_nothing() -> None:
    assert gathering._defs_facets({"type": "object"}, "op") == {"schema": {"type": "object"}}


def test_a_schema_or_a_protocol_the_code_no_longer_speaks_is_a_contradiction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    assert gathering.contradictions(contents) == []
    monkeypatch.setattr(gathering, "ADDRESS_PATTERN", "s-[0-9a-f]{16}")
    monkeypatch.setattr(driver_protocol, "PROTOCOL", driver_protocol.PROTOCOL + 1)
    problems = gathering.contradictions(contents)
    assert "message: the schema's from.address pattern is not the address grammar" in problems
    assert (
        f"driver: its schema's open speaks protocol [{driver_protocol.PROTOCOL - 1}], the code "
        f"{driver_protocol.PROTOCOL}"
    ) in problems


def test_the_corpus_and_the_schema_disagreeing_on_a_letter_is_a_contradiction() -> None:
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    letters = dict(contents["message"])
    accepted = "parse:process-letter-of-pi-post-0.7"
    letter = letters[accepted]
    assert isinstance(letter, dict)
    letters[accepted] = {**letter, "result": {"rejected": "bad_field", "field": "v"}}
    refused = letters["parse:unknown-field"]
    assert isinstance(refused, dict) and isinstance(refused["input"], dict)
    letters["parse:unknown-field"] = {
        **refused,
        "input": {**refused["input"], "beyond_schema": "?"},
    }
    assert sorted(gathering.contradictions({**contents, "message": letters})) == [
        "message: parse:unknown-field is marked beyond_schema, but the schema refuses it",
        f"message: the schema accepts {accepted}, which the parser rejects; if a rule JSON "
        "Schema cannot state refuses it, say which in its beyond_schema",
    ]


@pytest.mark.parametrize(
    ("part", "owner", "dropped"),
    [("message", message, "field:body"), ("record", session, "field:pid")],
)
def test_a_published_schema_is_checked_against_its_pin_and_one_not_kept_is_skipped(
    monkeypatch: pytest.MonkeyPatch, part: str, owner: ModuleType, dropped: str
) -> None:
    pins = gathering.load_pins()
    now = owner.VERSION
    monkeypatch.setattr(owner, "VERSION", now + 1)  # so that v{now} is an earlier version
    assert gathering.published_schemas(pins) == []
    *_, latest = pins[part][now]
    forged = {k: v for k, v in latest.content.items() if k != dropped}
    changed = {**pins, part: {now: [Revision.of(forged)]}}
    assert gathering.published_schemas(changed) == [
        f"{part}: {part}.v{now}.schema.json, published as v{now}, changed ({dropped})"
    ]
    never_kept = {part: {now - 1: [Revision.of(forged)]}}  # no schema file of v0
    monkeypatch.setattr(owner, "VERSION", now)
    assert gathering.published_schemas(never_kept) == []


def test_a_message_schema_without_a_from_object_lacks_the_address_grammar() -> None:
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    said = "message: the schema's from.address pattern is not the address grammar"
    senders: list[Json] = ["a string", {"properties": ["address"]}]
    for sender in senders:
        letters: Content = {**contents["message"], "field:from": sender}
        assert said in gathering.contradictions({**contents, "message": letters})


def test_a_driver_schema_carrying_other_versions_of_a_letter_names_them_all() -> None:
    contents = gathering.gather_all(gathering.load_pins(), gathering.load_corpus())
    carried = {**contents["driver"], "extra": "urn:pi-post:schema:message:v9"}
    read = ", ".join(f"v{v}" for v in message.READABLE_VERSIONS)
    versions = sorted({*message.READABLE_VERSIONS, 9})
    assert gathering.contradictions({**contents, "driver": carried}) == [
        f"driver: its schema carries message {', '.join(f'v{v}' for v in versions)}, but pipost "
        f"reads message {read}: bump the driver (pi-post contract bump driver) and make its "
        f"message any of {read}"
    ]


def test_pins_are_written_whole_beside_the_file_and_renamed_over_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """contract/pins.json is read in review as a diff: one space a level, its text as
    written (no \\u escapes), one newline at the end. And it is never half a file: the
    whole text goes to a temporary beside it, renamed over it, none left behind."""
    path = tmp_path / "pins.json"
    path.write_text("the pins before\n", encoding="utf-8")
    revision = Revision.of({"parse:grüße": ["ü", 1]})
    pins = {"message": {1: [revision]}}
    renamed: list[tuple[Path, str, str]] = []
    real_replace = os.replace

    def replace(source: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
        assert Path(target) == path
        renamed.append(
            (Path(source), Path(source).read_text(encoding="utf-8"), path.read_text("utf-8"))
        )
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    gathering.save_pins(pins, path)
    expected = (
        '{\n "message": {\n  "1": [\n   {\n'
        f'    "fingerprint": "{revision.fingerprint}",\n'
        '    "content": {\n     "parse:grüße": [\n      "ü",\n      1\n     ]\n    }\n'
        "   }\n  ]\n }\n}\n"
    )
    assert path.read_bytes() == expected.encode("utf-8")
    ((temporary, written, before),) = renamed
    assert temporary.parent == path.parent and temporary != path
    assert (written, before) == (expected, "the pins before\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pins.json"]
    assert gathering.load_pins(path) == pins


def test_pins_are_written_in_utf_8_under_a_locale_that_is_not(tmp_path: Path) -> None:
    """`pi-post contract --pin` may run under any locale: the pins file it writes is
    UTF-8 still, as load_pins reads it."""
    path = tmp_path / "pins.json"
    # In ASCII: that locale reads the arguments, this code among them, as ASCII.
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from pipost.contract import gathering\n"
        "from pipost.contract.compatibility import Revision\n"
        "pins = {'message': {1: [Revision('f', {'parse:gr\\u00fc\\u00dfe': 1})]}}\n"
        "gathering.save_pins(pins, Path(sys.argv[1]))\n"
    )
    done = python_under_c_locale(probe, str(path))
    assert (done.returncode, done.stderr) == (0, b"")
    assert (
        path.read_bytes()
        == (
            '{\n "message": {\n  "1": [\n   {\n    "fingerprint": "f",\n'
            '    "content": {\n     "parse:grüße": 1\n    }\n   }\n  ]\n }\n}\n'
        ).encode()
    )


def test_the_shipped_pins_and_corpus_read_the_same_under_a_locale_that_is_not_utf_8() -> None:
    """Both hold text that is not ASCII (ünïcödé, 会话): the gate may run under any locale."""
    probe = (
        "import json\n"
        "from pipost.contract import compatibility, gathering\n"
        "pins, corpus = gathering.load_pins(), gathering.load_corpus()\n"
        "print(json.dumps([compatibility.to_data(pins), corpus]))\n"
    )
    done = python_under_c_locale(probe)
    assert (done.returncode, done.stderr) == (0, b"")
    read_here = [compatibility.to_data(gathering.load_pins()), gathering.load_corpus()]
    assert json.loads(done.stdout) == read_here


def test_a_record_an_earlier_version_accepted_must_still_read_the_same() -> None:
    content = gathering.gather("record", gathering.load_corpus()["record"])
    case = content["parse:live-record"]
    assert isinstance(case, dict) and isinstance(case["input"], dict)
    assert gathering.old_mail({"record": {0: [Revision.of({"parse:live-record": case})]}}) == []
    stranded: Content = {"parse:v-0": {**case, "input": {**case["input"], "json": {"v": 0}}}}
    assert gathering.old_mail({"record": {0: [Revision.of(stranded)]}}) == [
        'record v0 parse:v-0: accepted by v0, now read as {"rejected": "bad_field", "field": "v"}'
    ]


def _session_letter() -> tuple[dict[str, Json], dict[str, Json]]:
    """The corpus's session letter: its case, and the file it gives (its input)."""
    content = gathering.gather("message", gathering.load_corpus()["message"])
    case = content["parse:session-letter"]
    assert isinstance(case, dict) and isinstance(case["input"], dict)
    return case, case["input"]


def _stranded_letter() -> Content:
    """A letter v0 accepted that today's parser refuses (its v)."""
    case, given = _session_letter()
    return {"parse:v-0": {**case, "input": {**given, "json": {"v": 0}}}}


def test_old_mail_is_mail_of_an_earlier_version_only() -> None:
    """The version carried out now is judged against its pins by the gate's verdict:
    old mail is the pins of the versions below it."""
    stranded = Revision.of(_stranded_letter())
    assert gathering.old_mail({"message": {0: [stranded]}}) != []
    assert gathering.old_mail({"message": {message.VERSION: [stranded]}}) == []


def test_every_file_of_an_earlier_pin_is_read_again_whatever_comes_before_it() -> None:
    """A whole pin, its schema's facets and the files it refused first, then one file
    today's parser no longer reads: that one is found."""
    whole = gathering.gather("message", gathering.load_corpus()["message"])
    content = {**whole, **_stranded_letter()}
    facets = list(content)
    refused = [
        f
        for f, c in content.items()
        if f.startswith("parse:") and isinstance(c, dict) and isinstance(c["result"], dict)
        if "rejected" in c["result"]
    ]
    assert not facets[0].startswith("parse:") and refused and facets[-1] == "parse:v-0"
    assert gathering.old_mail({"message": {0: [Revision.of(content)]}}) == [
        'message v0 parse:v-0: accepted by v0, now read as {"rejected": "bad_field", "field": "v"}'
    ]


def test_old_mail_is_read_again_under_its_own_file_name() -> None:
    """A letter v0 accepted under a name that is not its id is refused today
    (id_mismatch): read without its name, it would look unchanged."""
    case, given = _session_letter()
    renamed = {**given, "file_name": "1796078509367-00000000.json"}
    stranded = Revision.of({"parse:misnamed": {**case, "input": renamed}})
    assert gathering.old_mail({"message": {0: [stranded]}}) == [
        'message v0 parse:misnamed: accepted by v0, now read as {"rejected": "id_mismatch"}'
    ]


def test_old_mail_read_otherwise_is_shown_as_its_first_200_characters_unescaped() -> None:
    case, given = _session_letter()
    letter = given["json"]
    assert isinstance(letter, dict) and isinstance(letter["from"], dict)
    renamed: Content = {"json": {**letter, "from": {**letter["from"], "name": "grüße"}}}
    stranded = Revision.of({"parse:renamed": {**case, "input": renamed}})
    (problem,) = gathering.old_mail({"message": {0: [stranded]}})
    prefix = "message v0 parse:renamed: accepted by v0, now read as "
    assert problem == prefix + (
        '{"accepted": {"v": 1, "id": "1796078509367-deed10f1", "from": {"kind": "session", '
        '"name": "grüße", "address": "s-52c78af935a3", "cwd": "/home/dev/gtm"}, '
        '"replyTo": "s-52c78af935a3", "sentAt": 17960785'
    )
    assert len(problem) - len(prefix) == 200


def test_a_published_schema_after_a_version_not_kept_is_checked_and_lists_every_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pins = gathering.load_pins()
    now = message.VERSION
    monkeypatch.setattr(message, "VERSION", now + 1)
    *_, latest = pins["message"][now]
    forged = {k: v for k, v in latest.content.items() if k not in ("field:body", "field:id")}
    # No schema file of v0 was published: skipped, and v{now} after it is still checked.
    changed = {**pins, "message": {0: [latest], now: [Revision.of(forged)]}}
    assert gathering.published_schemas(changed) == [
        f"message: message.v{now}.schema.json, published as v{now}, changed (field:body, field:id)"
    ]


def test_a_pin_written_before_the_vectors_reads_as_their_digests_unless_edited() -> None:
    """Pins used to keep each case whole: read now, each case is its digest and the
    revision is what pinning the same content today gives, so the history compares
    unchanged; a pin edited by hand still shows."""
    rich: Content = {
        "pattern:address": "^s-[0-9a-f]{12}$",
        "derive:abc": {"input": "abc", "result": "s-cb61287a5998"},
    }
    whole = "sha256:" + hashlib.sha256(compatibility.canonical(rich)).hexdigest()
    (read,) = compatibility.from_data(
        {"address": {"1": [{"fingerprint": whole, "content": rich}]}}
    )["address"][1]
    assert read.fingerprint == Revision.of(rich).fingerprint
    assert (
        read.content["derive:abc"]
        == "sha256:" + hashlib.sha256(compatibility.canonical(rich["derive:abc"])).hexdigest()
    )
    assert compatibility.edited({"address": {1: [read]}}) == []
    forged = compatibility.from_data(
        {"address": {"1": [{"fingerprint": "sha256:" + "0" * 64, "content": rich}]}}
    )
    assert compatibility.edited(forged) == ["address v1 revision 1: its content was edited by hand"]
