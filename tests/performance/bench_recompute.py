"""Recompute concurrency benchmark: reads of one job while a big job streams in (issue 11).

A real ``ett serve``; a big job's spans are POSTed in batches while small jobs get a new span now
and then (each makes its job dirty), and K reader threads GET one job at a time: most a random
small job, some the big one. Prints p50/p95/max of both kinds of read, of the big job's POSTs,
and how many recomputes the collector ran. Then an idle collector holding presumed-dead jobs:
recomputes per second and CPU. Prints figures; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_recompute [--spans N] [--readers K]
        [--postgres-url URL]

Targets (issue 11): GET of any job p95 < 100 ms during the big job's ingest with K = 50 readers;
a small job's read never waits behind the big job's recompute; ingest p95 < 1 s; idle CPU with
presumed-dead jobs near zero.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from collector.domain import SpanRecord
from collector.domain.examples import worked_example
from collector.replay import encode_request
from instrument import semconv as sc
from tests.support.collector_process import start_collector
from tests.support.spans import span

PROTO = {"Content-Type": "application/x-protobuf"}
BASE = 1.79e9
SMALL_JOBS = 20


def _big_job(n: int, ranks: int = 8) -> list[SpanRecord]:
    """A long job of ``n`` spans over ``ranks`` ranks, in the order a live job sends them."""
    out: list[SpanRecord] = []
    per_rank = n // ranks
    for rank in range(ranks):

        def add(name: str, a: float, b: float, rank: int = rank, **attrs: Any) -> None:
            out.append(span(name, BASE + a, BASE + b, 0, rank, "big", span_id=len(out) + 1,
                            trace_id=f"{rank:032x}", **{sc.MODEL: "bench"}, **attrs))  # fmt: skip

        add(sc.startup_span_name("pg_init"), 0, 5)
        add(sc.SPAN_FIRST_BATCH, 29, 30)
        for i in range(per_rank - 2):
            t = 30.0 + i
            if i % 100 == 99:
                add(sc.SPAN_CHECKPOINT_SAVE, t, t + 0.5,
                    **{sc.CHECKPOINT_STEP: i, sc.CHECKPOINT_MODE: "sync"})  # fmt: skip
            else:
                steps = {sc.STEP_FIRST: i * 10, sc.STEP_LAST: i * 10 + 9, sc.SAMPLES: 640}
                add(sc.SPAN_TRAIN_WINDOW, t, t + 1, **steps)
    out.sort(key=lambda s: s.start)
    return out


def _stats(ms: list[float]) -> str:
    if len(ms) < 2:
        return f"n={len(ms)}"
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return f"n={len(ms):5d} p50 {q[49]:8.1f} ms  p95 {q[94]:8.1f} ms  max {max(ms):8.1f} ms"


def _recomputes(client: httpx.Client, url: str) -> float:
    text = client.get(url + "/metrics").text
    m = re.search(r"^ett_recompute_duration_seconds_count (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def run(home: Path, db_url: str | None, spans: int, readers: int, batch: int = 2000) -> dict:
    """One run against a fresh collector; returns the latencies (ms) and counts."""
    c = start_collector(home, db_url=db_url)
    big_reads: list[float] = []
    small_reads: list[float] = []
    posts: list[float] = []
    done = threading.Event()
    try:
        with httpx.Client(timeout=300) as client:
            for i in range(SMALL_JOBS):
                body = encode_request(worked_example(f"small-{i}", base=BASE + 600 * i))
                assert client.post(c.url + "/v1/traces", content=body, headers=PROTO).is_success
            c.wait_computed()
            before = _recomputes(client, c.url)
        big = _big_job(spans)
        bodies = [encode_request(big[i : i + batch]) for i in range(0, len(big), batch)]

        def ingest() -> None:
            with httpx.Client(timeout=300) as client:
                for body in bodies:
                    t0 = time.perf_counter()
                    r = client.post(c.url + "/v1/traces", content=body, headers=PROTO)
                    posts.append((time.perf_counter() - t0) * 1000)
                    assert r.status_code == 200, r.text
            done.set()

        def touch() -> None:  # a new span for a small job now and then: that job goes dirty
            with httpx.Client(timeout=300) as client:
                k = 0
                while not done.is_set():
                    job = f"small-{k % SMALL_JOBS}"
                    t = BASE + 600 * (k % SMALL_JOBS) + 500 + k
                    extra = [span(sc.SPAN_TRAIN_WINDOW, t, t + 1, 1, 0, job, span_id=10**6 + k)]
                    client.post(c.url + "/v1/traces", content=encode_request(extra), headers=PROTO)
                    k += 1
                    done.wait(0.1)

        def read(i: int) -> None:
            own = random.Random(i)
            with httpx.Client(timeout=300) as client:
                while not done.is_set():
                    is_big = i % 5 == 0  # a fifth of the readers read the big job
                    job = "big" if is_big else f"small-{own.randrange(SMALL_JOBS)}"
                    t0 = time.perf_counter()
                    r = client.get(f"{c.url}/api/v1/jobs/{job}")
                    ms = (time.perf_counter() - t0) * 1000
                    if r.status_code in (200, 503):  # 503: the big job not computed yet
                        (big_reads if is_big else small_reads).append(ms)

        threads = [threading.Thread(target=ingest), threading.Thread(target=touch)]
        threads += [threading.Thread(target=read, args=(i,)) for i in range(readers)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        with httpx.Client(timeout=300) as client:
            recomputes = _recomputes(client, c.url) - before
    finally:
        c.stop()
    return {
        "small": small_reads,
        "big": big_reads,
        "posts": posts,
        "recomputes": recomputes,
        "seconds": elapsed,
    }


def _dead_job(job: str, base: float) -> list[SpanRecord]:
    """A job that trained a while and went silent without an end: presumed dead from then on."""
    out = [span(sc.startup_span_name("pg_init"), base, base + 5, 0, 0, job),
           span(sc.SPAN_FIRST_BATCH, base + 9, base + 10, 0, 0, job)]  # fmt: skip
    steps = {sc.STEP_FIRST: 0, sc.STEP_LAST: 9, sc.SAMPLES: 640}
    out += [span(sc.SPAN_TRAIN_WINDOW, base + t, base + t + 10, 0, 0, job, **steps)
            for t in range(10, 200, 10)]  # fmt: skip
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_dead_jobs(home: Path, db_url: str | None, jobs: int, seconds: float) -> dict:
    """Recomputes and CPU of an idle collector holding ``jobs`` presumed-dead jobs (live
    refresh every second, as ``start_collector`` sets it)."""
    c = start_collector(home, db_url=db_url)
    try:
        with httpx.Client(timeout=300) as client:
            spans = [s for i in range(jobs) for s in _dead_job(f"dead-{i}", BASE + 300 * i)]
            for i in range(0, len(spans), 2000):
                body = encode_request(spans[i : i + 2000])
                assert client.post(c.url + "/v1/traces", content=body, headers=PROTO).is_success
            c.wait_computed()
            time.sleep(3)  # the first live refresh after the backlog
            r0, cpu0 = _recomputes(client, c.url), _cpu_s(c.process.pid)
            time.sleep(seconds)
            r1, cpu1 = _recomputes(client, c.url), _cpu_s(c.process.pid)
    finally:
        c.stop()
    return {"recomputes_per_s": (r1 - r0) / seconds, "cpu_pct": 100 * (cpu1 - cpu0) / seconds}


def report_idle(label: str, r: dict, jobs: int) -> None:
    print(f"\n{label}: idle collector with {jobs} presumed-dead jobs: "
          f"{r['recomputes_per_s']:.1f} recomputes/s, {r['cpu_pct']:.1f} % of a core")  # fmt: skip
    print("  target: near zero")


def report(label: str, r: dict, spans: int, readers: int) -> None:
    print(f"\n{label}: {spans:,} spans of one job ingested in {r['seconds']:.1f} s "
          f"with {readers} readers; {r['recomputes']:.0f} recomputes")  # fmt: skip
    print(f"  GET small job (dirty now and then) {_stats(r['small'])}")
    print(f"  GET the big job                    {_stats(r['big'])}")
    print(f"  POST of the big job ({len(r['posts'])} x 2000)   {_stats(r['posts'])}")
    print("  targets: GET p95 < 100 ms (K = 50 readers), ingest p95 < 1 s")


@pytest.mark.performance
def test_bench_recompute_sqlite(tmp_path: Path) -> None:
    report("SQLite", run(tmp_path / "home", None, 60_000, 20), 60_000, 20)
    report_idle("SQLite", idle_dead_jobs(tmp_path / "idle", None, 300, 10), 300)


@pytest.mark.performance
@pytest.mark.postgres
def test_bench_recompute_postgres(tmp_path: Path, fresh_postgres_url: str) -> None:
    report("PostgreSQL", run(tmp_path / "home", fresh_postgres_url, 60_000, 20), 60_000, 20)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spans", type=int, default=120_000)
    p.add_argument("--readers", type=int, default=50)
    p.add_argument("--dead-jobs", type=int, default=300)
    p.add_argument("--postgres-url")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = run(Path(tmp) / "home", args.postgres_url, args.spans, args.readers)
    label = "PostgreSQL" if args.postgres_url else "SQLite"
    report(label, r, args.spans, args.readers)
    with tempfile.TemporaryDirectory() as tmp:
        idle = idle_dead_jobs(Path(tmp) / "idle", args.postgres_url, args.dead_jobs, 10)
    report_idle(label, idle, args.dead_jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
