"""PostgreSQL's day partitions of ``spans``, on a real server: the migration converts a populated
database and every figure reads the same after; the service creates partitions ahead; retention
drops whole days once every job in them is pruned, and never a day a kept job has spans in."""

from __future__ import annotations

import time
from typing import Any

import pytest
from sqlalchemy import text

from ett_collector.storage import Store, _migrate
from ett_collector.storage._partitions import (
    DAY,
    day_of,
    ensure_ahead,
    is_partitioned,
    partition_name,
    partitions,
)
from ett_collector.storage._retention import Policy, Retention
from ett_collector.storage._roles import GRAFANA_VIEWS, grant_readonly
from ett_collector.storage._timeseries import fleet_overview
from ett_collector.write.pipeline import Outcome, Pipeline
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.postgres

NOW = time.time()
STARTS = {"d40": NOW - 40 * DAY, "d35": NOW - 35 * DAY, "d3": NOW - 3 * DAY, "d0": NOW - 900}
"""Four jobs of the worked example, ending on four days."""


def _every_figure(store: Store) -> dict[str, Any]:
    """What every reader gets: each job's figures and segments, lost time by every key, the
    fleet answer, the Grafana views' rows and each job's loaded spans."""
    out: dict[str, Any] = {}
    for job in STARTS:
        figures = dict(store.get_job(job) or {})
        figures.pop("computed_at", None)
        out[job] = (figures, store.get_segments(job), store.load_spans(job))
    for key in ("component", "job", "model", "team"):
        out[f"lost_{key}"] = store.lost_time(key)
    out["fleet"] = fleet_overview(
        store.engine, NOW - 50 * DAY, NOW + 60, "fleet", None, None, None, None, 10
    )
    with store.engine.connect() as conn:
        for view in GRAFANA_VIEWS:
            rows = conn.execute(text(f"SELECT * FROM {view}")).all()
            out[view] = sorted(repr(r) for r in rows)
    return out


def _seed(store: Store) -> Pipeline:
    pipeline = Pipeline(store, clock=lambda: NOW)
    for job, start in STARTS.items():
        pipeline.ingest(worked_example(job, base=start))
    pipeline.recompute_dirty()
    return pipeline


def _down_to_0008(store: Store) -> None:
    """The schema before partitions, with what was stored at the head kept: this code writes
    the head's columns (0012's ``window_series`` instants, say), so a database populated at
    0008 is made by populating one at the head and migrating it down."""
    from alembic import command

    with store.engine.begin() as conn:
        cfg = _migrate.alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0008")


def _seeded_at_0008(store: Store) -> Pipeline:
    store.upgrade()
    pipeline = _seed(store)
    _down_to_0008(store)
    return pipeline


def test_the_migration_converts_a_populated_database(fresh_postgres_url: str) -> None:
    store = Store(fresh_postgres_url)
    _seeded_at_0008(store)  # the schema before partitions
    grant_readonly(store.engine, "ett_reader_t")
    before = _every_figure(store)
    with store.engine.connect() as conn:
        assert not is_partitioned(conn)

    store.upgrade()
    with store.engine.connect() as conn:
        assert is_partitioned(conn)
        days = {p.lo for p in partitions(conn)}
        in_default = conn.execute(text("SELECT count(*) FROM spans_default")).scalar_one()
        grants = conn.execute(
            text(
                "SELECT count(*) FROM information_schema.role_table_grants"
                " WHERE grantee = 'ett_reader_t'"
            )
        ).scalar_one()
    assert {day_of(s) for s in STARTS.values()} <= days  # a partition for each day with spans
    assert day_of(NOW) + 3 * DAY in days  # and ahead
    assert in_default == 0 and grants == len(GRAFANA_VIEWS)
    after = _every_figure(store)
    assert after == before
    pipeline = Pipeline(store, clock=lambda: NOW)
    for job in STARTS:  # recomputed from the partitioned spans: the same figures
        assert pipeline.recompute_job(job) is Outcome.SAVED
    assert _every_figure(store) == before

    store.close()


