"""A recording filesystem and a model of what survives power loss (INV-03, INV-04).

The Recorder stands in front of ``pipost.files.Folder`` (every folder mailbox and
registry open is one): it performs every write, rename, unlink, mkdir, rmdir and
folder flush, and records it. The model replays the record one operation at a time
and says, at any cut, what a machine that lost power right there would find:

- a file's bytes are durable once write_new fsynced them (it does with
  ``durable=True``); otherwise they may come back empty or cut short;
- a name created, renamed or removed in a folder (a mkdir and an rmdir too: they are
  names in the parent) is durable only once that folder is flushed (fsynced)
  afterwards.

An unflushed change may also have reached the disk, or not: so "durable" is what is
certain, and "possible" adds every name the unflushed changes could have left.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from pipost import files
from pipost.message import SUFFIX

FolderKey = tuple[str, int]
"""A folder's path and generation: a folder removed and made again is a new folder,
and the entries of the old one are not in it."""


@dataclass(frozen=True)
class FileNode:
    data: bytes
    durable: bool
    """Flushed to disk when written: it cannot come back empty or partial."""


@dataclass(frozen=True)
class DirNode:
    folder: FolderKey


Node = FileNode | DirNode


@dataclass(frozen=True)
class Link:
    """A name in ``folder`` now stands for ``node`` (a create, a rename's target, a mkdir)."""

    folder: FolderKey
    name: str
    node: Node


@dataclass(frozen=True)
class Unlink:
    """A name leaves ``folder`` (an unlink, a rename's source, an rmdir)."""

    folder: FolderKey
    name: str


@dataclass(frozen=True)
class Flush:
    folder: FolderKey


@dataclass(frozen=True)
class Returned:
    """A deposit returned to its sender: from here on the sender was told "queued"."""

    message_id: str
    path: str
    data: bytes


@dataclass(frozen=True)
class Entered:
    """The message is in a context that keeps it (a transcript: fsynced at entry)."""

    message_id: str


Op = Link | Unlink | Flush | Returned | Entered


def _apply(entries: dict[str, Node], op: Link | Unlink) -> None:
    if isinstance(op, Link):
        entries[op.name] = op.node
    else:
        entries.pop(op.name, None)


class Recorder:
    """Performs what pipost asks of ``pipost.files`` and records it in ``ops``.

    Everything under ``base`` must be made through it (``base`` itself is taken as
    durable). ``install()`` patches the module for as long as its stack is open."""

    def __init__(self, base: Path) -> None:
        self.base = str(base)
        self.ops: list[Op] = []
        self._generation: dict[str, int] = {self.base: 0}
        self._live: dict[FolderKey, dict[str, Node]] = {(self.base, 0): {}}

    # -- markers the test adds ----------------------------------------------------------

    def returned(self, message_id: str, path: str | Path, data: bytes) -> None:
        self.ops.append(Returned(message_id, str(path), data))

    def entered(self, message_id: str) -> None:
        self.ops.append(Entered(message_id))

    # -- the patched layer --------------------------------------------------------------

    def install(self) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        Folder = files.Folder
        wrappers: dict[str, Callable[..., Any]] = {
            "write_new": self._write_new(Folder.write_new),
            "rename": self._rename(Folder.rename),
            "unlink": self._unlink(Folder.unlink),
            "flush": self._flush(Folder.flush),
            "_make_one": self._make_one(Folder._make_one),
            "remove_empty": self._remove_empty(Folder.remove_empty),
        }
        for name, wrapper in wrappers.items():
            stack.enter_context(mock.patch.object(Folder, name, wrapper))
        return stack

    def _key(self, path: str) -> FolderKey:
        if path not in self._generation:
            raise AssertionError(f"{path} was made outside pipost.files: the model cannot see it")
        return (path, self._generation[path])

    def _record(self, op: Link | Unlink, at: int | None = None) -> None:
        _apply(self._live.setdefault(op.folder, {}), op)
        if at is None:
            self.ops.append(op)
        else:
            self.ops.insert(at, op)

    def _write_new(self, real: Callable[..., None]) -> Callable[..., None]:
        def write_new(
            folder: files.Folder, name: str, data: bytes, *, durable: bool = True
        ) -> None:
            synced = _fsyncs(lambda: real(folder, name, data, durable=durable))
            self._record(Link(self._key(folder.path), name, FileNode(bytes(data), synced)))

        return write_new

    def _rename(self, real: Callable[..., None]) -> Callable[..., None]:
        def rename(
            folder: files.Folder, name: str, target: str, into: files.Folder | None = None
        ) -> None:
            source_key = self._key(folder.path)
            node = self._live.get(source_key, {}).get(name)
            if node is None:  # written outside pipost.files (the drop log): its flushing is unknown
                node = FileNode(Path(folder.name(name)).read_bytes(), durable=False)
            real(folder, name, target, into)
            self._record(Link(self._key((into or folder).path), target, node))
            self._record(Unlink(source_key, name))

        return rename

    def _unlink(self, real: Callable[[files.Folder, str], None]) -> Callable[..., None]:
        def unlink(folder: files.Folder, name: str) -> None:
            real(folder, name)
            self._record(Unlink(self._key(folder.path), name))

        return unlink

    def _flush(self, real: Callable[[files.Folder], None]) -> Callable[..., None]:
        def flush(folder: files.Folder) -> None:
            if _fsyncs(lambda: real(folder)):
                self.ops.append(Flush(self._key(folder.path)))

        return flush

    def _make_one(
        self, real: Callable[[files.Folder, str], files.Folder]
    ) -> Callable[..., files.Folder]:
        def make_one(folder: files.Folder, name: str) -> files.Folder:
            path = folder.name(name)
            existed = os.path.lexists(path)
            at = len(self.ops)
            made = real(folder, name)  # may flush the parent: that flush comes after the mkdir
            if not existed:
                generation = self._generation.get(path, 0) + 1
                self._record(Link(self._key(folder.path), name, DirNode((path, generation))), at)
                self._generation[path] = generation
            return made

        return make_one

    def _remove_empty(self, real: Callable[[files.Folder, str], bool]) -> Callable[..., bool]:
        def remove_empty(folder: files.Folder, name: str) -> bool:
            removed = real(folder, name)
            if removed:
                self._record(Unlink(self._key(folder.path), name))
            return removed

        return remove_empty


def _fsyncs(call: Callable[[], None]) -> bool:
    """Runs ``call``; whether it asked the kernel to flush something to disk. What is
    durable is judged by the fsync that happened, not by the flag that asked for it."""
    real = os.fsync
    calls: list[int] = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    with mock.patch.object(os, "fsync", fsync):
        call()
    return bool(calls)


@dataclass(frozen=True)
class AfterPowerLoss:
    lost: tuple[str, ...]
    """Deposits that returned (and entered no context) but are not certain to be on
    disk whole: a sender was told "queued" for a message that power loss can take."""
    partial: tuple[str, ...]
    """``*.json`` files that power loss could leave behind empty or cut short."""

    @property
    def ok(self) -> bool:
        return not self.lost and not self.partial


@dataclass
class PowerLossModel:
    """Replays recorded operations; check() judges a power loss after the last one."""

    base: str
    _durable: dict[FolderKey, dict[str, Node]] = field(default_factory=dict)
    _unflushed: dict[FolderKey, list[Link | Unlink]] = field(default_factory=dict)
    _awaiting: dict[str, Returned] = field(default_factory=dict)

    def apply(self, op: Op) -> None:
        if isinstance(op, Link | Unlink):
            self._unflushed.setdefault(op.folder, []).append(op)
        elif isinstance(op, Flush):
            entries = self._durable.setdefault(op.folder, {})
            for change in self._unflushed.pop(op.folder, []):
                _apply(entries, change)
        elif isinstance(op, Returned):
            self._awaiting[op.message_id] = op
        else:
            self._awaiting.pop(op.message_id, None)

    def durable_files(self) -> dict[str, FileNode]:
        """Every file certain to be there after power loss, by path."""
        found: dict[str, FileNode] = {}
        folders: list[FolderKey] = [(self.base, 0)]
        while folders:
            folder = folders.pop()
            for name, node in self._durable.get(folder, {}).items():
                if isinstance(node, DirNode):
                    folders.append(node.folder)
                else:
                    found[os.path.join(folder[0], name)] = node
        return found

    def _possible_files(self) -> Iterator[tuple[str, FileNode]]:
        """Every (path, file) that power loss could leave under any folder: what is
        durable there, and whatever an unflushed change could have put there."""
        for folder in self._durable.keys() | self._unflushed.keys():
            for name, node in self._durable.get(folder, {}).items():
                if isinstance(node, FileNode):
                    yield os.path.join(folder[0], name), node
            for change in self._unflushed.get(folder, []):
                if isinstance(change, Link) and isinstance(change.node, FileNode):
                    yield os.path.join(folder[0], change.name), change.node

    def check(self) -> AfterPowerLoss:
        durable = self.durable_files()
        lost = tuple(
            sorted(
                deposit.path
                for deposit in self._awaiting.values()
                if durable.get(deposit.path) != FileNode(deposit.data, durable=True)
            )
        )
        partial = tuple(
            sorted(
                {
                    path
                    for path, node in self._possible_files()
                    if _is_reader_visible_json(path) and not node.durable
                }
            )
        )
        return AfterPowerLoss(lost, partial)


def _is_reader_visible_json(path: str) -> bool:
    name = os.path.basename(path)
    return name.endswith(SUFFIX) and not name.startswith(".")


def every_cut(base: Path, ops: list[Op]) -> list[tuple[int, AfterPowerLoss]]:
    """The verdict of a power loss at every cut of ``ops`` (after 0, 1, … all of them)."""
    model = PowerLossModel(str(base))
    verdicts = [(0, model.check())]
    for index, op in enumerate(ops, start=1):
        model.apply(op)
        verdicts.append((index, model.check()))
    return verdicts
