"""What retention keeps and what a prune costs, on a simulated fleet (SQLite or PostgreSQL).

Seeds ``--jobs`` simulated jobs over ``--days`` (``ett simulate``'s fleet, recomputed), then
prints side by side, before and after a prune with the default periods (``ETT_RETAIN_*``):
the bytes each kind of data takes (SQLite: ``dbstat``; PostgreSQL: ``pg_total_relation_size``),
per job-day and per rank-day of the fleet's wall time, the prune's plan and run times, and the
fleet answer's p50 / p95 over the whole history (it answers from the kept figures). On
PostgreSQL the history's days get their partitions (as migration 0009 makes them for an existing
database), so the prune drops whole days; ``--no-partitions`` leaves them in the default
partition, deleted row by row.

    PYTHONPATH=. .venv/bin/python -m tests.performance.bench_retention --jobs 300 --days 90
    ... --db postgresql+psycopg://postgres@127.0.0.1:5432/bench   (an empty database)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from sqlalchemy import Engine

from ett_collector.storage import Store
from ett_collector.storage._partitions import ensure_days
from ett_collector.storage._retention import Policy, Retention
from ett_collector.storage._timeseries import fleet_overview
from ett_simulator import simulate_into_db
from tests.support.spans import window

KINDS: dict[str, tuple[str, ...]] = {
    "raw spans": ("spans",),
    "runs + series": ("window_runs", "window_series", "window_compaction"),
    "figures + segments": (
        "jobs",
        "job_figures",
        "job_performance",
        "segments",
        "job_totals",
        "job_cells",
    ),
    "fleet cells": ("fleet_cells",),
    "alerts": ("alerts",),
}
"""The tables of each kind (their indexes counted with them)."""


def _sizes(engine: Engine) -> dict[str, int]:
    """Bytes per table, indexes included."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            rows = conn.exec_driver_sql(
                "SELECT coalesce(m.tbl_name, d.name), sum(d.pgsize) FROM dbstat d"
                " LEFT JOIN sqlite_schema m ON m.name = d.name GROUP BY 1"
            ).all()
        else:
            rows = conn.exec_driver_sql(  # a partition counts with its table
                "SELECT coalesce(pg_partition_root(oid), oid)::regclass::text,"
                " sum(pg_total_relation_size(oid)) FROM pg_class"
                " WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace GROUP BY 1"
            ).all()
    return {str(name): int(size or 0) for name, size in rows}


def _kinds(engine: Engine) -> dict[str, int]:
    sizes = _sizes(engine)
    return {kind: sum(sizes.get(t, 0) for t in tables) for kind, tables in KINDS.items()}


def _days(engine: Engine) -> tuple[float, float]:
    """Job-days and rank-days of wall time in the stored figures (cells of a day)."""
    with engine.connect() as conn:
        jobs = conn.exec_driver_sql("SELECT coalesce(sum(wall_s), 0) FROM job_figures").scalar()
        ranks = conn.exec_driver_sql(
            "SELECT coalesce(sum(gpu_s), 0) FROM job_cells WHERE grain = 86400"
        ).scalar()
    return float(jobs or 0) / 86400, float(ranks or 0) / 86400


def _fleet_p(engine: Engine, days: float, n: int = 20) -> tuple[float, float]:
    now = time.time()
    took = []
    for _ in range(n):
        t0 = time.perf_counter()
        fleet_overview(engine, now - days * 86400, now, "fleet", None, None, None, None, 10)
        took.append(time.perf_counter() - t0)
    q = statistics.quantiles(took, n=20)
    return statistics.median(took) * 1000, q[18] * 1000


