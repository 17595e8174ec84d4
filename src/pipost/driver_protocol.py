"""What both ends of the driver protocol (SPEC 11.3) share: the version spoken, the
JSON values that travel, where a fresh world's clock starts, a misuse of the
interface, and the one method a driver has.

pipost's shim (:mod:`pipost.driver`, ``pi-post driver``) and the conformance kit's
client (``pipost_conformance.client``) both import it; it imports nothing of
either, so the kit can speak the protocol without loading pipost's runtime.
"""

from __future__ import annotations

from typing import Protocol, TypeAlias

Json: TypeAlias = bool | int | float | str | list["Json"] | dict[str, "Json"] | None
Result: TypeAlias = dict[str, Json]

DEFAULT_NOW = 1_796_078_534_257
"""Where the injected clock starts: the moment of the reference CLI's transcripts."""

PROTOCOL = 1
"""The version of the driver protocol pipost's shim speaks and the suite sends."""


class DriverError(Exception):
    """The interface was misused: an unknown operation or bad arguments."""


class Driver(Protocol):
    def call(self, op: str, **args: Json) -> Result:
        """Run operation ``op``; raises DriverError only for a misuse of the interface."""
        ...
