"""What a receiving session lets into its context: the inbound mode, the resume
mode and the loop guard (SPEC 3, 6; INV-18, INV-20).

Loops are bounded in rate, whatever the models decide (SPEC 6.1): per sender,
an identical body within 10 s of the last one delivered is dropped, and so is a
9th message within 30 s. Two sessions that answer everything exchange a bounded
number of messages in any window, but with new words each time they go on.

The modes are tables, not branches; the guard is a small state machine whose
clock is handed in: ms of a clock that never steps (the receiving process's
monotonic clock, SPEC 6.1), so a wall clock stepped back neither drops every
message for as long nor lets repeats through. Nothing here touches the disk.
"""

from __future__ import annotations

import enum
import hashlib
from collections import deque
from dataclasses import dataclass, field


class Inbound(enum.Enum):
    """``PI_POST_INBOUND``; the first mode is the default."""

    ACCEPT = "accept"
    ASK = "ask"
    REFUSE = "refuse"


class Resume(enum.Enum):
    """``PI_POST_RESUME``; the first mode is the default."""

    WAKE = "wake"
    STAGE = "stage"


def inbound_mode(value: str | None) -> Inbound:
    """``PI_POST_INBOUND``, read as :func:`mode_word` says: accept by default."""
    return Inbound(mode_word(Inbound, value))


def resume_mode(value: str | None) -> Resume:
    """``PI_POST_RESUME``, read as :func:`mode_word` says: wake by default."""
    return Resume(mode_word(Resume, value))


def mode_word(modes: type[enum.Enum], value: str | None) -> str:
    """The word of the mode a variable's value names, read stripped of blanks and
    in any case (``REFUSE`` refuses); unset, blank or none of the words: the first
    mode's, the default."""
    words = [mode.value for mode in modes]
    spelled = _spelled(value)
    return spelled if spelled in words else words[0]


def is_unknown_mode(modes: type[enum.Enum], value: str | None) -> bool:
    """A value that is set but none of the words: it means the default, and the
    session says so once."""
    return _spelled(value) not in ("", mode_word(modes, value))


def _spelled(value: str | None) -> str:
    return (value or "").strip().lower()


@dataclass(frozen=True)
class Admission:
    """Whether a message may enter the context, and if not, why."""

    deliver: bool
    reason: str | None = None
    """Why a message is dropped; recorded, never the body."""


DELIVER = Admission(True)

# (mode, a person can be asked) -> what to do before the guard.
# None means "ask the person"; ask without a UI falls back to accept.
INBOUND_TABLE: dict[tuple[Inbound, bool], Admission | None] = {
    (Inbound.ACCEPT, True): DELIVER,
    (Inbound.ACCEPT, False): DELIVER,
    (Inbound.ASK, True): None,
    (Inbound.ASK, False): DELIVER,
    (Inbound.REFUSE, True): Admission(False, "refused: PI_POST_INBOUND=refuse"),
    (Inbound.REFUSE, False): Admission(False, "refused: PI_POST_INBOUND=refuse"),
}

ASK_DECLINED = Admission(False, "declined by the user (PI_POST_INBOUND=ask)")

# (mode, found at start-up) -> wake the session now, or stage for its first prompt.
WAKES: dict[tuple[Resume, bool], bool] = {
    (Resume.WAKE, True): True,
    (Resume.STAGE, True): False,
    (Resume.WAKE, False): True,  # live mail is always a steer that wakes
    (Resume.STAGE, False): True,
}

DUPLICATE_WINDOW_MS = 10_000
RATE_WINDOW_MS = 30_000
RATE_LIMIT = 8


@dataclass
class _History:
    delivered_at: deque[int] = field(default_factory=deque)
    last_by_body: dict[str, int] = field(default_factory=dict)


class LoopGuard:
    """Per-sender memory of recent deliveries.

    judge() only looks; admit() records a message that entered context. Kept
    apart so that a message whose delivery failed, and is retried, is not then
    dropped as a duplicate of itself."""

    def __init__(self) -> None:
        self._senders: dict[str, _History] = {}

    def judge(self, sender: str, body: str, now: int) -> Admission:
        history = self._forget_old(sender, now)
        if _digest(body) in history.last_by_body:
            return Admission(
                False, f"duplicate: identical body within {DUPLICATE_WINDOW_MS // 1000} s"
            )
        if len(history.delivered_at) >= RATE_LIMIT:
            return Admission(
                False, f"rate: over {RATE_LIMIT} messages in {RATE_WINDOW_MS // 1000} s"
            )
        return DELIVER

    def admit(self, sender: str, body: str, now: int) -> None:
        history = self._forget_old(sender, now)
        history.delivered_at.append(now)
        history.last_by_body[_digest(body)] = now

    def _forget_old(self, sender: str, now: int) -> _History:
        history = self._senders.setdefault(sender, _History())
        while history.delivered_at and now - history.delivered_at[0] >= RATE_WINDOW_MS:
            history.delivered_at.popleft()
        history.last_by_body = {
            d: t for d, t in history.last_by_body.items() if now - t < DUPLICATE_WINDOW_MS
        }
        return history


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()
