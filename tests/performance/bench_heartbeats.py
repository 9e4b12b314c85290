"""Compact heartbeats benchmark (issue 11): one large job stored as raw windows vs as runs,
side by side in one run. Prints figures next to the issue's targets; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_heartbeats [--ranks 64] [--hours 6]
    .venv/bin/python -m pytest -m performance -s tests/performance/bench_heartbeats.py

The job: ``ranks`` ranks x ``hours`` of 10 s windows (64 x 6 h = 138,240 windows), start-up
phases, an async checkpoint every 30 min per rank, a completed end; spans interleaved by time
as the ranks' exporters send them, in batches of 512. Measured on SQLite:

- before (``ETT_RAW_WINDOW_RETENTION_S=keep``, the raw path: every window stored and fed to the
  domain) vs after (600 s retention: windows folded into runs, the domain fed runs): bytes per
  ingested span, in-process ingest spans/s, recompute time (load + summarize, median of 3) and
  its peak Python memory (tracemalloc), and the figures of both, which must be equal;
- extrapolated to the issue's 2.2M-span job (256 ranks x 24 h): the raw path per span, the
  runs path per record it loads (runs + retained windows + other spans);
- a real ``ett serve`` (runs path) fed the job over HTTP while a reader polls
  ``GET /api/v1/jobs/{id}``: ingest spans/s, POST latency p95 and the GET p50/p95.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from ett_collector.storage import Store
from tests.support.collector_process import start_collector
from tests.support.replay import encode_request
from tests.support.spans import attempt_end, first_batch, persist, phase, save, window

BASE = 1.79e9
WINDOW_S = 10.0
CKPT_EVERY_S = 1800.0
BATCH = 512
ISSUE_SPANS = 2_200_000
ISSUE_RANKS, ISSUE_HOURS = 256, 24
PROTO = {"Content-Type": "application/x-protobuf"}


def big_job(job: str, ranks: int, hours: float) -> list[SpanRecord]:
    """The job's spans in the order the ranks send them (by end time)."""
    out: list[SpanRecord] = []
    ident: dict[str, Any] = {sc.MODEL: "dlrm-big", sc.TEAM: "ads", sc.WORLD_SIZE: ranks}
    first = BASE + 60
    n = int(hours * 3600 / WINDOW_S)
    for rank in range(ranks):
        kw: dict[str, Any] = {"job": job, "rank": rank, "trace_id": f"{rank + 1:032x}", **ident}
        out.append(phase("pg_init", BASE, BASE + 20 + rank % 7, **kw))
        out.append(phase("model_init", BASE + 27, BASE + 55, **kw))
        out.append(first_batch(first, **kw))
        for i in range(n):
            a = first + i * WINDOW_S
            steps = {sc.STEP_FIRST: 50 * i, sc.STEP_LAST: 50 * i + 49, sc.SAMPLES: 50 * 2048}
            out.append(window(a, a + WINDOW_S, **kw, **steps))
        for k in range(1, int(n * WINDOW_S / CKPT_EVERY_S) + 1):
            a = first + k * CKPT_EVERY_S + 0.5
            out.append(save(50 * k, a, a + 2.0, mode="async", **kw))
            out.append(persist(50 * k, a + 2.0, a + 30.0, **kw))
        end = first + n * WINDOW_S
        out.append(attempt_end(BASE, end + 1.0, "completed", **kw))
    out.sort(key=lambda s: (s.end, s.rank))
    return out


