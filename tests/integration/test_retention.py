"""Retention on real SQLite and PostgreSQL: what goes, what stays, and who refuses afterwards.

A job 40 days old loses its raw spans (then its runs, then itself) as the periods say; its
figures, segments, lost time and fleet cells stay exactly as they were until the job itself
goes; a recompute of it refuses and leaves them; a running job is never touched.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from ett import semconv as sc
from ett_collector.storage import Store
from ett_collector.storage._retention import (
    RUNS_GONE,
    Policy,
    Retention,
    pruned_jobs,
)
from ett_collector.storage._timeseries import fleet_overview
from ett_collector.write.pipeline import Outcome, Pipeline
from tests.support.spans import first_batch, phase, window
from tests.support.worked_example import worked_example


@pytest.fixture
def store(folding_store: Store) -> Store:
    """An upgraded store on SQLite and PostgreSQL that folds windows into runs at once."""
    return folding_store


DAY = 86400.0
NOW = time.time()
OLD = NOW - 40 * DAY


def _running(job: str, now: float) -> list[Any]:
    """A job that started 200 s before ``now`` and is training at ``now``."""
    start = now - 200
    kw = {"job": job, sc.MODEL: "dlrm", sc.TEAM: "ranking"}
    out = [phase("model_init", start, start + 20, **kw), first_batch(start + 30, **kw)]
    out += [window(t, t + 10, **kw) for t in range(int(start + 30), int(now) - 10, 10)]
    return out


def _seed(store: Store) -> Pipeline:
    pipeline = Pipeline(store, clock=lambda: NOW)
    pipeline.ingest(worked_example("old", base=OLD))
    pipeline.ingest(worked_example("recent", base=NOW - 1000))
    pipeline.ingest(_running("live", NOW))
    pipeline.recompute_dirty()
    assert store.get_job("live")["state"] == "running"  # type: ignore[index]
    return pipeline


def _rows(store: Store, table: str, job: str) -> int:
    with store.engine.connect() as conn:
        sql = text(f"SELECT count(*) FROM {table} WHERE job_id = :j")
        return int(conn.execute(sql, {"j": job}).scalar_one())


def _kept(store: Store) -> dict[str, Any]:
    """Every answer the figures of the three jobs give."""
    fleet = fleet_overview(store.engine, OLD - DAY, NOW + 60, "fleet", None, None, None, None, 10)
    out: dict[str, Any] = {"fleet": fleet, "lost": store.lost_time("component", OLD - DAY)}
    for job in ("old", "recent", "live"):
        figures = store.get_job(job)
        out[job] = (figures, store.get_segments(job))
    return out


def _retention(store: Store, **periods: float | None) -> Retention:
    policy = Policy(
        **{
            "spans_s": None,
            "runs_s": None,
            "figures_s": None,
            "alerts_s": None,
            **periods,
            "quiet_s": 0.0,
        }
    )
    return Retention(store.engine, policy, batch_rows=7, pause_s=0, clock=time.time)


def test_raw_spans_go_figures_stay_and_recompute_refuses(store: Store) -> None:
    pipeline = _seed(store)
    before = _kept(store)
    raw = _rows(store, "spans", "old")
    runs = _rows(store, "window_runs", "old")
    assert raw > 7 and runs > 0  # several batches; compaction folded the old job's windows

    retention = _retention(store, spans_s=30 * DAY, runs_s=90 * DAY)
    plan = retention.plan()
    assert (plan.span_jobs, plan.spans, plan.run_jobs, plan.jobs) == (1, raw, 0, 0)
    done = retention.run()
    assert (done.span_jobs, done.spans, done.runs, done.jobs) == (1, raw, 0, 0)

    assert _rows(store, "spans", "old") == 0 and _rows(store, "window_runs", "old") == runs
    assert _rows(store, "spans", "recent") > 0 and _rows(store, "spans", "live") > 0
    assert _kept(store) == before  # figures, segments, lost time and fleet cells unchanged
    assert pipeline.recompute_job("old") is Outcome.PRUNED
    assert _kept(store) == before and store.recompute_failure("old") is None
    assert pruned_jobs(store.engine) == 1
    assert retention.plan().rows() == 0  # nothing more due

    # a span for the pruned job: refused (never stored), its figures as they were
    done = pipeline.accept(worked_example("old", base=OLD + 10_000)[:1])
    assert done.touched == set() and done.refused["old"].spans == 1
    pipeline.recompute_dirty()
    assert not store.is_dirty("old") and store.recompute_failure("old") is None
    assert _rows(store, "spans", "old") == 0
    assert store.get_job("old") == before["old"][0]


def test_runs_then_the_job_go_and_the_fleet_cells_with_it(store: Store) -> None:
    pipeline = _seed(store)
    before = _kept(store)
    segment_rows = _rows(store, "segments", "old")
    _retention(store, spans_s=30 * DAY, runs_s=30 * DAY).run()
    assert _rows(store, "window_runs", "old") == 0
    with store.engine.connect() as conn:
        level = conn.execute(text("SELECT pruned FROM jobs WHERE job_id = 'old'")).scalar_one()
    assert level == RUNS_GONE and _kept(store) == before

    done = _retention(store, spans_s=30 * DAY, runs_s=30 * DAY, figures_s=30 * DAY).run()
    assert done.jobs == 1 and done.segments == segment_rows > 0
    assert store.get_job("old") is None and "old" not in store.job_ids()
    for table in ("segments", "job_cells", "job_totals", "job_figures"):
        assert _rows(store, table, "old") == 0, table
    with store.engine.connect() as conn:  # the old job's days have no fleet cell left
        cells = conn.execute(
            text("SELECT count(*) FROM fleet_cells WHERE t < :t"), {"t": OLD + DAY}
        ).scalar_one()
    assert cells == 0
    after = _kept(store)
    assert after["recent"] == before["recent"] and after["live"] == before["live"]
    assert pipeline.recompute_job("recent") is Outcome.SAVED


def test_a_running_job_is_never_pruned(store: Store) -> None:
    _seed(store)
    policy = Policy(spans_s=1.0, runs_s=1.0, figures_s=1.0, alerts_s=1.0, quiet_s=0.0)
    # every job ended more than 1 s before: only its state keeps the running one
    done = Retention(store.engine, policy, clock=lambda: time.time() + 5).run()
    assert done.jobs == 2  # old and recent
    assert store.job_ids() == ["live"]
    assert store.get_job("live")["state"] == "running"  # type: ignore[index]
    assert _rows(store, "spans", "live") > 0


def test_a_job_with_a_recent_span_waits_its_quiet_time(store: Store) -> None:
    _seed(store)
    policy = Policy(spans_s=1.0, runs_s=None, figures_s=None, alerts_s=None, quiet_s=3600.0)
    assert Retention(store.engine, policy, clock=lambda: NOW).plan().span_jobs == 0


def test_resolved_alerts_go_after_their_period(store: Store) -> None:
    rows = [(f"r{i}", "resolved" if i < 3 else "firing", NOW - (i + 1) * DAY) for i in range(5)]
    with store.engine.begin() as conn:
        for rule, state, resolved in rows:
            conn.execute(
                text(
                    "INSERT INTO alerts (rule, alert_key, state, labels, annotations, jobs,"
                    " figures, active_since, resolved_at, last_eval, resolved_sent)"
                    " VALUES (:r, 'k', :s, '{}', '{}', '[]', '{}', :t, :t, :t, :sent)"
                ),
                {"r": rule, "s": state, "t": resolved, "sent": True},
            )
    retention = _retention(store, alerts_s=1.5 * DAY)
    assert retention.plan().alerts == 2  # resolved 2 and 3 days ago; firing ones stay
    assert retention.run().alerts == 2
    with store.engine.connect() as conn:
        left = sorted(conn.execute(text("SELECT rule FROM alerts")).scalars())
    assert left == ["r0", "r3", "r4"]


def test_sqlite_gives_freed_pages_back(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'v.db'}"
    store = Store(url, raw_window_retention_s=None)
    store.upgrade()
    pipeline = Pipeline(store, clock=lambda: NOW)
    many = [window(OLD + 600 + i, OLD + 601 + i, job="big") for i in range(3000)]
    pipeline.ingest([first_batch(OLD + 599, job="big"), *many])
    pipeline.recompute_dirty()
    store.close()  # the last connection checkpoints the WAL into the file
    size = (tmp_path / "v.db").stat().st_size
    store = Store(url, raw_window_retention_s=None)
    done = _retention(store, spans_s=30 * DAY).run()
    assert done.spans == 3001 and done.vacuumed_pages > 0
    assert done.vacuumed_pages * 4096 < size  # each page counted once
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA freelist_count").scalar() == 0
    store.close()
    assert (tmp_path / "v.db").stat().st_size < size / 2


def test_plan_names_every_kind(store: Store) -> None:
    _seed(store)
    retention = _retention(store, spans_s=30 * DAY, runs_s=30 * DAY, figures_s=30 * DAY)
    plan = retention.plan()
    line = plan.describe()
    assert "raw spans of 1 job(s)" in line and "figures of 1 job(s)" in line
    assert plan.rows() == retention.run().rows() > 0


def test_ingest_and_a_pass_at_once_both_succeed(store: Store) -> None:
    """A pass deleting in small batches while another writer ingests: neither fails (on SQLite a
    batch that read first, then wrote, would be refused at once after the other's commit)."""
    pipeline = Pipeline(store, clock=lambda: NOW)
    for i in range(20):
        pipeline.ingest(worked_example(f"old{i}", base=OLD + i * 1000))
    pipeline.recompute_dirty()
    retention = Retention(
        store.engine,
        Policy(spans_s=30 * DAY, runs_s=30 * DAY, figures_s=None, alerts_s=None, quiet_s=0),
        batch_rows=3,
        pause_s=0,
    )
    errors: list[BaseException] = []
    done: list[Any] = []

    def prune() -> None:
        try:
            done.append(retention.run())
        except BaseException as exc:  # reported below
            errors.append(exc)

    thread = threading.Thread(target=prune)
    thread.start()
    sent = 0
    while thread.is_alive() or sent < 20:
        pipeline.ingest([window(NOW + sent, NOW + sent + 1, job="live-now")])
        sent += 1
    thread.join()
    assert errors == [] and done[0].span_jobs == 20
    assert store.span_counts()["jobs"] == 21 and len(store.load_spans("live-now")) >= 1


def test_the_alert_backtest_answers_the_same_after_a_prune(tmp_path: Path) -> None:
    from ett_collector.alerts import backtest, load_rules
    from ett_simulator import simulate_into_db

    url, start = f"sqlite:///{tmp_path / 'fleet.db'}", NOW - 40 * DAY  # 9 days, ended 31 ago
    onset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(start + 7 * DAY))
    regress = f"model=dlrm-small component=checkpoint factor=6 at={onset}"
    simulate_into_db(url, jobs=120, days=9, seed=5, start=start, regress=[regress])
    store = Store(url)

    def firings() -> list[dict[str, Any]]:
        found = backtest(store.engine, load_rules(), since=start + 5 * DAY, until=start + 9 * DAY)
        return [f.to_dict() for f in found]

    before = firings()
    done = _retention(store, spans_s=30 * DAY).run()
    assert done.span_jobs > 100  # the whole fleet lost its raw spans
    assert firings() == before  # answered from the kept figures
    assert any(f["rule"] == "regression_by_model" for f in before)  # the planted one fires
    store.close()
