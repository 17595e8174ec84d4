"""pi-post's conformance kit (SPEC 11; docs/conformance.md): the specification as
it runs against an implementation, shipped with pipost so that a porter needs no
checkout of it.

- ``features/``: the Gherkin features, their steps and behave's environment;
- ``machines/``: the state machines that judge an implementation through the
  driver, and what they share with pipost's own tests;
- ``client``: the kit's end of the driver protocol, which both drive an
  implementation through (pipost's end is ``pipost.driver``);
- ``runner``: ``pi-post conformance``, which runs both and writes the reports.

Unlike ``pipost``, it needs more than the standard library: behave, pytest,
hypothesis and jsonschema, the ``conformance`` extra
(``pip install "pipost[conformance]"``). ``pi-post`` imports it only for
``pi-post conformance``.
"""

from pathlib import Path

INTEROP = Path(__file__).resolve().parent / "fixtures" / "interop"
"""What the reference pi-post 0.7 wrote and printed, recorded (its README.md says
how): golden data for the features, the machines and pipost's own tests."""

SCHEMAS = Path(__file__).resolve().parent.parent / "pipost" / "schemas"
"""pipost's JSON Schemas, read as files by steps that must not import pipost
(they drive it through the kit's client). pipost ships beside the kit, in the
same wheel (or src/)."""
