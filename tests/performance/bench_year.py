"""A year of a fleet, measured on 90 days of it: bytes, prune, ingest and reads under retention.

For each database (``--db sqlite|postgres|both``; PostgreSQL is a throwaway server of the test
fixtures, ``tests/conftest.py``): seeds ``--jobs`` simulated jobs over ``--days`` (``ett
simulate``'s fleet written through the store and recomputed, as ``bench_retention`` does; on
PostgreSQL the history's days get their partitions, as migration 0009 makes them), starts a real
``ett serve`` on it (its own retention off, so the prune below is the one measured), posts OTLP
protobuf batches of 512 heartbeat windows of a live job throughout, and meanwhile runs one
retention pass with the default periods (``ETT_RETAIN_*``) from this process. Then prints, side
by side: bytes per job-day before and after the pass (the state compaction and retention leave),
the pass's times (on PostgreSQL the partition drop apart), the ingest rate and POST p95 during the
pass and outside it, ``GET /api/v1/fleet?since=90d`` and ``GET /api/v1/lost-time?since=90d``
p50 / p95 over HTTP, and the alert backtest over the whole history (``ett alerts backtest``'s
function, the default rules).

How the seed differs from a real year: the jobs' spans are written in one go per job (not over
its wall time, so no compaction runs while a job lives: its raw windows are all there until the
pass), every job is already over, and the history is ``--days`` long, not 365 (the doc's year is
arithmetic on the bytes per job-day measured here).

    PYTHONPATH=. .venv/bin/python -m tests.performance.bench_year --jobs 800 --db both
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import Engine

from ett_collector.alerts._backtest import backtest
from ett_collector.alerts.rules import load_rules
from ett_collector.storage import Store
from ett_collector.storage._partitions import drop_before, ensure_days
from ett_collector.storage._retention import Policy, Retention
from ett_simulator import simulate_into_db
from tests.performance.bench_retention import _days, _sizes
from tests.support.bodies import window_body
from tests.support.collector_process import Collector, start_collector

KEEP_ALL = {f"ETT_RETAIN_{k}": "keep" for k in ("SPANS", "RUNS", "FIGURES", "ALERTS")}
"""The served collector's own retention off: the pass measured is this process's."""


def _pq(xs: list[float]) -> str:
    """``p50 / p95 ms (n)`` of seconds ``xs``."""
    if len(xs) < 2:
        return f"n/a ({len(xs)})"
    q = statistics.quantiles(xs, n=20)
    return f"{statistics.median(xs) * 1000:.0f} / {q[18] * 1000:.0f} ms ({len(xs)})"


@contextmanager
def _ticker(what: str, count: Callable[[], str], every_s: float = 15.0) -> Iterator[None]:
    """A progress line ``what: count(), N s`` every ``every_s`` while the block runs."""
    stop, t0 = threading.Event(), time.perf_counter()

    def tick() -> None:
        while not stop.wait(every_s):
            try:
                now = count()
            except Exception as exc:  # a busy database: say so, keep ticking
                now = f"({type(exc).__name__})"
            print(f"  {what}: {now}, {time.perf_counter() - t0:.0f} s", flush=True)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class Poster:
    """Posts batches of 512 windows of one live job to ``collector`` in a closed loop; keeps
    each POST's start, wall time and status."""

    def __init__(self, collector: Collector) -> None:
        self.url = collector.url + "/v1/traces"
        self.stop = threading.Event()
        self.posts: list[tuple[float, float, int]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        first = 1
        headers = {"content-type": "application/x-protobuf"}
        with httpx.Client(timeout=60) as client:
            while not self.stop.is_set():
                body = window_body(LIVE_JOB, 512, first_span_id=first, rank=first % 8)
                first += 512
                t0 = time.perf_counter()
                status = client.post(self.url, content=body, headers=headers).status_code
                self.posts.append((t0, time.perf_counter() - t0, status))

    def __enter__(self) -> Poster:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        self._thread.join()

    def between(self, lo: float, hi: float, inside: bool) -> str:
        """``spans/s, POST p50 / p95`` of the posts started inside (or outside) ``[lo, hi]``."""
        picked = [(t, d, s) for t, d, s in self.posts if (lo <= t <= hi) == inside]
        if not picked:
            return "no posts"
        ok = sum(1 for *_, s in picked if s == 200)
        rate = 512 * ok / sum(d for _, d, _ in picked)  # one client in a closed loop
        return f"{rate:,.0f} spans/s, POST p50 / p95 {_pq([d for _, d, _ in picked])}, {ok} ok"


KINDS: dict[str, tuple[str, ...]] = {
    "raw spans": ("spans",),
    "runs": ("window_runs", "window_compaction"),
    "step-time series": ("window_series",),
    "figures + segments": ("jobs", "job_figures", "segments", "job_totals", "job_cells"),
    "fleet cells": ("fleet_cells",),
    "alerts": ("alerts",),
}
"""The tables of each kind (their indexes counted with them); ``bench_retention``'s, with the
runs and their 60 s step-time series apart."""


def _kinds(engine: Engine) -> dict[str, int]:
    sizes = _sizes(engine)
    return {kind: sum(sizes.get(t, 0) for t in tables) for kind, tables in KINDS.items()}


LIVE_JOB = "year-live"

JOB_TABLES = (
    "spans",
    "window_runs",
    "window_series",
    "window_compaction",
    "segments",
    "job_cells",
    "job_totals",
    "job_figures",
    "jobs",
)
"""The tables holding a job's rows (its fleet cells' share stays: a few kB)."""


def _compact(engine: Engine, forget: str | None = None) -> None:
    """Delete job ``forget``'s rows, then give every dead row's and free page's bytes back
    (SQLite ``VACUUM``, PostgreSQL ``VACUUM FULL``), so that sizes count live rows only."""
    if forget is not None:
        with engine.begin() as conn:
            ph = "?" if engine.dialect.paramstyle == "qmark" else "%s"
            for table in JOB_TABLES:
                conn.exec_driver_sql(f"DELETE FROM {table} WHERE job_id = {ph}", (forget,))
    raw = engine.raw_connection()  # VACUUM runs outside a transaction
    try:
        driver: Any = raw.driver_connection
        if engine.dialect.name == "postgresql":
            driver.autocommit = True
            driver.execute("VACUUM FULL")
            driver.autocommit = False
        else:  # sqlite3, in autocommit (the store's engine begins its own transactions)
            driver.execute("VACUUM")
    finally:
        raw.close()


def _gets(collector: Collector, path: str, n: int = 20) -> str:
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        answer = collector.get(path, since="90d")
        took.append(time.perf_counter() - t0)
        answer.raise_for_status()
    return _pq(took)


def _prune(store: Store, pg: bool) -> tuple[str, float, float, str]:
    """One pass with the default periods: (what went, partition drop s, whole pass s, rows)."""
    retention = Retention(store.engine, Policy(quiet_s=3.0))  # the live job: never
    t0 = time.perf_counter()
    drop_s, dropped = 0.0, ""
    if pg:  # the pass's first steps, timed apart: mark the due jobs, drop their whole days
        now = time.time()
        retention._mark_due(now)
        t1 = time.perf_counter()
        parts, rows = drop_before(store.engine, now - (retention.policy.spans_s or 0))
        drop_s = time.perf_counter() - t1
        dropped = f"{parts} day partitions (about {rows:,} spans) dropped; "
    done = retention.run()
    total = time.perf_counter() - t0
    return dropped + done.describe(), drop_s, total, f"{done.rows():,} rows deleted"


def measure(url: str, jobs: int, days: float, home: Path) -> dict[str, str]:
    """Every figure of one database, as printable strings keyed by name."""
    out: dict[str, str] = {}
    t0 = time.perf_counter()
    probe = Store(url)
    probe.upgrade()

    def stored() -> str:
        with probe.engine.connect() as conn:
            n = conn.exec_driver_sql("SELECT count(*) FROM jobs").scalar()
            f = conn.exec_driver_sql("SELECT count(*) FROM job_figures").scalar()
        return f"{n:,} jobs stored, {f:,} with figures"

    with _ticker("seeding", stored):
        simulate_into_db(url, jobs=jobs, days=days)
    out["seed"] = f"{time.perf_counter() - t0:.0f} s"
    store = Store(url)
    engine, pg = store.engine, store.engine.dialect.name == "postgresql"
    if pg:
        with engine.begin() as conn:
            found = conn.exec_driver_sql("SELECT DISTINCT floor(start / 86400) * 86400 FROM spans")
            ensure_days(conn, [float(d) for d in found.scalars()])
    with engine.connect() as conn:
        out["jobs"] = f"{conn.exec_driver_sql('SELECT count(*) FROM jobs').scalar():,}"
    job_days, rank_days = _days(engine)
    out["job-days / rank-days"] = f"{job_days:,.0f} / {rank_days:,.0f}"
    _compact(engine)
    before = _kinds(engine)
    collector = start_collector(home, url, env=KEEP_ALL)
    try:
        with Poster(collector) as poster:
            time.sleep(5.0)  # posts before the pass, for comparison
            lo = time.perf_counter()
            with _ticker("prune", lambda: f"{len(poster.posts)} posts so far"):
                what, drop_s, run_s, rows = _prune(store, pg)
            hi = time.perf_counter()
            time.sleep(3.0)  # elapsed time, not a wait: posts after the pass
        out["prune"] = f"{run_s:.2f} s, {rows}"
        out["partition drop"] = f"{drop_s:.2f} s" if pg else "n/a (plain tables)"
        out["ingest during the pass"] = poster.between(lo, hi, True)
        out["ingest outside it"] = poster.between(lo, hi, False)
        out["GET fleet?since=90d"] = _gets(collector, "/api/v1/fleet")
        out["GET lost-time?since=90d"] = _gets(collector, "/api/v1/lost-time")
    finally:
        collector.stop()
    _compact(engine, forget=LIVE_JOB)
    after = _kinds(engine)
    for kind in KINDS:
        b, a = before[kind] / max(job_days, 1e-9), after[kind] / max(job_days, 1e-9)
        out[f"B/job-day {kind}"] = f"{b:,.0f} -> {a:,.0f}"
    total_b, total_a = sum(before.values()), sum(after.values())
    out["B/job-day all"] = f"{total_b / job_days:,.0f} -> {total_a / job_days:,.0f}"
    for kind in KINDS:  # what each kind costs while it is kept: before the pass
        out[f"B/rank-day {kind}"] = f"{before[kind] / max(rank_days, 1e-9):,.0f}"
    out["database bytes"] = f"{total_b:,} -> {total_a:,}"
    now = time.time()
    t0 = time.perf_counter()
    firings = backtest(engine, load_rules(None), now - days * 86400, now)
    out["backtest over the history"] = f"{time.perf_counter() - t0:.2f} s, {len(firings)} firings"
    out["what the pass deleted"] = what
    store.close()
    probe.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--jobs", type=int, default=800, help="ett simulate --jobs (default 800: ~1,170 jobs)"
    )
    parser.add_argument("--days", type=float, default=90, help="days of history (default 90)")
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="ett-year-"))
    results: dict[str, dict[str, str]] = {}
    if args.db in ("sqlite", "both"):
        print(f"SQLite: {args.jobs} jobs over {args.days:g} days", flush=True)
        url = f"sqlite:///{root / 'year.db'}"
        results["SQLite"] = measure(url, args.jobs, args.days, root / "sqlite")
    if args.db in ("postgres", "both"):
        from tests.conftest import throwaway_postgres

        print(f"PostgreSQL: {args.jobs} jobs over {args.days:g} days", flush=True)
        with throwaway_postgres("ett-year-pg-") as server:
            url = server.create_database("year")
            results["PostgreSQL"] = measure(url, args.jobs, args.days, root / "pg")
    names = list(next(iter(results.values())))
    width = max(map(len, names))
    print(f"\n{'':<{width}}  " + "  |  ".join(results))
    for name in names:
        print(f"{name:<{width}}  " + "  |  ".join(r.get(name, "") for r in results.values()))


if __name__ == "__main__":
    main()
