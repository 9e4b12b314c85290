"""Large job benchmark (issue 11): one real large job streamed into ``ett serve`` over OTLP/HTTP
with the collector's RSS sampled throughout, then a full ``ett recompute`` of it, timed and
sized. Measured, not extrapolated. Prints each figure next to its target.

    .venv/bin/python -m tests.performance.bench_large_job [--ranks 64] [--hours 6]
    .venv/bin/python -m tests.performance.bench_large_job --ranks 256 --hours 24   # 2.2M spans
    .venv/bin/python -m pytest -m performance -s tests/performance/bench_large_job.py

The job is ``bench_heartbeats``' (``ranks`` x ``hours`` of 10 s windows, start-up phases, an
async checkpoint every 30 min per rank, a completed end), generated in the order the ranks'
exporters send it (by end time) and encoded batch by batch, so the client never holds the job
in memory. ``ett serve`` runs with its default settings (heartbeats compacted into runs after
600 s) on SQLite in a temporary folder, or on ``--db URL``. Needs only a checkout with the
collector's dependencies (``.venv``, or the wheels installed) and httpx; Linux (``/proc``).

Figures: ingest spans/s and POST p95; the server's RSS, peak and at each tenth of the ingest
(target < 1 GB throughout); the database's bytes per span; then, with the server stopped,
``ett recompute`` of the job as a process (wall, and peak RSS from ``wait4``; targets < 5 s and
< 500 MB), and in this process the recompute itself (load + summarize) without the
interpreter's start.
"""

from __future__ import annotations

import argparse
import os
import queue
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.storage import Store
from tests.performance.bench_freshness import rss_mb, serve
from tests.support.collector_process import stop_process

BASE = 1.79e9
WINDOW_S = 10.0
CKPT_EVERY_S = 1800.0
BATCH = 512
POSTERS = 2
PROTO = {"Content-Type": "application/x-protobuf"}
JOB = "large"


class _Maker:
    """Span records of one job, with span ids unique in it."""

    def __init__(self, ranks: int) -> None:
        self.n = 0
        self.ident: dict[str, Any] = {
            sc.JOB_ID: JOB,
            sc.ATTEMPT: 0,
            sc.MODEL: "dlrm-big",
            sc.TEAM: "ads",
            sc.WORLD_SIZE: ranks,
        }

    def __call__(self, name: str, rank: int, start: float, end: float, **attrs: Any) -> SpanRecord:
        self.n += 1
        return SpanRecord(
            f"{rank + 1:032x}",
            f"{self.n:016x}",
            name,
            start,
            end,
            JOB,
            0,
            rank,
            {**self.ident, sc.RANK: rank, **attrs},
        )


def stream_job(ranks: int, hours: float) -> Iterator[SpanRecord]:
    """The job's spans, by end time to the window (``bench_heartbeats.big_job``'s spans, never
    all held at once)."""
    span = _Maker(ranks)
    first = BASE + 60
    n = int(hours * 3600 / WINDOW_S)
    for rank in range(ranks):
        yield span(sc.startup_span_name("pg_init"), rank, BASE, BASE + 20 + rank % 7)
        yield span(sc.startup_span_name("model_init"), rank, BASE + 27, BASE + 55)
        yield span(sc.SPAN_FIRST_BATCH, rank, first, first)
    pending: list[SpanRecord] = []  # checkpoint spans ending later than the windows so far
    for i in range(n):
        a = first + i * WINDOW_S
        steps = {sc.STEP_FIRST: 50 * i, sc.STEP_LAST: 50 * i + 49, sc.SAMPLES: 50 * 2048}
        for rank in range(ranks):
            yield span(sc.SPAN_TRAIN_WINDOW, rank, a, a + WINDOW_S, **steps)
        k, into = divmod(a + WINDOW_S - first, CKPT_EVERY_S)
        if k >= 1 and into == 0:  # a save starts 0.5 s into the next window
            c = a + WINDOW_S + 0.5
            for rank in range(ranks):
                pending.append(
                    span(
                        sc.SPAN_CHECKPOINT_SAVE,
                        rank,
                        c,
                        c + 2.0,
                        **{sc.CHECKPOINT_STEP: 50 * int(k), sc.CHECKPOINT_MODE: "async"},
                    )
                )
                pending.append(
                    span(
                        sc.SPAN_CHECKPOINT_PERSIST,
                        rank,
                        c + 2.0,
                        c + 30.0,
                        **{sc.CHECKPOINT_STEP: 50 * int(k)},
                    )
                )
        due = [s for s in pending if s.end <= a + WINDOW_S]
        if due:
            pending = [s for s in pending if s.end > a + WINDOW_S]
            yield from due
    yield from pending
    end = first + n * WINDOW_S
    for rank in range(ranks):
        yield span(sc.SPAN_ATTEMPT, rank, BASE, end + 1.0, **{sc.ATTEMPT_END_REASON: "completed"})


