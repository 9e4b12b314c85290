"""Collector benchmark: ingest rate over real HTTP beside the raw driver's bulk insert, and read
latency of the API. Prints figures; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_collector [--postgres-url URL] [--batches N]
    make bench      # runs it through pytest (marker: performance), SQLite and PostgreSQL

Targets (issue 2, 2-core machine): ingest >= 50% of the raw rate and >= 20,000 spans/s into
SQLite; p95 < 100 ms for GET /api/v1/jobs/{id} of a 10,000-span job and for a fleet-wide
lost-time query over 1,000 jobs.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path
from queue import Empty, SimpleQueue

import httpx
import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.otlp import decode_traces
from ett_collector.storage import Store
from ett_collector.storage._rows import SPAN_COLUMNS, span_rows
from tests.support.collector_process import start_collector
from tests.support.replay import encode_request
from tests.support.spans import span
from tests.support.worked_example import worked_example

PROTO = {"Content-Type": "application/x-protobuf"}


def _window_spans(job_id: str, n: int, ranks: int = 4, base: float = 1.79e9) -> list[SpanRecord]:
    """A long-running job: ``n`` spans (start-up, first batch, windows, checkpoints) over ranks."""
    spans: list[SpanRecord] = []
    per_rank = n // ranks
    ident = {sc.WORLD_SIZE: ranks, sc.MODEL: "bench", sc.TEAM: f"team-{hash(job_id) % 7}"}
    for rank in range(ranks):

        def add(name: str, a: float, b: float, extra: dict | None = None, rank: int = rank) -> None:
            attrs = {**ident, **(extra or {})}
            spans.append(
                span(
                    name,
                    base + a,
                    base + b,
                    0,
                    rank,
                    job_id,
                    span_id=len(spans) + 1,
                    trace_id=f"{rank:032x}",
                    **attrs,
                )
            )

        add(sc.startup_span_name("pg_init"), 0, 5)
        add(sc.startup_span_name("model_init"), 5, 20)
        add(sc.SPAN_FIRST_BATCH, 29, 30)
        for i in range(per_rank - 3):
            t = 30 + i
            if i % 50 == 49:
                add(
                    sc.SPAN_CHECKPOINT_SAVE,
                    t,
                    t + 0.5,
                    {sc.CHECKPOINT_STEP: i, sc.CHECKPOINT_MODE: "sync"},
                )
            else:
                add(
                    sc.SPAN_TRAIN_WINDOW,
                    t,
                    t + 1,
                    {sc.STEP_FIRST: i * 10, sc.STEP_LAST: i * 10 + 9, sc.SAMPLES: 640},
                )
    return spans


def _batches(count: int, size: int = 512) -> list[bytes]:
    """``count`` OTLP protobuf bodies of ``size`` spans each, encoded by the SDK."""
    bodies = []
    for b in range(count):
        spans = _window_spans(f"ingest-{b % 20}-{b}", size, ranks=1)
        bodies.append(encode_request(spans[:size]))
    return bodies


def _post_all(url: str, bodies: list[bytes], clients: int = 2) -> float:
    """POST every body over ``clients`` concurrent keep-alive connections, each taking the next
    body as soon as its last one is answered (as an OpenTelemetry Collector's sending queue
    feeds its consumers: a connection on a busier worker sends fewer); returns seconds."""
    queue: SimpleQueue[bytes] = SimpleQueue()
    for body in bodies:
        queue.put(body)
    errors: list[str] = []

    def worker() -> None:
        with httpx.Client(timeout=60) as client:
            while True:
                try:
                    body = queue.get_nowait()
                except Empty:
                    return
                r = client.post(url + "/v1/traces", content=body, headers=PROTO)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
    return elapsed


def _raw_insert_rate(db_url: str, bodies: list[bytes]) -> float:
    """Spans/s of the raw DBAPI driver's executemany of the same rows into a fresh copy of the
    schema, one transaction per 512 rows (as the service commits one per request).

    The rows (attributes already JSON text) are prepared before the clock starts: this is the
    driver's bulk-insert ceiling, without HTTP, decoding or serialization."""
    records = [
        r
        for body in bodies
        for r in decode_traces(body, PROTO["Content-Type"], None, 1 << 30).records
    ]
    rows = span_rows(records)
    store = Store(db_url)
    store.upgrade()
    raw = store.engine.raw_connection()
    sqlite = db_url.startswith("sqlite")
    try:
        cur = raw.cursor()
        ph = "?" if sqlite else "%s"
        cols = ", ".join(f'"{c}"' for c in SPAN_COLUMNS)
        sql = f"INSERT INTO spans ({cols}) VALUES ({', '.join([ph] * len(SPAN_COLUMNS))})"
        t0 = time.perf_counter()
        for i in range(0, len(rows), 512):
            if sqlite:  # the engine's connections run in autocommit: open the transaction
                cur.execute("BEGIN")
            cur.executemany(sql, rows[i : i + 512])
            raw.commit() if not sqlite else cur.execute("COMMIT")
        elapsed = time.perf_counter() - t0
    finally:
        raw.close()
        store.close()
    return len(rows) / elapsed


