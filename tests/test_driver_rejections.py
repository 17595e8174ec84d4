"""Rejections through the driver (SPEC 11): a letter that is no message travels as
``{"code", "text", …facts}``, the text in pipost's words, wherever the protocol
reports one — parse, peek, and the ``set_aside`` entries of take and deliver."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from pipost import mailbox
from pipost.driver import InProcessDriver
from pipost.driver_protocol import Json
from pipost.message import LETTER_READ_LIMIT
from tests.helpers import NOW

SESSION = "driver-rejections"
BAD_NAME = "0000000000001-0badbad0.json"


@pytest.fixture
def driver(tmp_path: Path) -> InProcessDriver:
    return InProcessDriver(tmp_path / "post", home=str(tmp_path), now=NOW)


def lay(driver: InProcessDriver, address: str, data: bytes) -> Path:
    folder = Path(mailbox.inbox_of(driver.root, address))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / BAD_NAME).write_bytes(data)
    return folder / BAD_NAME


def parse_bytes(driver: InProcessDriver, raw: bytes, file_name: str | None = None) -> Json:
    args: dict[str, Json] = {"raw_base64": base64.b64encode(raw).decode()}
    if file_name is not None:
        args["file_name"] = file_name
    return driver.call("parse", **args)


def test_parse_carries_the_code_the_facts_and_the_text(driver: InProcessDriver) -> None:
    assert driver.call("parse", text='{"v": 1, "v": 1}') == {
        "rejected": {"code": "duplicate_key", "text": "not JSON: duplicate key 'v'", "key": "v"}
    }
    assert parse_bytes(driver, b" " * (LETTER_READ_LIMIT + 1)) == {
        "rejected": {
            "code": "oversize",
            "text": f"file is larger than {LETTER_READ_LIMIT} bytes",
            "limit": LETTER_READ_LIMIT,
        }
    }
    assert parse_bytes(driver, b"\xff") == {"rejected": {"code": "not_utf8", "text": "not UTF-8"}}


def test_parse_reads_a_letter_as_the_bytes_it_would_be_on_disk(driver: InProcessDriver) -> None:
    """A lone surrogate in ``text`` is the invalid UTF-8 a file would hold there, and
    empty base64 is an empty file, as empty text is."""
    assert driver.call("parse", text='{"v": 1, "body": "\ud800"}') == {
        "rejected": {"code": "not_utf8", "text": "not UTF-8"}
    }
    empty = driver.call("parse", raw_base64="")
    assert empty == driver.call("parse", text="")
    rejected = empty["rejected"]
    assert isinstance(rejected, dict) and rejected["code"] == "not_json"


def test_parse_names_the_field_dotted_and_the_id_mismatch(driver: InProcessDriver) -> None:
    letter = (
        '{"v":1,"id":"0000000000001-0badbad0","from":{"kind":"robot","name":"x"},'
        '"sentAt":1,"body":"hi"}'
    )
    assert driver.call("parse", text=letter) == {
        "rejected": {
            "code": "bad_field",
            "text": "from.kind is neither session nor process",
            "field": "from.kind",
        }
    }
    good = letter.replace('"robot"', '"process"')
    assert driver.call("parse", text=good, file_name="0000000000002-0badbad0.json") == {
        "rejected": {"code": "id_mismatch", "text": "id does not match the file name"}
    }


def test_peek_shows_a_symlink_as_rejected_with_its_code(
    driver: InProcessDriver, tmp_path: Path
) -> None:
    address = driver.call("address_of", session_id=SESSION)["address"]
    assert isinstance(address, str)
    outside = tmp_path / "outside.json"
    outside.write_bytes(b"{}")
    folder = Path(mailbox.inbox_of(driver.root, address))
    folder.mkdir(parents=True)
    (folder / BAD_NAME).symlink_to(outside)
    assert driver.call("peek", address=address) == {
        "letters": [
            {
                "name": BAD_NAME,
                "rejected": {"code": "symlink", "text": "a symlink is never followed"},
            }
        ]
    }


def test_take_and_deliver_give_the_reason_of_a_letter_set_aside(driver: InProcessDriver) -> None:
    address = driver.call("address_of", session_id=SESSION)["address"]
    assert isinstance(address, str)
    reason: Json = {"code": "not_object", "text": "not a JSON object"}
    lay(driver, address, b"[]")
    assert driver.call("take", address=address) == {
        "message": None,
        "set_aside": [{"name": BAD_NAME, "reason": reason}],
    }
    driver.call("register", session_id=SESSION, cwd=str(driver.root.parent))
    lay(driver, address, b"[]")
    delivered = driver.call("deliver", session_id=SESSION)
    assert delivered["set_aside"] == [{"name": BAD_NAME, "reason": reason}]
    assert delivered["entered"] == []