def test_partitions_ahead_and_late_spans(fresh_postgres_url: str) -> None:
    store = Store(fresh_postgres_url)
    store.upgrade()
    _seed(store)  # a fresh database: the old days' spans went to the default partition
    with store.engine.connect() as conn:
        in_default = conn.execute(text("SELECT count(*) FROM spans_default")).scalar_one()
    assert in_default >= 44 * 2
    later = NOW + 10 * DAY
    made = ensure_ahead(store.engine, later)
    assert made[0] == partition_name(day_of(later)) and len(made) == 4
    assert ensure_ahead(store.engine, later) == []  # idempotent
    # a day made after its spans arrived takes them out of the default partition
    with store.engine.begin() as conn:
        from ett_collector.storage._partitions import ensure_days

        ensure_days(conn, [day_of(STARTS["d40"])])
        moved = conn.execute(
            text(f"SELECT count(*) FROM {partition_name(day_of(STARTS['d40']))}")
        ).scalar_one()
    assert moved > 0
    assert len(store.load_spans("d40", raw=True)) == 44
    store.close()


def test_retention_drops_whole_days_of_pruned_jobs_only(fresh_postgres_url: str) -> None:
    store = Store(fresh_postgres_url)
    pipeline = _seeded_at_0008(store)
    store.upgrade()  # every day with spans has its partition
    before = _every_figure(store)
    policy = Policy(spans_s=30 * DAY, runs_s=None, figures_s=None, alerts_s=None, quiet_s=0)
    done = Retention(store.engine, policy).run()
    assert done.partitions >= 2  # the days of d40 and d35, dropped whole
    with store.engine.connect() as conn:
        left = {p.name for p in partitions(conn)}
    assert partition_name(day_of(STARTS["d40"])) not in left
    assert partition_name(day_of(STARTS["d3"])) in left
    assert store.load_spans("d40", raw=True) == [] and store.load_spans("d35", raw=True) == []
    assert len(store.load_spans("d3", raw=True)) == 44
    after = _every_figure(store)
    for job in ("d40", "d35"):  # figures and segments kept; only the spans went
        assert after[job][:2] == before[job][:2]
    assert after["fleet"] == before["fleet"] and after["lost_job"] == before["lost_job"]
    assert pipeline.recompute_job("d40") is Outcome.PRUNED
    store.close()


def test_a_day_with_a_kept_job_is_not_dropped(fresh_postgres_url: str) -> None:
    store = Store(fresh_postgres_url)
    store.upgrade()
    pipeline = Pipeline(store, clock=lambda: NOW)
    day = day_of(STARTS["d40"]) + 3600  # both jobs inside one day
    pipeline.ingest(worked_example("gone", base=day))
    # a job that began the same day and is still dirty (not due): its day stays
    pipeline.ingest(worked_example("kept", base=day + 600))
    assert pipeline.recompute_job("gone") is Outcome.SAVED
    _down_to_0008(store)
    store.upgrade()
    policy = Policy(spans_s=30 * DAY, runs_s=None, figures_s=None, alerts_s=None, quiet_s=0)
    done = Retention(store.engine, policy).run()
    assert done.partitions == 0 and done.spans == 44  # the pruned job's rows, deleted one by one
    assert len(store.load_spans("kept", raw=True)) == 44
    store.close()


def _names(store: Store) -> set[str]:
    """The names of the ``spans`` table's partitions now."""
    with store.engine.connect() as conn:
        return {p.name for p in partitions(conn)}


def test_the_service_keeps_partitions_ahead(fresh_postgres_url: str) -> None:
    from ett_collector.settings import Settings
    from ett_collector.write.retention import RetentionLoop

    store = Store(fresh_postgres_url)
    store.upgrade()
    last = partition_name(day_of(time.time()) + 3 * DAY)
    with store.engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE spans DETACH PARTITION {last}"))
        conn.execute(text(f"DROP TABLE {last}"))
    loop = RetentionLoop(Settings(db_url=fresh_postgres_url), Pipeline(store), every_s=3600)
    loop.start()
    try:
        wait_until(lambda: last in _names(store), 30, f"the service to make {last}")
    finally:
        loop.stop()
    store.close()


def test_the_migration_downgrades_to_a_plain_table(fresh_postgres_url: str) -> None:
    store = Store(fresh_postgres_url)
    store.upgrade()
    _seed(store)
    before = _every_figure(store)
    _down_to_0008(store)
    with store.engine.connect() as conn:
        assert not is_partitioned(conn)
    assert _every_figure(store) == before
    store.upgrade()  # and up again
    assert _every_figure(store) == before
    store.close()
