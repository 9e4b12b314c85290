"""Benchmark: the spool's cost to training, spool off beside on, in one run (issue 28).

Run it as a script (``python -m tests.performance.bench_spool``) or with pytest
(``pytest tests/performance/bench_spool.py -m performance -s``). It prints figures; it does not
fail on a slow machine. Three sessions in turn, each exporting over OTLP/HTTP with windows every
5 ms (so that the export thread is busy meanwhile): to a real `ett serve` (collector up: the
spool unused), to a port where nothing listens with the spool off (the batches wait in memory,
the export thread mostly sleeps), and there with the spool on (the worst case for the spool:
everything goes to disk). Figures, each the best of several repeats:

- ``step()``: ns per call on the training thread;
- window emit: µs per ``ett.train.window`` span on the window thread (start, end, queue append,
  and any wait for the GIL while the export thread encodes);
- the export thread's cost to put a batch of 512 window spans on disk (encoding plus the write),
  and bytes per span.

Target: ``step()`` the same in the three; the window emit with the spool on no dearer than with
the collector up (both have the export thread encode every span; with the spool off and the
collector away it encodes nothing, which is why that column is cheaper).
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import ett
from ett._backlog import Backlog
from tests.support.collector_process import start_collector
from tests.support.ports import free_port

WINDOW_S = 0.005


def _best(loop: Callable[[int], None], n: int, repeats: int) -> float:
    """Best seconds per iteration of ``loop(n)`` over ``repeats`` runs."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        loop(n)
        best = min(best, (time.perf_counter() - start) / n)
    return best


def _measure(
    spool: str, endpoint: str, n_steps: int, n_windows: int, repeats: int
) -> dict[str, float]:
    os.environ["ETT_SPOOL_DIR"] = spool
    sess = ett.init(
        job_id="bench-spool",
        endpoint=endpoint,
        window_s=WINDOW_S,
        install_handlers=False,
        flush_timeout_s=0.5,
        max_queue_size=1_000_000,
    )  # no drop in either: the same path
    sess.first_batch(step=0)

    def steps(n: int) -> None:
        for _ in range(n):
            sess.step(samples=1)

    def windows(n: int) -> None:
        now = time.time_ns()
        for i in range(n):
            sess._emit_window(now + i, now + i + 1, i, i, 1)  # what the window thread does

    try:
        time.sleep(1.5)  # the first export fails: from then on the queue goes to the spool
        step_s = _best(steps, n_steps, repeats)
        window_s = _best(windows, n_windows, repeats)
        time.sleep(1.2)  # an export turn writes what the windows queued
    finally:
        sess.end()
    return {"step_ns": step_s * 1e9, "window_us": window_s * 1e6}


def _store_cost(root: Path, repeats: int) -> tuple[float, float]:
    """(ms per batch of 512 window spans written to the spool, bytes per span)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ett import semconv
    from ett._config import resolve_identity
    from ett._export import is_priority
    from ett._spool import SpoolWriter
    from ett._spool_send import Sender

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    attrs = {semconv.STEP_FIRST: 1, semconv.STEP_LAST: 100, semconv.SAMPLES: 6400}
    for _ in range(512):
        tracer.start_span(semconv.SPAN_TRAIN_WINDOW, attributes=attrs).end()
    batch = list(memory.get_finished_spans())
    writer = SpoolWriter(root, resolve_identity(job_id="bench-store"))
    backlog = Backlog(writer, Sender("http://127.0.0.1:9/v1/traces", {}), 1 << 30, is_priority)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        backlog.store(batch)
        best = min(best, time.perf_counter() - start)
    size = writer.size / (repeats * len(batch))
    writer.sent = writer.size  # delivered, as far as this benchmark goes: the file is removed
    writer.close()
    return best * 1e3, size


def run(n_steps: int = 1_000_000, n_windows: int = 2_000, repeats: int = 7) -> dict[str, float]:
    """Measure with the spool off, then on; print and return the figures."""
    saved = os.environ.get("ETT_SPOOL_DIR")
    for name in ("opentelemetry", "ett_instrument"):  # each failed export says so: not figures
        logging.getLogger(name).setLevel(logging.CRITICAL)
    away = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with tempfile.TemporaryDirectory(prefix="ett-bench-spool-") as tmp:
        collector = start_collector(Path(tmp) / "home")
        try:
            up = _measure(str(Path(tmp) / "up"), collector.url, n_steps, n_windows, repeats)
            off = _measure("off", away, n_steps, n_windows, repeats)
            on = _measure(str(Path(tmp) / "spool"), away, n_steps, n_windows, repeats)
            spooled = sum(p.stat().st_size for p in Path(tmp).glob("spool/*/*.spool"))
            store_ms, span_bytes = _store_cost(Path(tmp) / "store", repeats)
        finally:
            collector.stop()
            if saved is None:
                os.environ.pop("ETT_SPOOL_DIR", None)
            else:
                os.environ["ETT_SPOOL_DIR"] = saved
    figures = {
        "step_ns_up": up["step_ns"],
        "window_us_up": up["window_us"],
        "step_ns_off": off["step_ns"],
        "step_ns_on": on["step_ns"],
        "window_us_off": off["window_us"],
        "window_us_on": on["window_us"],
        "store_ms_per_512": store_ms,
        "bytes_per_span": span_bytes,
        "spooled_bytes": float(spooled),
    }
    print(f"python {sys.version.split()[0]}; best of {repeats}")
    print("                           collector up | away, spool off | away, spool on")
    print(
        f"  sess.step() (ns)         {up['step_ns']:12.1f} | {off['step_ns']:15.1f} | "
        f"{on['step_ns']:14.1f}"
    )
    print(
        f"  window emit (µs)         {up['window_us']:12.2f} | {off['window_us']:15.2f} | "
        f"{on['window_us']:14.2f}"
    )
    print(f"  export thread, 512 window spans to disk: {store_ms:.2f} ms ({span_bytes:.0f} B/span)")
    print(f"  spooled by the 'on' session: {spooled} bytes (0 with the spool off)")
    return figures


@pytest.mark.performance
def test_bench_spool() -> None:
    """Prints the figures (pytest -s); asserts only that they were measured."""
    figures = run(n_steps=500_000, n_windows=2_000, repeats=3)
    assert figures["step_ns_on"] > 0 and figures["spooled_bytes"] > 0


if __name__ == "__main__":
    run()
