"""value.Value: records that behave like frozen dataclasses."""

from __future__ import annotations

from typing import Final

from pipost.value import Value


class Point(Value):
    __slots__ = ("x", "y")
    x: Final[int]
    y: Final[int]

    def __init__(self, x: int, y: int = 0) -> None:
        self.x = x
        self.y = y


class Pair(Value):
    __slots__ = ("x", "y")
    x: int
    y: int

    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y


def test_equality_and_hash_follow_the_fields() -> None:
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(1, 3)
    assert hash(Point(1, 2)) == hash(Point(1, 2))
    assert len({Point(1, 2), Point(1, 2), Point(2, 1)}) == 2


def test_records_of_different_types_are_never_equal() -> None:
    assert Point(1, 2) != Pair(1, 2)


def test_replace_changes_only_what_it_names() -> None:
    point = Point(1, 2)
    assert point.replace(y=7) == Point(1, 7)
    assert point == Point(1, 2)


def test_repr_names_every_field() -> None:
    assert repr(Point(1, 2)) == "Point(x=1, y=2)"
