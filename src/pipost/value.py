"""Immutable records, without the import cost of ``dataclasses``.

``pi-post send`` runs from hooks on every tool call, and importing ``dataclasses``
(which pulls in ``inspect``, ``ast`` and ``re``) costs more than the whole send.
A record lists its fields in ``__slots__`` (in order), declares them ``Final`` (so
the type checker refuses a later assignment: a runtime guard would make every
record ten times dearer to build) and sets each one in its ``__init__``; equality,
hashing, ``repr`` and ``replace`` follow the fields.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Self


class Value:
    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Value)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._fields()))

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with some fields changed (every field is an ``__init__`` keyword)."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return type(self)(**fields)
