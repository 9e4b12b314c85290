"""Ingest at the raw ceiling with compaction on (issue 27): one ``ett serve`` fed a fleet's
heartbeats over HTTP beside the raw driver's insert of the same rows, in the same run. Prints
figures; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_ingest_ceiling [--jobs 50] [--ranks 16]
        [--batches 400] [--rounds 3] [--mixed] [--keep] [--postgres-url URL] [--no-sqlite]
        [--clients 2] [--workers 1,2] [--retentions 600,0] [--live-refresh 5]

The fleet: ``jobs`` jobs of ``ranks`` ranks sending 10 s windows (the library's steps), OTLP
protobuf bodies of 512 windows (each one job's next windows of every rank, the jobs taking
turns; ``--mixed``: one window of each of 512 ranks, as an OpenTelemetry Collector batching
every rank's requests would send) over two keep-alive connections into one ``ett serve``
process (``ETT_LIVE_REFRESH_S`` 5), with the default raw window retention (600 s: windows
stored raw, then compacted) and with 0 (windows folded into runs before they are written);
``--keep`` adds ``keep`` (no compaction). The ceiling: the raw DBAPI driver's ``executemany``
of the same span rows (attributes already JSON) into a fresh copy of the schema, one
transaction per 512 rows, the clock around the inserts only
(``bench_collector._raw_insert_rate``). Runs are interleaved, ``--rounds`` of each, and the
ratio of medians is printed against the 0.85 target, with bytes per ingested span (SQLite,
vacuumed; target <= 100 B). With ``--postgres-url`` (an empty database's URL: siblings are
created next to it), one process and ``--workers 2`` (or the ``--workers`` given, over
``--clients`` connections) beside the raw psycopg ``executemany`` rate and the raw rate of the
store's own insert (column arrays, ``collector/storage/_arrays.py``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.otlp import decode_traces
from ett_collector.storage import Store
from ett_collector.storage._rows import span_rows
from tests.performance.bench_collector import _post_all, _raw_insert_rate, _sibling_db
from tests.performance.bench_heartbeats import _sqlite_bytes
from tests.support.collector_process import start_collector
from tests.support.replay import encode_request
from tests.support.spans import window

BASE = 1.79e9
WINDOW_S = 10.0
BATCH = 512


def _window(j: int, rank: int, tick: int, ranks: int, base: float) -> SpanRecord:
    a = base + 3.0 * j + tick * WINDOW_S
    attrs: dict[str, Any] = {
        sc.MODEL: "dlrm",
        sc.TEAM: f"t{j % 5}",
        sc.WORLD_SIZE: ranks,
        sc.HOST_NAME: "h",
        sc.STEP_FIRST: 50 * tick,
        sc.STEP_LAST: 50 * tick + 49,
        sc.SAMPLES: 50 * 256,
    }
    tid = f"{j + 1:016x}{rank + 1:016x}"
    return window(a, a + WINDOW_S, job=f"fleet-{j:03d}", rank=rank, trace_id=tid, **attrs)


def fleet_bodies(
    jobs: int, ranks: int, batches: int, mixed: bool = False, base: float = BASE
) -> list[bytes]:
    """``batches`` OTLP protobuf bodies of :data:`BATCH` windows of the fleet, in send order:
    each body one job's next ``BATCH // ranks`` windows of every rank (as a job's exporters,
    batched per job), the jobs taking turns; ``mixed``: every body the next windows of the
    whole fleet by time, one span per rank (an OpenTelemetry Collector in front batching every
    rank's requests: as many resources as spans). ``base``: when the first window starts
    (:data:`BASE`, a day long past: every job is presumed dead by the time it is read; the
    clock at the call, :func:`live_base`: the jobs are running, as the senders of heartbeats
    are)."""
    out: list[SpanRecord] = []
    if mixed:
        tick = 0
        while len(out) < batches * BATCH:
            out += [_window(j, r, tick, ranks, base) for j in range(jobs) for r in range(ranks)]
            tick += 1
    else:
        per = max(1, BATCH // ranks)
        for b in range(batches):
            j, t0 = b % jobs, (b // jobs) * per
            ticks = range(t0, t0 + per)
            out += [_window(j, r, t, ranks, base) for t in ticks for r in range(ranks)]
    return [encode_request(out[i : i + BATCH]) for i in range(0, batches * BATCH, BATCH)]


def live_base() -> float:
    """A fleet's first window starting now: while the benchmark posts, its jobs are running
    (their newest window never more than 3 windows behind the clock, their later windows ahead
    of it), as a fleet sending heartbeats is."""
    return time.time()


Bodies = Callable[[], list[bytes]]
"""Makes the fleet's bodies, just before they are posted (a live fleet's windows start then)."""


def decode_cost(bodies: list[bytes]) -> float:
    """Microseconds of CPU per span to decode ``bodies`` into records, as ``POST /v1/traces``
    does before it stores them; the best of three passes (the decoder's caches warm, as in a
    running server). The floor under any server's per-span cost."""
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        n = sum(
            len(decode_traces(b, "application/x-protobuf", None, 1 << 30).records) for b in bodies
        )
        best = min(best, (time.process_time() - t0) / n * 1e6)
    return best


