"""pipost: the Python reference implementation of pi-post, asynchronous message
passing between agent sessions on one machine.

The names of ``__all__`` are the API for Python: a :class:`Post` over a post
office folder (``default_root``) sends, lists, resolves, peeks and sweeps
(SPEC 3, 4, 5). Each is imported from its module when first used, so ``import
pipost`` loads nothing more: the command line's cold start and the pure modules
stay as they are (DESIGN §10). DESIGN §10's table maps each module to the
sections of SPEC it carries out.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pipost.address import address_of
    from pipost.message import Message, Rejected, Sender
    from pipost.post import Post, Receipt, Refused, default_root, os_caller
    from pipost.refusals import Refusal
    from pipost.resolve import Caller
    from pipost.session import Candidate, Presence, Record

__all__ = [
    "Caller",
    "Candidate",
    "Message",
    "Post",
    "Presence",
    "Receipt",
    "Record",
    "Refusal",
    "Refused",
    "Rejected",
    "Sender",
    "address_of",
    "default_root",
    "os_caller",
]


def __getattr__(name: str) -> object:
    """A name of ``__all__``, from its module, imported now."""
    if name in ("Post", "Receipt", "Refused", "default_root", "os_caller"):
        from pipost import post

        return getattr(post, name)
    if name in ("Message", "Rejected", "Sender"):
        from pipost import message

        return getattr(message, name)
    if name in ("Candidate", "Presence", "Record"):
        from pipost import session

        return getattr(session, name)
    if name == "Caller":
        from pipost import resolve

        return resolve.Caller
    if name == "Refusal":
        from pipost import refusals

        return refusals.Refusal
    if name == "address_of":
        from pipost import address

        return address.address_of
    raise AttributeError(f"module 'pipost' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