def _percentiles(samples: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(samples, n=100, method="inclusive")
    return qs[49], qs[94]


def _latency(client: httpx.Client, url: str, n: int, **params: str) -> tuple[float, float]:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = client.get(url, params=params)
        times.append((time.perf_counter() - t0) * 1000)
        assert r.status_code == 200, r.text
    return _percentiles(times)


def _wait_clean(client: httpx.Client, url: str, jobs: int, timeout: float = 600) -> None:
    """Wait until the collector's background worker has computed ``jobs`` jobs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(client.get(url + "/api/v1/jobs", params={"limit": 100000}).json()) >= jobs:
            return
        time.sleep(0.5)
    raise RuntimeError("jobs were not recomputed in time")


def _ingest_rate(home: Path, db_url: str | None, bodies: list[bytes], workers: int) -> float:
    """Spans/s of ``ett serve --workers N`` for ``bodies`` (after 2 warm-up requests)."""
    c = start_collector(home, db_url=db_url, workers=workers)
    try:
        _post_all(c.url, bodies[:2])  # warm-up: connections, schema, first recompute
        elapsed = _post_all(c.url, bodies[2:])
    finally:
        c.stop()
    return (len(bodies) - 2) * 512 / elapsed


def _read_latencies(home: Path, db_url: str | None, batches: int) -> dict[str, float]:
    """p50/p95 of the read API over a 10,000-span job and a fleet of 1,000 jobs."""
    c = start_collector(home, db_url=db_url)
    try:
        with httpx.Client(timeout=60) as client:
            big = _window_spans("read-10k", 10_000)
            for i in range(0, len(big), 512):
                body = encode_request(big[i : i + 512])
                client.post(c.url + "/v1/traces", content=body, headers=PROTO)
            fleet = [s for j in range(1000) for s in worked_example(f"fleet-{j:04d}", base=1.79e9)]
            for i in range(0, len(fleet), 2048):
                body = encode_request(fleet[i : i + 2048])
                client.post(c.url + "/v1/traces", content=body, headers=PROTO)
            _wait_clean(client, c.url, 1001)
            job = _latency(client, c.url + "/api/v1/jobs/read-10k", 200)
            lost = _latency(client, c.url + "/api/v1/lost-time", 100, group_by="component")
            team = _latency(
                client,
                c.url + "/api/v1/lost-time",
                100,
                group_by="team",
                since="1790000000",
                until="1790300000",
            )
    finally:
        c.stop()
    return {
        "job_10k_p50_ms": job[0],
        "job_10k_p95_ms": job[1],
        "lost_time_1000_jobs_p50_ms": lost[0],
        "lost_time_1000_jobs_p95_ms": lost[1],
        "lost_time_by_team_window_p50_ms": team[0],
        "lost_time_by_team_window_p95_ms": team[1],
    }


def run(db_kind: str, db_url: str | None, batches: int, home: Path) -> dict[str, float]:
    """One database: ingest rates (1 and 2 server processes), the raw driver's rate for the same
    rows, and read latencies. Prints and returns the figures."""
    bodies = _batches(batches)

    def fresh(name: str) -> str | None:  # a new database for each measurement
        return _sibling_db(db_url, name) if db_url else None

    ingest = {
        n: _ingest_rate(home / f"{db_kind}-w{n}", fresh(f"ingest_w{n}"), bodies, n) for n in (1, 2)
    }
    raw = _raw_insert_rate(fresh("rawbench") or f"sqlite:///{home / f'{db_kind}-raw.db'}", bodies)
    reads = _read_latencies(home / f"{db_kind}-reads", fresh("reads"), batches)
    figures = {f"ingest_w{n}_spans_per_s": v for n, v in ingest.items()}
    figures |= {"raw_driver_spans_per_s": raw, **reads}
    print(
        f"\n[{db_kind}] {len(bodies) * 512} spans in {len(bodies)} OTLP protobuf batches of 512 "
        "over HTTP, 2 client connections"
    )
    for n, v in ingest.items():
        print(f"  ett serve --workers {n}   : {v:10,.0f} spans/s  = {100 * v / raw:5.1f} % of raw")
    print(f"  raw driver executemany : {raw:10,.0f} spans/s  (same rows, same schema, no HTTP)")
    print("  targets: >= 50 % of raw; >= 20,000 spans/s into SQLite")
    print(
        f"  GET /api/v1/jobs/{{id}} (10,000 spans): p50 {reads['job_10k_p50_ms']:.1f} ms, "
        f"p95 {reads['job_10k_p95_ms']:.1f} ms"
    )
    print(
        f"  GET /api/v1/lost-time (1,000 jobs)   : p50 "
        f"{reads['lost_time_1000_jobs_p50_ms']:.1f} ms, "
        f"p95 {reads['lost_time_1000_jobs_p95_ms']:.1f} ms"
    )
    print(
        f"  lost-time by team, clipped window    : p50 "
        f"{reads['lost_time_by_team_window_p50_ms']:.1f} ms, "
        f"p95 {reads['lost_time_by_team_window_p95_ms']:.1f} ms"
    )
    print("  target: p95 < 100 ms")
    return figures


def _sibling_db(url: str, name: str) -> str:
    """Create database ``name`` next to ``url``'s and return its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    u = make_url(url)
    with psycopg.connect(
        host=u.host, port=u.port, user=u.username, dbname=u.database, autocommit=True
    ) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    return u.set(database=name).render_as_string(hide_password=False)


@pytest.mark.performance
def test_bench_sqlite(tmp_path: Path) -> None:
    figures = run("sqlite", None, 60, tmp_path)
    assert figures["ingest_w1_spans_per_s"] > 0


@pytest.mark.performance
@pytest.mark.postgres
def test_bench_postgres(tmp_path: Path, postgres_url: str) -> None:
    figures = run("postgresql", postgres_url, 60, tmp_path)
    assert figures["ingest_w1_spans_per_s"] > 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres-url", help="also benchmark this PostgreSQL database")
    parser.add_argument("--batches", type=int, default=60, help="OTLP batches of 512 spans")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run("sqlite", None, args.batches, Path(tmp))
        if args.postgres_url:
            run("postgresql", args.postgres_url, args.batches, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