_IDENTITY = (sc.JOB_ID, sc.ATTEMPT, sc.RANK, sc.WORLD_SIZE, sc.MODEL, sc.TEAM)


def _value(v: Any) -> Any:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue

    if isinstance(v, bool):
        return AnyValue(bool_value=v)
    if isinstance(v, int):
        return AnyValue(int_value=v)
    if isinstance(v, float):
        return AnyValue(double_value=v)
    return AnyValue(string_value=str(v))


def encode(records: list[SpanRecord]) -> bytes:
    """One OTLP/protobuf export request of ``records``, built with the OTLP message classes
    (the SDK's ``tests.support.replay.encode_request`` costs ~0.2-0.8 ms a span: the client, not
    the collector, would be measured). One resource per rank holds the identity, as the
    library sends it."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span

    by_rank: dict[int, list[SpanRecord]] = {}
    for r in records:
        by_rank.setdefault(r.rank, []).append(r)
    request = ExportTraceServiceRequest()
    for spans in by_rank.values():
        rs: ResourceSpans = request.resource_spans.add()
        ident = spans[0].attributes
        rs.resource.attributes.extend(
            KeyValue(key=k, value=_value(ident[k])) for k in _IDENTITY if k in ident
        )
        scope = rs.scope_spans.add()
        for r in spans:
            span: Span = scope.spans.add()
            span.trace_id = bytes.fromhex(r.trace_id)
            span.span_id = bytes.fromhex(r.span_id)
            span.name = r.name
            span.start_time_unix_nano = round(r.start * 1e9)
            span.end_time_unix_nano = round(r.end * 1e9)
            span.attributes.extend(
                KeyValue(key=k, value=_value(v))
                for k, v in r.attributes.items()
                if k not in _IDENTITY
            )
    return bytes(request.SerializeToString())


def _batches(ranks: int, hours: float) -> Iterator[bytes]:
    batch: list[SpanRecord] = []
    for s in stream_job(ranks, hours):
        batch.append(s)
        if len(batch) == BATCH:
            yield encode(batch)
            batch = []
    if batch:
        yield encode(batch)


def _sqlite_bytes(path: Path) -> int:
    """The SQLite database's size once vacuumed (deleted raw rows' pages returned)."""
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("VACUUM")
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, size = (
            con.execute("PRAGMA page_count").fetchone()[0],
            con.execute("PRAGMA page_size").fetchone()[0],
        )
    finally:
        con.close()
    return int(pages * size)


def _progress(msg: str) -> None:
    sys.stderr.write(f"\r  {msg:<72}")
    sys.stderr.flush()


def ingest(base: str, pid: int, ranks: int, hours: float, total: int) -> dict[str, Any]:
    """Post the job over HTTP while sampling the server's RSS; returns the ingest figures."""
    work: queue.Queue[bytes | None] = queue.Queue(maxsize=4 * POSTERS)
    posts: list[float] = []
    rss: list[float] = []
    failed: list[str] = []
    done = threading.Event()

    def post() -> None:
        with httpx.Client(base_url=base, timeout=300, headers=PROTO) as client:
            while (body := work.get()) is not None:
                t = time.perf_counter()
                r = client.post("/v1/traces", content=body)
                posts.append(time.perf_counter() - t)
                if r.status_code != 200:
                    failed.append(f"{r.status_code} {r.text[:200]}")

    def sample() -> None:
        while not done.wait(0.25):
            rss.append(rss_mb(pid))

    threads = [threading.Thread(target=post, daemon=True) for _ in range(POSTERS)]
    sampler = threading.Thread(target=sample, daemon=True)
    for t in [*threads, sampler]:
        t.start()
    t0 = time.perf_counter()
    for i, body in enumerate(_batches(ranks, hours), 1):
        work.put(body)
        if i % 20 == 0:
            sent = min(total, i * BATCH)
            _progress(
                f"ingest {sent:,}/{total:,} spans, {sent / (time.perf_counter() - t0):,.0f}/s,"
                f" server RSS {rss[-1] if rss else 0:,.0f} MB"
            )
    for _ in threads:
        work.put(None)
    for t in threads:
        t.join()
    ingest_s = time.perf_counter() - t0
    with httpx.Client(base_url=base, timeout=60) as client:
        while client.get("/healthz").json()["dirty_jobs"]:  # the last recompute, still sampled
            _progress(f"waiting for the last recompute; server RSS {rss[-1]:,.0f} MB")
            time.sleep(0.25)
    settle_s = time.perf_counter() - t0 - ingest_s
    done.set()
    sampler.join()
    sys.stderr.write("\n")
    if failed:
        raise RuntimeError(f"{len(failed)} posts failed, first: {failed[0]}")
    tenths = [
        max(rss[len(rss) * k // 10 : max(len(rss) * (k + 1) // 10, 1)], default=None)
        for k in range(10)
    ]  # None: no sample in that tenth (a short run)
    return {
        "spans_per_s": total / ingest_s,
        "ingest_s": ingest_s,
        "settle_s": settle_s,
        "post_p95_s": sorted(posts)[int(0.95 * (len(posts) - 1))],
        "rss_peak_mb": max(rss, default=0.0),
        "rss_tenths_mb": tenths,
    }


def recompute_process(url: str, home: Path, job: str = JOB) -> dict[str, float]:
    """``ett recompute`` as its own process: wall seconds and peak RSS (``wait4``)."""
    cmd = [sys.executable, "-m", "ett_cli", "recompute", "--db", url, job]
    env = {**os.environ, "ETT_HOME": str(home)}
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if proc.returncode != 0 and job == JOB:
        raise RuntimeError(f"ett recompute exited {proc.returncode}: {out}")
    return {"wall_s": wall, "rss_mb": usage.ru_maxrss / 1024}


def run(home: Path, ranks: int, hours: float, url: str | None = None) -> dict[str, Any]:
    url = url or f"sqlite:///{home / 'collector.db'}"
    n_windows = ranks * int(hours * 3600 / WINDOW_S)
    n_ckpt = int(n_windows * WINDOW_S / ranks / CKPT_EVERY_S)
    total = n_windows + ranks * (4 + 2 * n_ckpt)  # stream_job's spans
    print(
        f"\nlarge job benchmark: {ranks} ranks x {hours:g} h = {total:,} spans"
        f" ({n_windows:,} windows) into ett serve ({url.split(':')[0]})"
    )
    proc, base = serve(home, url, {})
    try:
        served = ingest(base, proc.pid, ranks, hours, total)
    finally:
        stop_process(proc)
    size = _sqlite_bytes(Path(url.removeprefix("sqlite:///"))) if "sqlite" in url else 0
    procs = [recompute_process(url, home) for _ in range(3)]
    floor = recompute_process(url, home, "no-such-job")  # the process's start and imports
    store = Store(url)
    walls = []
    for _ in range(3):
        t = time.perf_counter()
        spans = store.load_spans(JOB)
        figures = summarize(spans, max(s.end for s in spans) + 60)
        walls.append(time.perf_counter() - t)
    records = len(spans)
    store.close()
    out = {
        **served,
        "spans": total,
        "bytes_per_span": size / total,
        "recompute_wall_s": statistics.median(p["wall_s"] for p in procs),
        "recompute_rss_mb": max(p["rss_mb"] for p in procs),
        "floor_wall_s": floor["wall_s"],
        "floor_rss_mb": floor["rss_mb"],
        "in_process_s": statistics.median(walls),
        "records": records,
        "ett_pct": figures.ett_pct,
    }
    report(out)
    return out


def report(f: dict[str, Any]) -> None:
    tenths = ", ".join("—" if x is None else f"{x:,.0f}" for x in f["rss_tenths_mb"])
    rows = [
        ("ingest over HTTP", f"{f['spans_per_s']:,.0f} spans/s ({f['ingest_s']:.0f} s)", ""),
        ("POST /v1/traces p95", f"{f['post_p95_s'] * 1e3:,.0f} ms", "< 1 s"),
        ("collector peak RSS during ingest", f"{f['rss_peak_mb']:,.0f} MB", "< 1 GB"),
        ("database bytes per span (SQLite, vacuumed)", f"{f['bytes_per_span']:.0f} B", "<= 100 B"),
        ("ett recompute JOB, whole process", f"{f['recompute_wall_s']:.2f} s", "< 5 s"),
        ("ett recompute peak RSS", f"{f['recompute_rss_mb']:,.0f} MB", "< 500 MB"),
        (
            "  the same command, a job without spans",
            f"{f['floor_wall_s']:.2f} s, {f['floor_rss_mb']:,.0f} MB",
            "(start-up)",
        ),
        ("recompute in-process (load + summarize)", f"{f['in_process_s']:.3f} s", ""),
        ("records fed to the domain", f"{f['records']:,}", ""),
    ]
    for label, value, target in rows:
        print(f"  {label:42} {value:>28}   {target}")
    print(f"  collector RSS, peak in each tenth of the ingest: {tenths} MB")
    print(
        f"  last recompute after the last POST: {f['settle_s']:.1f} s;"
        f" load average {os.getloadavg()[0]:.1f}"
    )


try:
    import pytest
except ImportError:  # the benchmark runs as a script without pytest
    pass
else:

    @pytest.mark.performance
    @pytest.mark.timeout(1800)
    def test_bench_large_job(tmp_path: Path) -> None:
        ranks = int(os.environ.get("ETT_BENCH_RANKS", "16"))
        hours = float(os.environ.get("ETT_BENCH_HOURS", "2"))
        f = run(tmp_path, ranks, hours)
        assert f["records"] < f["spans"] / 10  # the domain is fed runs, not every window


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ranks", type=int, default=64, help="ranks (default 64; issue: 256)")
    parser.add_argument("--hours", type=float, default=6.0, help="hours (default 6; issue: 24)")
    parser.add_argument("--db", default=None, help="database URL (default: SQLite in a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp), args.ranks, args.hours, args.db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
