"""Two prune passes at once on real PostgreSQL take each job out of the fleet cells once.

Both passes are held inside a job's deletion at the same instant: a test transaction locks
every fleet cell, so a deletion that has read the job's cells waits there to take them out. The
fleet cells after the passes must equal those a single pass leaves on a copy of the database
(``CREATE DATABASE ... TEMPLATE``). Before the pass lock and the per-job row lock, both passes
read the job's cells and both took them out: negative seconds, a day's productive time halved
(``ett db prune & ett db prune``).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from ett_collector.storage import Store
from ett_collector.storage._retention import RUNS_GONE, Policy, Retention, Tally
from ett_collector.write.pipeline import Pipeline
from tests.conftest import PostgresServer
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.postgres

DAY = 86400.0
NOW = time.time()
OLD = NOW - 40 * DAY
JOBS = [f"old-{i}" for i in range(4)]
"""Old jobs 10 minutes apart: their hours and day share fleet cells."""
GONE = JOBS[:2]
"""The jobs whose figures a pass deletes; the others' figures (in the same cells) stay."""
CELLS = (
    "SELECT grain, t, model, team, state, category, component, seconds, gpu_s, jobs"
    " FROM fleet_cells ORDER BY grain, t, model, team, state, category, component"
)


@pytest.fixture
def seeded(postgres_server: PostgresServer) -> Iterator[tuple[str, str]]:
    """``(url, reference url)``: four old jobs sharing their fleet cells and a recent one, and
    a copy of the same database."""
    name = f"t_{uuid.uuid4().hex}"
    url = postgres_server.create_database(name)
    store = Store(url, raw_window_retention_s=0.0)
    store.upgrade()
    pipeline = Pipeline(store)
    for i, job in enumerate(JOBS):  # the same model, team and hours: shared fleet cells
        pipeline.ingest(worked_example(job, base=OLD + 600 * i))
    pipeline.ingest(worked_example("recent", base=NOW - 2000))
    pipeline.recompute_dirty()
    ends = [store.get_job(job)["end"] for job in JOBS]  # type: ignore[index]
    global FIGURES_S
    # the cutoff 5 minutes from either half's end: the seconds the test takes move it little
    FIGURES_S = time.time() - (ends[len(GONE) - 1] + ends[len(GONE)]) / 2
    store.close()
    store.engine.dispose()  # a template database takes no other session
    _admin(postgres_server, f'CREATE DATABASE "{name}_ref" TEMPLATE "{name}"')
    try:
        yield url, postgres_server.url(f"{name}_ref")
    finally:
        postgres_server.drop_database(name)
        postgres_server.drop_database(f"{name}_ref")


def _admin(server: PostgresServer, sql: str) -> None:
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        conn.execute(sql.encode())


FIGURES_S = 0.0
"""Set by the fixture: the figures of :data:`GONE` are older, the other old jobs' younger."""


def _retention(url: str, figures: bool = True) -> Retention:
    """Every old job's spans and runs due, the figures of :data:`GONE` too (``figures``)."""
    policy = Policy(30 * DAY, 30 * DAY, FIGURES_S if figures else None, None, quiet_s=0.0)
    return Retention(Store(url).engine, policy, batch_rows=5, pause_s=0)


def _cells(url: str) -> list[Any]:
    store = Store(url)
    with store.engine.connect() as conn:
        rows = [tuple(r) for r in conn.exec_driver_sql(CELLS)]
    store.engine.dispose()
    return rows


def _database(url: str) -> str:
    return url.rsplit("/", 1)[1]


def _lock_waiters(server: PostgresServer, url: str) -> int:
    """Sessions of ``url``'s database waiting for a lock now."""
    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'",
            (_database(url),),
        ).fetchone()
    return int(row[0]) if row else 0


def _held_in_their_deletion(
    server: PostgresServer, url: str, work: list[Any], enough: Any
) -> list[Any]:
    """Run each of ``work`` (callables) in a thread while every fleet cell is locked; once
    ``enough(waiters, finished)`` holds, let them go; their results, in order."""
    results: list[Any] = [None] * len(work)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            results[i] = work[i]()
        except BaseException as exc:  # the test fails with it below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    conninfo = server.conninfo.replace("dbname=postgres", f"dbname={_database(url)}")
    with psycopg.connect(conninfo) as cells:
        cells.execute("SELECT 1 FROM fleet_cells FOR UPDATE")  # held until the rollback
        for t in threads:
            t.start()
        wait_until(
            lambda: enough(_lock_waiters(server, url), sum(not t.is_alive() for t in threads)),
            what="both deletions to be under way",
        )
        cells.rollback()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def test_two_passes_at_once_take_each_job_out_of_the_fleet_once(
    postgres_server: PostgresServer, seeded: tuple[str, str]
) -> None:
    url, ref = seeded
    alone = _retention(ref).run()
    assert alone.jobs == len(GONE) and alone.span_jobs == len(JOBS) and not alone.busy
    expected = _cells(ref)

    first, second = _retention(url), _retention(url)
    tallies: list[Tally] = _held_in_their_deletion(
        postgres_server,
        url,
        [first.run, second.run],
        # both passes inside a deletion, or one held there and the other turned away
        lambda waiters, finished: waiters >= 2 or (waiters == 1 and finished == 1),
    )
    assert _cells(url) == expected
    assert sorted(t.busy for t in tallies) == [False, True]
    done, turned_away = sorted(tallies, key=lambda t: t.busy)
    assert done.jobs == len(GONE) and turned_away.rows() == 0
    assert "a prune is already running" in turned_away.describe()
    assert _retention(url).run().rows() == 0  # the lock went with the first pass


def test_a_job_deleted_twice_at_once_leaves_the_fleet_once(
    postgres_server: PostgresServer, seeded: tuple[str, str]
) -> None:
    """Two deletions of one job that no pass lock orders (an older collector's pass beside a
    new one): the second waits for the job's row, then finds it gone."""
    url, ref = seeded
    for where in (url, ref):  # every old job down to its figures
        _retention(where, figures=False).run()
    job = JOBS[0]
    _retention(ref)._forget(job, Tally())
    expected = _cells(ref)

    first, second = _retention(url), _retention(url)
    with first.engine.connect() as conn:
        assert (
            conn.exec_driver_sql("SELECT pruned FROM jobs WHERE job_id = %s", (job,)).scalar()
            == RUNS_GONE
        )
    _held_in_their_deletion(
        postgres_server,
        url,
        [lambda: first._forget(job, Tally()), lambda: second._forget(job, Tally())],
        lambda waiters, finished: waiters >= 2,
    )
    assert _cells(url) == expected
