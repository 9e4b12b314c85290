"""Benchmark: the cost of ``Session.step()`` beside an empty loop and one SDK span per step.

Run it as a script (``python -m tests.performance.bench_step``) or with pytest
(``pytest tests/performance/bench_step.py -m performance -s``). It prints figures; it does not
fail on a slow machine. Targets (issue 3): at most 1 µs per ``step()``, and at least 20 times
cheaper than a span per step. Each figure is the best of several repeats (as ``timeit`` does);
"net" subtracts the empty loop's cost per iteration.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import ett

STEP_TARGET_NS = 1000.0
RATIO_TARGET = 20.0


class _Discard(SpanExporter):
    """An exporter that drops everything (the session's pipeline without a network)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _best_ns_per_call(loop: Callable[[int], None], n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter_ns()
        loop(n)
        best = min(best, (time.perf_counter_ns() - start) / n)
    return best


def run(n_steps: int = 2_000_000, n_spans: int = 200_000, repeats: int = 5) -> dict[str, float]:
    """Measure the three loops side by side; print and return the figures (ns per iteration)."""
    sess = ett.init(job_id="bench", exporter=_Discard(), install_handlers=False)
    sess.first_batch(step=0)
    provider = TracerProvider()  # the SDK with no processor: a span's own cost, nothing more
    tracer = provider.get_tracer("bench")

    def empty(n: int) -> None:
        for _ in range(n):
            pass

    def steps(n: int) -> None:
        for _ in range(n):
            sess.step(samples=1)

    def spans(n: int) -> None:
        for _ in range(n):
            tracer.start_span("train.step").end()

    try:
        empty_ns = _best_ns_per_call(empty, n_steps, repeats)
        step_ns = _best_ns_per_call(steps, n_steps, repeats)
        span_ns = _best_ns_per_call(spans, n_spans, repeats)
    finally:
        sess.end()
    step_net = max(step_ns - empty_ns, 1e-3)
    span_net = span_ns - empty_ns
    figures = {
        "empty_loop_ns": empty_ns,
        "step_ns": step_ns,
        "step_net_ns": step_net,
        "span_ns": span_ns,
        "span_net_ns": span_net,
        "ratio_gross": span_ns / step_ns,
        "ratio_net": span_net / step_net,
    }
    print(f"python {sys.version.split()[0]}; best of {repeats}")
    print(f"  empty loop          {empty_ns:8.1f} ns/iter")
    print(f"  sess.step()         {step_ns:8.1f} ns/iter  ({step_net:6.1f} ns net)")
    print(f"  SDK span per step   {span_ns:8.1f} ns/iter  ({span_net:6.1f} ns net)")
    print(
        f"  span / step         {figures['ratio_gross']:8.1f}x gross, "
        f"{figures['ratio_net']:.1f}x net"
    )
    ok_step = "ok" if step_ns <= STEP_TARGET_NS else "MISSED"
    ok_ratio = "ok" if figures["ratio_gross"] >= RATIO_TARGET else "MISSED"
    print(f"  target step <= {STEP_TARGET_NS:.0f} ns: {ok_step}")
    print(f"  target span/step >= {RATIO_TARGET:.0f}x: {ok_ratio}")
    return figures


@pytest.mark.performance
def test_bench_step() -> None:
    """Prints the figures (pytest -s); asserts only that they were measured."""
    figures = run(n_steps=1_000_000, n_spans=100_000, repeats=3)
    assert figures["step_ns"] > 0


if __name__ == "__main__":
    run()
