"""What an implementation did on disk, read from a system-call trace, and whether
it wrote the way SPEC 1 and 3.1 say (INV-03, INV-04), and whether it counted a
mailbox under its lock (INV-08): pure functions over the text of ``strace -f -yy``
(the kit's ``tracing`` module starts it).

Only what the checks need is read: opens (with their flags), writes, flushes
(``fsync``, ``fdatasync``, ``sync``, ``syncfs``), renames, links, unlinks and
truncations, ``flock`` and the listing of a folder (``getdents64``). Paths come
out absolute: a name relative to a folder's descriptor is
joined to the path ``-yy`` prints for it, and ``/proc/self/fd/N/name`` (the way
an implementation without ``openat`` reaches below a descriptor) to the path of
descriptor N. Calls that failed did nothing and are left out.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

OPENS = ("open", "openat", "openat2", "creat")
WRITES = ("write", "writev", "pwrite64", "pwritev", "pwritev2")
FLUSHES = ("fsync", "fdatasync")
FLUSHES_ALL = ("sync", "syncfs")
RENAMES = ("rename", "renameat", "renameat2")
LINKS = ("link", "linkat")
UNLINKS = ("unlink", "unlinkat")
TRUNCATES = ("truncate", "ftruncate")
MKDIRS = ("mkdir", "mkdirat")
LOCKS = ("flock",)
LISTINGS = ("getdents64", "getdents")
TRACED = (
    OPENS + WRITES + FLUSHES + FLUSHES_ALL + RENAMES + LINKS + UNLINKS + TRUNCATES + MKDIRS
) + (LOCKS + LISTINGS)
"""The system calls the kit asks strace for (``-e trace=…``)."""

WRITING_FLAGS = frozenset({"O_WRONLY", "O_RDWR", "O_TRUNC", "O_CREAT"})
ANSWERS_FD = 1
"""The implementation answers the driver on its standard output."""

_LINE = re.compile(r"^(?P<pid>\d+) +(?P<rest>.*)$")
_UNFINISHED = " <unfinished ...>"
_RESUMED = re.compile(r"^<\.\.\. (?P<name>\w+) resumed>(?P<rest>.*)$")
_CALL = re.compile(r"^(?P<name>\w+)\((?P<args>.*)\) += (?P<result>.*)$")
_DECORATED = re.compile(r"^(?P<fd>-?\d+|AT_FDCWD)<(?P<path>.*)>$")
_PROC_FD = re.compile(r"^/proc/(?:self|thread-self|\d+)/fd/(?P<fd>\d+)(?P<rest>/.*)?$")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|[0-7]{1,3}|.)")
_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", '"': '"', "\\": "\\"}


@dataclass(frozen=True)
class Event:
    """One system call that succeeded, as the checks see it."""

    index: int
    """Its place in the trace (completion order)."""
    pid: int
    call: str
    path: str = ""
    """The file it acts on (for a rename or a link: the source)."""
    target: str = ""
    """Where a rename or a link puts it."""
    flags: frozenset[str] = frozenset()
    """An open's flags (``O_WRONLY``, ``O_CREAT`` …); a flock's (``LOCK_EX`` …)."""
    fd: int | None = None
    """The descriptor it acts on (a write, a flush)."""

    @property
    def kind(self) -> str:
        for kind, calls in (
            ("open", OPENS),
            ("write", WRITES),
            ("flush", FLUSHES),
            ("flush-all", FLUSHES_ALL),
            ("rename", RENAMES),
            ("link", LINKS),
            ("unlink", UNLINKS),
            ("truncate", TRUNCATES),
            ("mkdir", MKDIRS),
            ("lock", LOCKS),
            ("list", LISTINGS),
        ):
            if self.call in calls:
                return kind
        return "other"

    def shown(self) -> str:
        said = f"{self.call}({self.path}"
        said += f" -> {self.target}" if self.target else ""
        said += f", {'|'.join(sorted(self.flags))}" if self.flags else ""
        return said + ")"


def events(trace: str) -> list[Event]:
    """The successful calls of a ``strace -f -yy`` trace, in the order they
    completed. A call another thread interrupted (``<unfinished ...>``, then
    ``<... name resumed>``) is read whole, where it resumed."""
    pending: dict[int, str] = {}
    fds: dict[int, dict[int, str]] = {}
    found: list[Event] = []
    for line in trace.splitlines():
        matched = _LINE.match(line)
        if matched is None:
            continue
        pid, rest = int(matched.group("pid")), matched.group("rest")
        if rest.endswith(_UNFINISHED):
            pending[pid] = rest.removesuffix(_UNFINISHED)
            continue
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            if pid not in pending:
                continue  # its start came before the trace did
            rest = pending.pop(pid) + resumed.group("rest")
        call = _CALL.match(rest)
        if call is None:
            continue  # a signal, an exit
        event = _event(len(found), pid, call, fds.setdefault(pid, {}))
        if event is not None:
            found.append(event)
    return found


def _event(index: int, pid: int, call: re.Match[str], fds: dict[int, str]) -> Event | None:
    name, result = call.group("name"), call.group("result")
    args = split_arguments(call.group("args"))
    for text in (*args, result.split(" ")[0]):
        decorated = _DECORATED.match(text)
        if decorated and decorated.group("fd") != "AT_FDCWD":
            fds[int(decorated.group("fd"))] = decorated.group("path")
    if result.startswith("-1") or result.startswith("?"):
        return None
    if name in OPENS:
        if name == "creat":
            path, flags = args[0], {"O_CREAT", "O_WRONLY", "O_TRUNC"}
        elif name == "open":
            path, flags = args[0], set(args[1].split("|"))
        else:
            path, flags = args[1], set(re.findall(r"O_[A-Z_]+", args[2]))
        folder = "" if name in ("open", "creat") else args[0]
        return Event(index, pid, name, resolve(folder, path, fds), flags=frozenset(flags))
    if name in LOCKS:
        fd, path = descriptor(args[0])
        return Event(index, pid, name, path, flags=frozenset(args[1].split("|")), fd=fd)
    if name in WRITES + FLUSHES + LISTINGS + ("ftruncate", "syncfs"):
        fd, path = descriptor(args[0])
        return Event(index, pid, name, path, fd=fd)
    if name == "sync":
        return Event(index, pid, name)
    if name in ("truncate", "unlink", "mkdir"):
        return Event(index, pid, name, resolve("", args[0], fds))
    if name in ("rename", "link"):
        return Event(index, pid, name, resolve("", args[0], fds), target=resolve("", args[1], fds))
    if name in ("renameat", "renameat2", "linkat"):
        return Event(
            index, pid, name, resolve(args[0], args[1], fds), target=resolve(args[2], args[3], fds)
        )
    if name in ("unlinkat", "mkdirat"):
        return Event(index, pid, name, resolve(args[0], args[1], fds))
    return None


def split_arguments(text: str) -> list[str]:
    """A call's arguments as strace prints them, split at the commas between them
    (not those inside a string, a ``<path>`` or a ``{…}``/``[…]``)."""
    found: list[str] = []
    current: list[str] = []
    depth, quoted, escaped, angled = 0, False, False, 0
    for char in text:
        if quoted:
            current.append(char)
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                quoted = False
            continue
        if char == '"' and not angled:
            quoted = True
        elif char == "<":
            angled += 1
        elif char == ">" and angled:
            angled -= 1
        elif char in "{[(" and not angled:
            depth += 1
        elif char in "}])" and not angled:
            depth -= 1
        elif char == "," and depth == 0 and not angled:
            found.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    if current or found:
        found.append("".join(current).strip())
    return found


def unquote(text: str) -> str:
    """A string strace printed (``"a\\"b"``, maybe followed by ``...``) as it was."""
    inner = text.removesuffix("...")
    if not (inner.startswith('"') and inner.endswith('"')):
        return inner
    raw = bytearray()
    body, at = inner[1:-1], 0
    for escape in _ESCAPE.finditer(body):
        raw += body[at : escape.start()].encode("utf-8", "surrogateescape")
        code = escape.group(1)
        if code.startswith("x") and len(code) == 3:
            raw.append(int(code[1:], 16))
        elif code[0] in "01234567":
            raw.append(int(code, 8) & 0xFF)
        else:
            raw += _SIMPLE_ESCAPES.get(code, code).encode("utf-8", "surrogateescape")
        at = escape.end()
    raw += body[at:].encode("utf-8", "surrogateescape")
    return raw.decode("utf-8", "surrogateescape")


def descriptor(text: str) -> tuple[int | None, str]:
    """``5</post/inbox>`` → (5, "/post/inbox"); a descriptor without a path: ("")."""
    decorated = _DECORATED.match(text)
    if decorated is None:
        return (int(text) if text.isdigit() else None), ""
    fd = decorated.group("fd")
    return (int(fd) if fd != "AT_FDCWD" else None), decorated.group("path")


def resolve(folder: str, path_text: str, fds: dict[int, str]) -> str:
    """The absolute path a call names: ``path_text`` (a printed string) relative
    to ``folder`` (a printed descriptor, or "" for the current folder, which
    strace cannot show then: the path stays as given)."""
    path = unquote(path_text)
    through = _PROC_FD.match(path)
    if through is not None and int(through.group("fd")) in fds:
        path = fds[int(through.group("fd"))] + (through.group("rest") or "")
    elif not path.startswith("/"):
        _, base = descriptor(folder)
        path = posixpath.join(base, path) if base else path
    return posixpath.normpath(path)


# -- what SPEC 1 and 3.1 ask of a write --------------------------------------------------


def is_mail_or_record(path: str, root: str) -> bool:
    """A name readers take for a letter or a record (SPEC 1): ``*.json``, not a dot
    file, directly in a mailbox (``inbox/<address>/``) or in ``registry/``."""
    folder, name = posixpath.split(path)
    if not name.endswith(".json") or name.startswith("."):
        return False
    parent, folder_name = posixpath.split(folder)
    in_registry = folder == posixpath.join(root, "registry")
    in_a_mailbox = parent == posixpath.join(root, "inbox") and bool(folder_name)
    return in_registry or in_a_mailbox


def written_in_place(found: Sequence[Event], root: str) -> list[str]:
    """INV-03: every call that opened a letter or a record for writing, truncated
    one, or wrote through a descriptor that names one."""
    problems = []
    for event in found:
        if not is_mail_or_record(event.path, root):
            continue
        if event.kind == "open" and event.flags & WRITING_FLAGS:
            problems.append(f"{event.shown()}: a letter or record opened for writing")
        elif event.kind in ("truncate", "write"):
            problems.append(f"{event.shown()}: a letter or record written in place")
    return problems


def namings(found: Sequence[Event], path: str) -> list[Event]:
    """The calls that gave ``path`` its name: a rename or a link onto it, or an open
    that may have created it (``O_CREAT``)."""
    return [
        event
        for event in found
        if (event.kind in ("rename", "link") and event.target == path)
        or (event.kind == "open" and event.path == path and "O_CREAT" in event.flags)
    ]


def not_renamed_into_place(found: Sequence[Event], path: str) -> list[str]:
    """INV-03: how ``path`` got its name, where it was not a rename or a link from a
    temporary (a name readers ignore) in the same folder."""
    problems = []
    for event in namings(found, path):
        if event.kind == "open":
            problems.append(f"{event.shown()}: created under its own name, not renamed into place")
        elif posixpath.dirname(event.path) != posixpath.dirname(path):
            problems.append(f"{event.shown()}: renamed from another folder")
        elif _looks_at(posixpath.basename(event.path)):
            problems.append(f"{event.shown()}: renamed from a name readers look at")
    return problems


def _looks_at(name: str) -> bool:
    return name.endswith(".json") and not name.startswith(".")


def answer_after(found: Sequence[Event], index: int) -> Event | None:
    """The first write of an answer to the driver after the event at ``index``."""
    return next((e for e in found[index + 1 :] if e.kind == "write" and e.fd == ANSWERS_FD), None)


def not_flushed(found: Sequence[Event], path: str) -> list[str]:
    """INV-04: what was not flushed before the answer that followed ``path``'s
    naming: the bytes of the file that became ``path`` (before a rename or link
    gave them the name, else after their last write), the folder (after the name
    appeared), and each folder above it made by the operation (into its parent,
    after it was made). A ``sync`` or ``syncfs`` flushes them all."""
    named = namings(found, path)
    if not named:
        return [f"the trace shows no call that gave {path} its name"]
    last = named[-1]
    answer = answer_after(found, last.index)
    if answer is None:
        return [f"the trace shows no answer written after {last.shown()}"]
    problems = []
    data = last.path
    if last.kind == "open":  # created in place: its bytes go in after the name
        window = found[last.index + 1 : answer.index]
        wrote = [e.index for e in window if e.kind == "write" and e.path == path]
        since = wrote[-1] if wrote else last.index
        flushed = _flushed(found[since + 1 : answer.index], {path})
    else:
        wrote = [e.index for e in found[: last.index] if e.kind == "write" and e.path == data]
        since = wrote[-1] if wrote else -1
        flushed = _flushed(found[since + 1 : last.index], {data})
    if not flushed:
        problems.append(f"the bytes of {data} were not flushed (fsync) before {last.shown()}")
    if not _flushed(found[last.index + 1 : answer.index], {posixpath.dirname(path)}):
        problems.append(
            f"the folder {posixpath.dirname(path)} was not flushed (fsync) after "
            f"{last.shown()} and before the answer"
        )
    answers = [e.index for e in found[: last.index] if e.kind == "write" and e.fd == ANSWERS_FD]
    began = answers[-1] if answers else -1  # the answer before: the operation began after it
    for made in found[began + 1 : answer.index]:
        if made.kind == "mkdir" and path.startswith(made.path + "/"):
            parent = posixpath.dirname(made.path)
            if not _flushed(found[made.index + 1 : answer.index], {parent}):
                problems.append(
                    f"{made.shown()}: the folder made for it was not flushed into "
                    f"{parent} before the answer"
                )
    return problems


def _flushed(window: Iterable[Event], paths: set[str]) -> bool:
    return any(
        event.kind == "flush-all" or (event.kind == "flush" and event.path in paths)
        for event in window
    )


def moved_before_unlink(found: Sequence[Event], path: str) -> list[str]:
    """INV-04 for a claim (SPEC 3.3): the letter stays at its name until its unlink,
    so a crash before then leaves it queued; a rename away from the name is where
    it could be lost."""
    unlinks = [e.index for e in found if e.kind == "unlink" and e.path == path]
    end = unlinks[0] if unlinks else len(found)
    return [
        f"{event.shown()}: the claimed letter moved from its name before its unlink"
        for event in found[:end]
        if event.kind == "rename" and event.path == path
    ]


def counted_unlocked(found: Sequence[Event], path: str) -> list[str]:
    """INV-08 (SPEC 3.1): before the call that gave ``path`` its name, an exclusive
    ``flock`` on its mailbox folder was taken (by any process of the implementation:
    a helper such as flock(1) holds it for its parent), and the folder was listed
    (the count) after it. That the lock was still held at the rename is not read:
    the trace does not follow which descriptors share the lock."""
    named = namings(found, path)
    if not named:
        return [f"the trace shows no call that gave {path} its name"]
    rename, mailbox = named[-1], posixpath.dirname(path)
    locks = [
        e.index
        for e in found[: rename.index]
        if e.kind == "lock" and e.path == mailbox and "LOCK_EX" in e.flags
    ]
    if not locks:
        return [f"no exclusive flock on the mailbox folder {mailbox} before {rename.shown()}"]
    counted = [
        e for e in found[locks[-1] + 1 : rename.index] if e.kind == "list" and e.path == mailbox
    ]
    if not counted:
        return [
            f"the mailbox folder {mailbox} was not listed (counted) between its lock and "
            f"{rename.shown()}"
        ]
    return []