def _sqlite_bytes(path: Path) -> int:
    """The database's size once compacted (the free pages of deleted raw rows returned)."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("VACUUM")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages = con.execute("PRAGMA page_count").fetchone()[0]
        size = con.execute("PRAGMA page_size").fetchone()[0]
    finally:
        con.close()
    return int(pages * size)


def _recompute(store: Store, job: str, raw: bool, now: float) -> dict[str, Any]:
    return dict(job_json(summarize(store.load_spans(job, raw=raw), now)))


def _timed(fn: Callable[[], Any], repeat: int = 3) -> tuple[float, float, Any]:
    """Median wall and CPU seconds of ``fn`` over ``repeat`` calls, and its last answer."""
    walls, cpus, out = [], [], None
    for _ in range(repeat):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - t)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), out


def _peak_mb(fn: Callable[[], Any]) -> float:
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def store_side(tmp: Path, spans: list[SpanRecord], retention: float | None) -> dict[str, Any]:
    """Ingest in-process, size the database, time and size a recompute."""
    path = tmp / f"bench-{retention}.db"
    store = Store(f"sqlite:///{path}", raw_window_retention_s=retention)
    store.upgrade()
    empty = _sqlite_bytes(path)
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, len(spans), BATCH):
        store.ingest(spans[i : i + BATCH])
    ingest_s, ingest_cpu_s = time.perf_counter() - t, time.process_time() - c
    size = _sqlite_bytes(path) - empty
    raw = retention is None
    now = max(s.end for s in spans) + 60
    loaded = store.load_spans("big", raw=raw)
    recompute_s, recompute_cpu_s, figures = _timed(lambda: _recompute(store, "big", raw, now))
    peak = _peak_mb(lambda: _recompute(store, "big", raw, now))
    with store.engine.connect() as conn:
        runs = conn.exec_driver_sql("SELECT count(*) FROM window_runs").scalar_one()
        raw_windows = conn.exec_driver_sql(
            f"SELECT count(*) FROM spans WHERE name = '{sc.SPAN_TRAIN_WINDOW}'"
        ).scalar_one()
    store.close()
    return {
        "spans_per_s": len(spans) / ingest_s,
        "ingest_cpu_us": 1e6 * ingest_cpu_s / len(spans),
        "recompute_cpu_s": recompute_cpu_s,
        "bytes_per_span": size / len(spans),
        "db_mb": size / 1e6,
        "recompute_s": recompute_s,
        "peak_mb": peak,
        "records": len(loaded),
        "runs": runs,
        "raw_windows": raw_windows,
        "figures": figures,
    }


def served_side(tmp: Path, bodies: list[bytes], retention: str) -> dict[str, float]:
    """``ett serve`` with ``ETT_RAW_WINDOW_RETENTION_S=retention`` fed the job over HTTP while
    a reader polls ``GET /api/v1/jobs/big``."""
    old = os.environ.get("ETT_RAW_WINDOW_RETENTION_S")
    os.environ["ETT_RAW_WINDOW_RETENTION_S"] = retention
    try:
        collector = start_collector(tmp / f"served-{retention}")
    finally:
        if old is None:
            os.environ.pop("ETT_RAW_WINDOW_RETENTION_S", None)
        else:
            os.environ["ETT_RAW_WINDOW_RETENTION_S"] = old
    posts: list[float] = []
    gets: list[float] = []
    statuses: dict[int, int] = {}
    done = threading.Event()

    def read() -> None:
        with httpx.Client(base_url=collector.url, timeout=120) as client:
            while not done.is_set():
                t = time.perf_counter()
                status = client.get("/api/v1/jobs/big").status_code
                gets.append(time.perf_counter() - t)
                statuses[status] = statuses.get(status, 0) + 1
                done.wait(0.05)

    try:
        reader = threading.Thread(target=read, daemon=True)
        with httpx.Client(base_url=collector.url, timeout=120, headers=PROTO) as client:
            client.post("/v1/traces", content=bodies[0]).raise_for_status()
            reader.start()
            t0 = time.perf_counter()
            for body in bodies[1:]:
                t = time.perf_counter()
                client.post("/v1/traces", content=body).raise_for_status()
                posts.append(time.perf_counter() - t)
            ingest_s = time.perf_counter() - t0
        done.set()
        reader.join(timeout=120)
    finally:
        done.set()
        collector.stop()

    def q(xs: list[float], p: float) -> float:
        xs = sorted(xs) or [float("nan")]
        return xs[min(len(xs) - 1, int(p * len(xs)))]

    return {
        "spans_per_s": (len(bodies) - 1) * BATCH / ingest_s,
        "post_p95_s": q(posts, 0.95),
        "get_p50_s": q(gets, 0.5),
        "get_p95_s": q(gets, 0.95),
        "gets": float(len(gets)),
        "get_200": float(statuses.get(200, 0)),
    }


def run(tmp: Path, ranks: int, hours: float, served: bool = True) -> dict[str, Any]:
    spans = big_job("big", ranks, hours)
    n = len(spans)
    windows = sum(s.name == sc.SPAN_TRAIN_WINDOW for s in spans)
    print(f"\nheartbeat benchmark: {ranks} ranks x {hours:g} h, {n:,} spans ({windows:,} windows)")
    before = store_side(tmp, spans, None)
    after = store_side(tmp, spans, 600.0)
    same = before.pop("figures") == after.pop("figures")
    rows = [
        ("bytes per ingested span", "bytes_per_span", "{:.0f} B", "<= 100 B"),
        ("database size", "db_mb", "{:.1f} MB", ""),
        ("ingest in-process", "spans_per_s", "{:,.0f} spans/s", ""),
        ("ingest CPU per span", "ingest_cpu_us", "{:.1f} us", ""),
        ("records fed to the domain", "records", "{:,}", ""),
        ("recompute (load + summarize) wall", "recompute_s", "{:.3f} s", ""),
        ("recompute CPU", "recompute_cpu_s", "{:.3f} s", ""),
        ("recompute peak Python memory", "peak_mb", "{:.0f} MB", ""),
        ("runs / raw windows stored", None, "", ""),
    ]
    print(f"{'':34} {'before (raw)':>18} {'after (runs)':>18}   target")
    for label, key, fmt, target in rows:
        if key is None:
            b = f"{before['runs']:,} / {before['raw_windows']:,}"
            a = f"{after['runs']:,} / {after['raw_windows']:,}"
        else:
            b, a = fmt.format(before[key]), fmt.format(after[key])
        print(f"{label:34} {b:>18} {a:>18}   {target}")
    print(f"figures from raw windows and from runs identical: {same}")

    # extrapolation to the issue's job. The raw path costs per span it loads, so its time and
    # memory scale with the spans. The runs path loads one run per rank, the retained 600 s of
    # raw windows per rank and the other spans; each costs what a span costs on the raw path
    # (the same decoding and domain work), so its figures are the raw path's per span times
    # those records.
    scale = ISSUE_SPANS / n
    other = n - windows
    issue_records = (
        ISSUE_RANKS * (1 + 600 / WINDOW_S) + other * ISSUE_RANKS / ranks * ISSUE_HOURS / hours
    )
    per_span_s = before["recompute_cpu_s"] / n
    per_span_kb = before["peak_mb"] * 1e3 / n
    ext = {
        "before_s": per_span_s * ISSUE_SPANS,
        "before_mb": per_span_kb * ISSUE_SPANS / 1e3,
        "after_s": per_span_s * issue_records,
        "after_mb": per_span_kb * issue_records / 1e3,
    }
    print(
        f"extrapolated to {ISSUE_SPANS:,} spans ({ISSUE_RANKS} ranks x {ISSUE_HOURS} h) at the raw"
        f" path's {per_span_s * 1e6:.1f} us of CPU and {per_span_kb:.2f} KB per span loaded:"
        f" raw path x {scale:.1f} = {ext['before_s']:.1f} s, {ext['before_mb']:,.0f} MB;"
        f" runs path {issue_records:,.0f} records = {ext['after_s']:.2f} s (target < 5 s),"
        f" {ext['after_mb']:.0f} MB (target < 500 MB)"
    )
    out: dict[str, Any] = {"before": before, "after": after, "same": same, "extrapolated": ext}
    if served:
        bodies = [encode_request(spans[i : i + BATCH]) for i in range(0, len(spans), BATCH)]
        for label, retention in (("raw", "keep"), ("runs", "600")):
            http = served_side(tmp, bodies, retention)
            print(
                f"ett serve ({label}) fed over HTTP: {http['spans_per_s']:,.0f} spans/s;"
                f" POST p95 {http['post_p95_s'] * 1e3:.0f} ms (target < 1 s);"
                f" GET /api/v1/jobs/big during ingest p50 {http['get_p50_s'] * 1e3:.0f} ms,"
                f" p95 {http['get_p95_s'] * 1e3:.0f} ms (target < 100 ms;"
                f" {http['gets']:.0f} reads, {http['get_200']:.0f} answered 200)"
            )
            out[f"served_{label}"] = http
    return out


def compare_compaction(spans: list[SpanRecord], old_module: Path, repeat: int = 4) -> None:
    """In-process ingest CPU per span, interleaved ``repeat`` times in one run: raw windows,
    the compaction of ``old_module`` (an older ``collector/storage/_compaction.py``, e.g. from
    ``git show REV:collector/storage/_compaction.py``) and today's, each into a fresh SQLite."""
    spec = importlib.util.spec_from_file_location("_old_compaction", old_module)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {old_module}")
    old = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = old
    spec.loader.exec_module(old)
    cpu: dict[str, list[float]] = {"raw": [], "before": [], "after": []}
    for _ in range(repeat):
        for name in cpu:
            with tempfile.TemporaryDirectory() as tmp:
                retention = None if name == "raw" else 600.0
                store = Store(f"sqlite:///{Path(tmp) / 'c.db'}", retention)
                store.upgrade()
                if name == "before":
                    store.compactor = old.Compactor(store.engine, store._sql.ph, 600.0)
                c = time.process_time()
                for i in range(0, len(spans), BATCH):
                    store.ingest(spans[i : i + BATCH])
                cpu[name].append(1e6 * (time.process_time() - c) / len(spans))
                store.close()
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print(f"ingest CPU per span, in-process, median of {repeat} interleaved runs:")
    for k, v in cpu.items():
        extra = "" if k == "raw" else f" (compaction +{med[k] - med['raw']:.1f} us)"
        print(f"  {k:7} {med[k]:5.1f} us{extra}   runs: {', '.join(f'{x:.1f}' for x in v)}")


@pytest.mark.performance
@pytest.mark.timeout(1800)  # minutes on a busy 2-core machine: the HTTP part is the long one
def test_bench_heartbeats(tmp_path: Path) -> None:
    ranks = int(os.environ.get("ETT_BENCH_RANKS", "64"))
    hours = float(os.environ.get("ETT_BENCH_HOURS", "6"))
    figures = run(tmp_path, ranks, hours)
    assert figures["same"]
    assert figures["after"]["bytes_per_span"] < figures["before"]["bytes_per_span"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--no-serve", action="store_true", help="skip the HTTP part")
    parser.add_argument(
        "--compare-compaction",
        metavar="OLD_COMPACTION_PY",
        type=Path,
        help="only compare in-process ingest CPU: raw windows, this older _compaction.py"
        " and today's, interleaved in one run",
    )
    args = parser.parse_args()
    if args.compare_compaction is not None:
        compare_compaction(big_job("big", args.ranks, args.hours), args.compare_compaction)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp), args.ranks, args.hours, served=not args.no_serve)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