def serve_rate(
    home: Path,
    db_url: str | None,
    make: Bodies,
    workers: int,
    env: dict[str, str],
    clients: int = 2,
) -> tuple[float, int]:
    """Spans/s of ``ett serve`` for the bodies of ``make`` after 4 warm-up bodies, and the
    spans it holds; ``clients`` keep-alive connections post them."""
    c = start_collector(home, db_url=db_url, workers=workers, env=env)
    try:
        bodies = make()
        _post_all(c.url, bodies[:4], clients)
        elapsed = _post_all(c.url, bodies[4:], clients)
        spans = int(httpx.get(c.url + "/healthz", timeout=30).json()["spans"])
    finally:
        c.stop()
    return (len(bodies) - 4) * BATCH / elapsed, spans


def run_sqlite(make: Bodies, rounds: int, keep: bool, home: Path) -> None:
    modes = {
        "default (600 s)": {"ETT_LIVE_REFRESH_S": "5"},
        "fold at ingest (0)": {"ETT_LIVE_REFRESH_S": "5", "ETT_RAW_WINDOW_RETENTION_S": "0"},
    }
    if keep:
        modes["keep raw"] = {"ETT_LIVE_REFRESH_S": "5", "ETT_RAW_WINDOW_RETENTION_S": "keep"}
    rates: dict[str, list[float]] = {m: [] for m in modes}
    raw: list[float] = []
    sizes: dict[str, float] = {}
    bodies = make()
    for r in range(rounds):  # interleaved: the machine's load falls on both alike
        raw.append(_raw_insert_rate(f"sqlite:///{home / f'raw{r}.db'}", bodies))
        for k, (mode, env) in enumerate(modes.items()):
            h = home / f"serve{r}-{k}"
            rate, spans = serve_rate(h, None, make, 1, env)
            rates[mode].append(rate)
            sizes[mode] = _sqlite_bytes(h / "collector.db") / spans
    ceiling = statistics.median(raw)
    n = len(bodies) * BATCH
    print(f"\n[sqlite] {n:,} heartbeat windows in {len(bodies)} OTLP protobuf batches of {BATCH}")
    print(
        f"  raw sqlite3 executemany (ceiling): {ceiling:10,.0f} rows/s  runs: "
        + ", ".join(f"{x:,.0f}" for x in raw)
    )
    for mode, xs in rates.items():
        med = statistics.median(xs)
        print(
            f"  ett serve, {mode:18s}: {med:10,.0f} spans/s = {med / ceiling:.2f} of the ceiling"
            f" (target >= 0.85)  runs: "
            + ", ".join(f"{x:,.0f}" for x in xs)
            + f"; {sizes[mode]:.1f} B per span (target <= 100 B)"
        )


def _raw_array_insert_rate(db_url: str, bodies: list[bytes]) -> float:
    """Spans/s of the store's own PostgreSQL insert (one statement of column arrays per 512
    rows, ``collector/storage/_arrays.py``) of the same rows, one transaction each; the arrays
    are made before the clock starts, as ``_raw_insert_rate`` makes its rows. NaN for a
    collector older than that insert (a side-by-side run of an older tree)."""
    import psycopg

    try:
        from ett_collector.storage._sql import SPAN_INSERT
    except ImportError:
        return float("nan")

    records = [
        r
        for body in bodies
        for r in decode_traces(body, "application/x-protobuf", None, 1 << 30).records
    ]
    rows = span_rows(records)
    batches = [SPAN_INSERT.arrays(rows[i : i + BATCH]) for i in range(0, len(rows), BATCH)]
    store = Store(db_url)
    store.upgrade()
    store.close()
    u = make_url(db_url)
    with psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database) as conn:
        cur = conn.cursor()
        t0 = time.perf_counter()
        for arrays in batches:
            cur.execute(SPAN_INSERT.sql, arrays, binary=True)
            conn.commit()
        elapsed = time.perf_counter() - t0
    return len(rows) / elapsed


