"""Benchmark: what timing the wait for each batch costs (``sess.batches``, ``sess.data_wait``).

Run it as a script (``python -m tests.performance.bench_stalls``) or with pytest
(``pytest tests/performance/bench_stalls.py -m performance -s``). It prints figures measured in
one run; it does not fail on a slow machine. Four loops over the same in-memory items: plain
iteration, ``sess.batches()`` when no wait reaches the threshold (two clock reads per item, no
span), ``with sess.data_wait()`` around ``next()`` (the same, by hand), and ``sess.batches()``
with ``min_s=0`` (a span per item: the cost of one reported stall). Best of several repeats.
"""

from __future__ import annotations

import sys

import pytest

import ett
from tests.performance.bench_step import _best_ns_per_call as _best_ns_per_item
from tests.performance.bench_step import _Discard


def run(n_items: int = 500_000, n_spans: int = 50_000, repeats: int = 5) -> dict[str, float]:
    """Measure the four loops side by side; print and return the figures (ns per item)."""
    sess = ett.init(job_id="bench-stalls", exporter=_Discard(), install_handlers=False)
    sess.first_batch(step=0)
    items = list(range(n_items))

    def plain(n: int) -> None:
        for _ in items[:n]:
            pass

    def batches(n: int) -> None:
        for _ in sess.batches(items[:n], min_s=60.0):
            pass

    def by_hand(n: int) -> None:
        it = iter(items[:n])
        for _ in range(n):
            with sess.data_wait(min_s=60.0):
                next(it)

    def spans(n: int) -> None:
        for _ in sess.batches(items[:n], min_s=0.0):
            pass

    try:
        plain_ns = _best_ns_per_item(plain, n_items, repeats)
        batches_ns = _best_ns_per_item(batches, n_items, repeats)
        by_hand_ns = _best_ns_per_item(by_hand, n_items, repeats)
        span_ns = _best_ns_per_item(spans, n_spans, repeats)
    finally:
        sess.end()
    figures = {
        "plain_ns": plain_ns,
        "batches_ns": batches_ns,
        "batches_net_ns": batches_ns - plain_ns,
        "data_wait_ns": by_hand_ns,
        "span_ns": span_ns,
        "span_net_ns": span_ns - plain_ns,
        "span_over_no_span": (span_ns - plain_ns) / max(batches_ns - plain_ns, 1e-3),
    }
    print(f"python {sys.version.split()[0]}; best of {repeats}")
    print(f"  plain iteration             {plain_ns:9.1f} ns/item")
    print(
        f"  sess.batches(), no stall    {batches_ns:9.1f} ns/item  "
        f"({figures['batches_net_ns']:.1f} ns net)"
    )
    print(f"  with sess.data_wait(), none {by_hand_ns:9.1f} ns/item (loop and next() included)")
    print(
        f"  sess.batches(), every item  {span_ns:9.1f} ns/item  "
        f"({figures['span_net_ns']:.1f} ns net: one ett.data.wait span)"
    )
    print(f"  a reported stall costs {figures['span_over_no_span']:.0f}x an unreported one")
    return figures


@pytest.mark.performance
def test_bench_stalls() -> None:
    """Prints the figures (pytest -s); asserts only that they were measured."""
    figures = run(n_items=200_000, n_spans=20_000, repeats=3)
    assert figures["batches_ns"] > 0 and figures["span_ns"] > 0


if __name__ == "__main__":
    run()