class Load:
    """Ingest (batches of 512 heartbeat windows of one live job) and reads (one job's figures)
    in two threads, each call's start and wall time kept, to compare calls made while a prune
    runs with the others."""

    def __init__(self, store: Store, job: str) -> None:
        self.store, self.job = store, job
        self.stop = threading.Event()
        self.ingests: list[tuple[float, float]] = []
        self.reads: list[tuple[float, float]] = []
        self._threads = [
            threading.Thread(target=self._ingest, daemon=True),
            threading.Thread(target=self._read, daemon=True),
        ]

    def _ingest(self) -> None:
        t = time.time()
        while not self.stop.is_set():
            batch = [window(t + i, t + i + 1, job="live-bench", rank=i % 8) for i in range(0, 512)]
            t += 512
            t0 = time.perf_counter()
            self.store.ingest(batch)
            self.ingests.append((t0, time.perf_counter() - t0))

    def _read(self) -> None:
        while not self.stop.is_set():
            t0 = time.perf_counter()
            self.store.get_job(self.job)
            self.reads.append((t0, time.perf_counter() - t0))
            time.sleep(0.002)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join()

    @staticmethod
    def split(calls: list[tuple[float, float]], lo: float, hi: float) -> str:
        """``p50 / p95 ms during [lo, hi] | outside`` of ``calls``."""

        def p(xs: list[float]) -> str:
            if len(xs) < 2:
                return "n/a"
            q = statistics.quantiles(xs, n=20)
            return f"{statistics.median(xs) * 1000:.1f} / {q[18] * 1000:.1f} ms ({len(xs)})"

        during = [d for t, d in calls if lo <= t <= hi]
        other = [d for t, d in calls if not lo <= t <= hi]
        return f"during the prune {p(during)}, otherwise {p(other)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--days", type=float, default=90)
    parser.add_argument(
        "--db", default=None, help="an empty database (default: SQLite in a tmp dir)"
    )
    parser.add_argument(
        "--no-partitions",
        action="store_true",
        help="PostgreSQL: leave the history in the default partition (rows deleted one by one)",
    )
    args = parser.parse_args()
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp(prefix='ett-ret-')) / 'bench.db'}"
    t0 = time.perf_counter()
    simulate_into_db(url, jobs=args.jobs, days=args.days)
    seed_s = time.perf_counter() - t0
    store = Store(url)
    engine = store.engine
    if engine.dialect.name == "postgresql" and not args.no_partitions:
        with engine.begin() as conn:  # the history's days, as the migration makes them
            days = conn.exec_driver_sql("SELECT DISTINCT floor(start / 86400) * 86400 FROM spans")
            ensure_days(conn, [float(d) for d in days.scalars()])
    job_days, rank_days = _days(engine)
    before, fleet_before = _kinds(engine), _fleet_p(engine, args.days)
    retention = Retention(engine, Policy(quiet_s=0.0))
    t0 = time.perf_counter()
    plan = retention.plan()
    plan_s = time.perf_counter() - t0
    with engine.connect() as conn:
        some_job = conn.exec_driver_sql("SELECT job_id FROM job_figures LIMIT 1").scalar()
    with Load(store, str(some_job)) as load:
        time.sleep(2.0)  # calls before the prune, for comparison
        t0 = time.perf_counter()
        done = retention.run()
        t1 = time.perf_counter()
        time.sleep(1.0)  # elapsed time, not a wait: calls after the prune, for comparison
    run_s = t1 - t0
    after, fleet_after = _kinds(engine), _fleet_p(engine, args.days)
    print(
        f"{engine.dialect.name}: {args.jobs} jobs over {args.days:g} days seeded in "
        f"{seed_s:.1f} s; {job_days:,.1f} job-days, {rank_days:,.1f} rank-days of wall time"
    )
    print(f"{'kind':<20} {'before B':>12} {'B/job-day':>10} {'B/rank-day':>11} {'after B':>12}")
    for kind in KINDS:
        b = before[kind]
        print(
            f"{kind:<20} {b:>12,} {b / max(job_days, 1e-9):>10,.0f} "
            f"{b / max(rank_days, 1e-9):>11,.0f} {after[kind]:>12,}"
        )
    total_b, total_a = sum(before.values()), sum(after.values())
    print(
        f"{'all':<20} {total_b:>12,} {total_b / max(job_days, 1e-9):>10,.0f} "
        f"{total_b / max(rank_days, 1e-9):>11,.0f} {total_a:>12,}"
    )
    print(
        f"prune with the defaults: plan {plan_s * 1000:.0f} ms, run {run_s:.2f} s; "
        f"deleted {done.describe()}; {done.rows():,} rows ({plan.rows():,} planned), "
        f"{done.vacuumed_pages:,} pages given back"
    )
    print(
        f"fleet answer over {args.days:g} days p50 / p95: before {fleet_before[0]:.1f} / "
        f"{fleet_before[1]:.1f} ms, after {fleet_after[0]:.1f} / {fleet_after[1]:.1f} ms"
    )
    print(f"Store.ingest of 512 windows p50 / p95: {Load.split(load.ingests, t0, t1)}")
    print(f"Store.get_job p50 / p95: {Load.split(load.reads, t0, t1)}")
    store.close()


if __name__ == "__main__":
    main()
