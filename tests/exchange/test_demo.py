"""``pi-post demo`` runs its whole narrated exchange between real processes."""

from __future__ import annotations

import pytest

from .conftest import Exchange

pytestmark = pytest.mark.exchange


def test_the_demo_shows_delivery_queueing_the_guard_and_a_sweep_that_keeps_mail(
    exchange: Exchange,
) -> None:
    demo = exchange.spawn("demo")  # its own listeners are killed with its group
    output, errors = demo.communicate(timeout=60)

    assert demo.returncode == 0, output + errors
    for shown in ("delivered", "queued", "duplicate"):
        assert shown in output, f"the demo never showed {shown!r}"
    final_listing = output.rsplit("$ pi-post list --all\n", 1)[1].splitlines()
    assert len(final_listing) == 1, final_listing  # the sweep left only bob's record
    assert final_listing[0].lstrip().startswith("bob — ")
    assert "1 queued" in final_listing[0]
