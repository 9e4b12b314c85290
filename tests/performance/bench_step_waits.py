"""Benchmark (issue 26): what timing each step's collective wait costs, beside an SDK span.

Run it as a script (``python -m tests.performance.bench_step_waits``) or with pytest
(``pytest tests/performance/bench_step_waits.py -m performance -s``). It prints figures; it
does not fail on a slow machine. Printed side by side, in one run:

1. ``sess.step()`` today (no wait timed), ``sess.step()`` in a session whose waits are timed
   (``time_ddp_waits``: the step itself is unchanged, the window reads one more counter) and one
   SDK span per step (targets: step <= 1 us, span >= 20x a step);
2. one DDP training step (one gloo rank, 8 linear layers in buckets of 0.5 MB) with DDP's
   built-in all-reduce, with torch's Python ``allreduce_hook`` and with the timing hook around
   it: the timing's own cost per step is the last less the second;
3. ingest and compaction CPU per window, and ``window_series`` bytes per folded window
   (SQLite): without the series (compaction writing no series row), with it, and with
   ``ett.window.wait_s`` on the windows too (target <= 100 B per span).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import ett
from ett import semconv as sc
from ett import torch_hooks
from ett_collector.storage import Store
from tests.performance.bench_step import _best_ns_per_call, _Discard
from tests.support.spans import window


def _step_figures(n_steps: int, n_spans: int, repeats: int) -> dict[str, float]:
    sess = ett.init(job_id="bench", exporter=_Discard(), install_handlers=False)
    sess.first_batch(step=0)
    tracer = TracerProvider().get_tracer("bench")

    def steps(n: int) -> None:
        for _ in range(n):
            sess.step(samples=1)

    def spans(n: int) -> None:
        for _ in range(n):
            tracer.start_span("train.step").end()

    try:
        plain = _best_ns_per_call(steps, n_steps, repeats)
        torch_hooks.wait_sink(sess)(1000)  # the session now reports waits on its windows
        timed = _best_ns_per_call(steps, n_steps, repeats)
        span = _best_ns_per_call(spans, n_spans, repeats)
    finally:
        sess.end()
    return {"step_ns": plain, "step_timed_ns": timed, "span_ns": span}


def _ddp_figures(n: int, repeats: int) -> dict[str, float]:
    """Best-of microseconds per DDP step: built-in reduction, torch's Python
    ``allreduce_hook``, and that hook timed; the three loops take turns in each repeat (this
    machine's load moves all three alike)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    tmp = tempfile.mkdtemp()
    dist.init_process_group("gloo", store=dist.FileStore(f"{tmp}/s", 1), rank=0, world_size=1)
    sess = ett.init(job_id="bench-ddp", exporter=_Discard(), install_handlers=False)
    x = torch.randn(32, 256)

    def model(kind: str) -> Callable[[int], None]:
        torch.manual_seed(0)
        net = torch.nn.Sequential(*[torch.nn.Linear(256, 256) for _ in range(8)])
        ddp = torch.nn.parallel.DistributedDataParallel(net, bucket_cap_mb=0.5)
        if kind == "python":
            ddp.register_comm_hook(None, allreduce_hook)
        elif kind == "timed":
            assert torch_hooks.time_ddp_waits(ddp, session=sess)

        def loop(k: int) -> None:
            for _ in range(k):
                ddp(x).sum().backward()

        loop(3)  # warm-up: DDP rebuilds its buckets after the first step
        return loop

    kinds = ("builtin", "python", "timed")
    try:
        loops = {k: model(k) for k in kinds}
        best = dict.fromkeys(kinds, float("inf"))
        for _ in range(repeats * 2):
            for k in kinds:
                best[k] = min(best[k], _best_ns_per_call(loops[k], n, 1))
    finally:
        sess.end()
        dist.destroy_process_group()
    return {f"ddp_{k}_us": v / 1e3 for k, v in best.items()}


def _windows(ranks: int, n: int, waits: bool) -> list[object]:
    out = []
    t0 = 1_700_000_040.0
    for rank in range(ranks):
        for i in range(n):
            attrs: dict[str, object] = {sc.STEP_FIRST: 100 * i, sc.STEP_LAST: 100 * i + 99}
            attrs[sc.SAMPLES] = 3200
            if waits:
                attrs[sc.WINDOW_WAIT_S] = 1.0 + 0.001 * ((i * 7 + rank) % 13)
            out.append(window(t0 + 10 * i, t0 + 10 * i + 10, rank=rank, job="b", **attrs))
    return out


def _series_figures(ranks: int, n: int, waits: bool, series: bool = True) -> dict[str, float]:
    """Ingest and compaction CPU per window and ``window_series`` bytes per window; without
    ``series``, compaction writes no series row (``series_rows`` a no-op for the run: the
    series' own cost is the difference)."""
    from ett_collector.storage import _compaction

    keep = _compaction.series_rows
    if not series:
        _compaction.series_rows = lambda job_id, windows: []  # type: ignore[assignment]
    try:
        return _measure_series(ranks, n, waits)
    finally:
        _compaction.series_rows = keep


def _measure_series(ranks: int, n: int, waits: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp)}/b.db", raw_window_retention_s=0.0)
        store.upgrade()
        spans = _windows(ranks, n, waits)
        cpu = time.process_time()
        for i in range(0, len(spans), 500):
            store.ingest(spans[i : i + 500])  # type: ignore[arg-type]
        store.compactor.compact("b", cutoff=1e12)
        cpu = time.process_time() - cpu
        with store.engine.connect() as conn:
            used = conn.exec_driver_sql(
                "SELECT SUM(pgsize) FROM dbstat WHERE name IN ('window_series')"
            ).scalar()
        store.close()
    return {
        "cpu_us_per_window": cpu / len(spans) * 1e6,
        "series_b_per_window": (used or 0) / len(spans),
    }


