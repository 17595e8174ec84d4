"""Deposit-to-context latency of a receiving session: the folder watch against
polling only, measured side by side in one run and reported as a ratio.

    python benchmarks/receive_latency.py [--samples N] [--poll-samples M]

A sample is the time from the call that deposits a letter (write, flush,
rename, flush the folder) to the moment the host hands the framed text to its
context; the deposit's own cost is reported beside it. With the watch the host
wakes on the kernel's event; with polling only it finds the letter at its next
3 s poll. Letters arrive at random points of the poll cycle, so the poll-only
figure is about half the interval.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from pipost import files, mailbox
from pipost.address import address_of
from pipost.host import Delivery, Host
from pipost.message import Sender, new_message
from pipost.post import Post


class StampingContext:
    def __init__(self) -> None:
        self.entered: dict[str, float] = {}
        self.arrived = threading.Event()

    def holds(self, message_id: str) -> bool | None:
        return None

    def enter(self, delivery: Delivery) -> bool:
        self.entered[delivery.message.id] = time.perf_counter()
        self.arrived.set()
        return True


def measure(kernel_events: bool, samples: int) -> tuple[list[float], list[float]]:
    """Latencies and, beside them, what each deposit alone cost."""
    with tempfile.TemporaryDirectory() as tmp:
        post = Post(Path(tmp))
        context = StampingContext()
        host = Host(post, "bench-session", tmp, context, kernel_events=kernel_events)
        host.start()
        server = threading.Thread(target=host.serve)
        server.start()
        latencies: list[float] = []
        deposit_costs: list[float] = []
        try:
            for index in range(samples):
                sender = Sender("process", f"bench-{index}")  # its own sender: no rate drops
                message = new_message(sender, f"sample {index}", int(time.time() * 1000))
                context.arrived.clear()
                time.sleep(random.uniform(0, host.poll_s) if not kernel_events else 0.005)
                started = time.perf_counter()
                with files.make_root(post.root) as top:
                    mailbox.deposit(top, address_of("bench-session"), message)
                deposit_costs.append(time.perf_counter() - started)
                if not context.arrived.wait(10):
                    raise RuntimeError("the host never took the letter")
                latencies.append(context.entered[message.id] - started)
        finally:
            host.request_stop()
            server.join()
            host.stop()
        return latencies, deposit_costs


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {
        "samples": len(ordered),
        "p50_ms": statistics.median(ordered) * 1000,
        "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--poll-samples", type=int, default=6)
    args = parser.parse_args()
    watch_latency, deposit_costs = measure(True, args.samples)
    poll_latency, _ = measure(False, args.poll_samples)
    watch, poll = summary(watch_latency), summary(poll_latency)
    result = {
        "watch": watch,
        "poll_only": poll,
        "deposit_alone": summary(deposit_costs),
        "poll_over_watch_p50": poll["p50_ms"] / watch["p50_ms"],
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