def run_postgres(
    url: str,
    make: Bodies,
    home: Path,
    env: dict[str, str],
    clients: int = 2,
    workers: tuple[int, ...] = (1, 2),
) -> None:
    rates = {
        w: serve_rate(home / f"w{w}", _sibling_db(url, f"ceil_w{w}"), make, w, env, clients)[0]
        for w in workers
    }
    bodies = make()
    raw = _raw_insert_rate(_sibling_db(url, "ceil_raw"), bodies)
    arrays = _raw_array_insert_rate(_sibling_db(url, "ceil_arrays"), bodies)
    print(
        f"\n[postgresql] {len(bodies) * BATCH:,} heartbeat windows, batches of {BATCH},"
        f" {clients} client connections"
    )
    print(f"  raw psycopg executemany : {raw:10,.0f} rows/s")
    print(f"  raw column arrays       : {arrays:10,.0f} rows/s (the store's insert on PostgreSQL)")
    one = rates.get(1)
    for w, v in rates.items():
        than = f"; {v / one:.2f}x one process" if one and w > 1 else ""
        print(f"  ett serve --workers {w}  : {v:10,.0f} spans/s = {v / raw:.2f} of raw{than}")
    print("  targets: one process >= 20,000 spans/s; --workers 2 nearly twice that")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=50)
    p.add_argument("--ranks", type=int, default=16)
    p.add_argument("--batches", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--keep", action="store_true", help="also a run with raw windows kept")
    p.add_argument("--mixed", action="store_true", help="one span per rank in each body")
    p.add_argument("--postgres-url", help="an empty PostgreSQL database's URL")
    p.add_argument(
        "--clients",
        type=int,
        default=2,
        help="keep-alive connections posting the bodies (default 2; workers of one socket"
        " each keep the connections they accepted, so fewer connections than workers idle some)",
    )
    p.add_argument(
        "--workers", default="1,2", help="PostgreSQL: the --workers values to run (default 1,2)"
    )
    p.add_argument(
        "--retentions",
        default="600,0",
        help="PostgreSQL: the ETT_RAW_WINDOW_RETENTION_S values to run (default 600,0)",
    )
    p.add_argument("--no-sqlite", action="store_true", help="skip the SQLite runs")
    p.add_argument(
        "--live-refresh",
        default="5",
        help="PostgreSQL: ETT_LIVE_REFRESH_S of the collector (default 5: each live job's"
        " figures recomputed at most every 5 s)",
    )
    p.add_argument(
        "--dead",
        action="store_true",
        help="windows of a day long past (the jobs presumed dead as they are read: each save"
        " computes their loop facts, a running job's every 300 s), as before 2026-12-02",
    )
    args = p.parse_args()

    def make() -> list[bytes]:
        base = BASE if args.dead else live_base()
        return fleet_bodies(args.jobs, args.ranks, args.batches, args.mixed, base)

    shape = "one resource per span (--mixed)" if args.mixed else "one job a body"
    print(f"\n  decoding alone: {decode_cost(make()):.1f} us of CPU per span ({shape})")
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_sqlite:
            run_sqlite(make, args.rounds, args.keep, Path(tmp))
        if args.postgres_url:
            workers = tuple(int(w) for w in args.workers.split(","))
            for retention in args.retentions.split(","):
                env = {
                    "ETT_LIVE_REFRESH_S": args.live_refresh,
                    "ETT_RAW_WINDOW_RETENTION_S": retention,
                }
                print(
                    f"\n  ETT_RAW_WINDOW_RETENTION_S={retention}"
                    f" ETT_LIVE_REFRESH_S={args.live_refresh}"
                )
                home = Path(tmp) / f"pg{retention}"
                run_postgres(args.postgres_url, make, home, env, args.clients, workers)


@pytest.mark.performance
def test_bench_sqlite(tmp_path: Path) -> None:
    run_sqlite(lambda: fleet_bodies(20, 16, 120, base=live_base()), 1, False, tmp_path)


@pytest.mark.performance
@pytest.mark.postgres
def test_bench_postgres(tmp_path: Path, postgres_url: str) -> None:
    def make() -> list[bytes]:
        return fleet_bodies(20, 16, 160, base=live_base())

    for retention in ("600", "0"):
        env = {"ETT_LIVE_REFRESH_S": "5", "ETT_RAW_WINDOW_RETENTION_S": retention}
        print(f"\n  ETT_RAW_WINDOW_RETENTION_S={retention}")
        run_postgres(postgres_url, make, tmp_path / f"pg{retention}", env)


if __name__ == "__main__":
    main()