def run(n_steps: int = 1_000_000, n_spans: int = 100_000, repeats: int = 5) -> dict[str, float]:
    """Measure and print every figure side by side."""
    f = _step_figures(n_steps, n_spans, repeats)
    print(f"python {sys.version.split()[0]}; best of {repeats}; cpus {os.cpu_count()}")
    print(f"  sess.step() today            {f['step_ns']:8.1f} ns")
    print(f"  sess.step(), waits timed     {f['step_timed_ns']:8.1f} ns")
    print(
        f"  SDK span per step            {f['span_ns']:8.1f} ns  "
        f"({f['span_ns'] / f['step_timed_ns']:.1f}x the timed step)"
    )
    try:
        f.update(_ddp_figures(50, repeats))
        hook = f["ddp_timed_us"] - f["ddp_python_us"]
        print(f"  DDP step, built-in reduce    {f['ddp_builtin_us']:8.1f} us")
        print(f"  DDP step, allreduce_hook     {f['ddp_python_us']:8.1f} us")
        print(f"  DDP step, timed hook         {f['ddp_timed_us']:8.1f} us  ({hook:+.1f} us)")
    except ImportError:
        print("  DDP step: torch is not installed")
    cases = (("no series     ", False, False), ("without wait_s", False, True))
    for label, waits, series in (*cases, ("with wait_s   ", True, True)):
        s = _series_figures(ranks=8, n=2000, waits=waits, series=series)
        f[f"series_b_{int(waits)}_{int(series)}"] = s["series_b_per_window"]
        f[f"ingest_us_{int(waits)}_{int(series)}"] = s["cpu_us_per_window"]
        print(
            f"  ingest+compact {label} {s['cpu_us_per_window']:8.1f} us CPU/window, "
            f"series {s['series_b_per_window']:5.1f} B/window"
        )
    return f


@pytest.mark.performance
def test_bench_step_waits() -> None:
    """Prints the figures (pytest -s); asserts only that they were measured."""
    figures = run(n_steps=300_000, n_spans=30_000, repeats=3)
    assert figures["step_timed_ns"] > 0


if __name__ == "__main__":
    run()
