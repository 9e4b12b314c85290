"""Every SQL query of the Grafana dashboards, with Grafana's macros and variables expanded, on a
real PostgreSQL holding a small simulated fleet, read as the read-only role Grafana uses: the
columns each panel expects, and the same values as the read API for the same question. And the
job drill-down's panels on a real 2-rank training run (torchrun, a failure, a restart) sent to a
live ``ett serve`` on PostgreSQL."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.read.overview import Overview
from ett_collector.read.query import Query
from ett_collector.storage import Store
from ett_collector.storage._roles import GRAFANA_VIEWS, grant_readonly
from ett_collector.write.pipeline import Pipeline
from ett_grafana import _checkpoints, _fleet, _job
from ett_grafana._macros import expand
from ett_grafana._provisioning import dashboard_models
from ett_grafana._queries import SqlQuery
from ett_simulator import simulate_into_db
from tests.support.collector_process import start_collector
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.postgres

BASE = 1_700_000_000.0  # an instant; jobs start at offsets from it
FROM, TO = int(BASE) - 3600, int(BASE) + 2 * 86400
ROLE, PASSWORD = "ett_grafana", "s3cret'%pw"


def _compile_job(job_id: str, base: float) -> list[SpanRecord]:
    """Two ranks; compile (miss) in start-up, an async checkpoint with its persist, completes."""
    spans = []
    n = 0

    def add(name: str, start: float, end: float, rank: int, **attrs: Any) -> None:
        nonlocal n
        n += 1
        spans.append(
            SpanRecord(
                trace_id=f"{rank + 1:032x}",
                span_id=f"{n:016x}",
                name=name,
                start=base + start,
                end=base + end,
                job_id=job_id,
                attempt=0,
                rank=rank,
                attributes={
                    sc.JOB_ID: job_id,
                    sc.ATTEMPT: 0,
                    sc.RANK: rank,
                    sc.WORLD_SIZE: 2,
                    sc.MODEL: "twotower",
                    sc.TEAM: "ads",
                    **attrs,
                },
            )
        )

    for rank in (0, 1):
        add(sc.startup_span_name("pg_init"), 0, 5 + rank, rank)
        add(sc.SPAN_COMPILE, 6, 30, rank, **{sc.COMPILE_CACHE: "miss", sc.COMPILE_FRAMES: 3})
        add(sc.SPAN_FIRST_BATCH, 31, 31 + rank, rank, **{sc.STEP: 0})
        for t in range(32, 4000, 10):
            add(sc.SPAN_TRAIN_WINDOW, t, t + 10, rank)
        add(
            sc.SPAN_CHECKPOINT_SAVE,
            1000,
            1002 + rank,
            rank,
            **{sc.CHECKPOINT_STEP: 500, sc.CHECKPOINT_MODE: "async", sc.CHECKPOINT_BYTES: 1e6},
        )
        add(sc.SPAN_CHECKPOINT_PERSIST, 1002, 1010 + rank, rank, **{sc.CHECKPOINT_STEP: 500})
        add(
            sc.SPAN_ATTEMPT,
            0,
            4002,
            rank,
            **{sc.ATTEMPT_END_REASON: sc.EndReasonValues.COMPLETED.value},
        )
    return spans


FLEET = {
    # job id: spans; offsets spread the jobs over two days, across hour and day edges
    "dlrm-a": worked_example("dlrm-a", BASE + 100, "dlrm", "ranking"),
    "dlrm-b": worked_example("dlrm-b", BASE + 3500, "dlrm", "ranking"),
    "bert-a": worked_example("bert-a", BASE + 86300, "bert", "nlp"),
    "anon": worked_example("anon", BASE + 7000, None, None),  # type: ignore[arg-type]
    "tt-a": _compile_job("tt-a", BASE + 40000),
}


@pytest.fixture(scope="module")
def fleet(postgres_server: Any) -> Iterator[tuple[Query, Any]]:
    """(read API's query layer, engine logged in as the read-only role) over the fleet."""
    url = postgres_server.create_database("grafana_fleet")
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store, window_s=10)
    for job_id, spans in FLEET.items():
        store.ingest(spans)
        pipeline.recompute(job_id)
    simulated = simulate_into_db(url, jobs=12, days=2, seed=7, start=BASE)
    assert len(simulated) >= 12  # training jobs, and the publish jobs some of them start
    SIMULATED.extend(t.job_id for t in simulated)
    assert grant_readonly(store.engine, ROLE, PASSWORD) == list(GRAFANA_VIEWS)
    grant_readonly(store.engine, ROLE, PASSWORD)  # twice: idempotent
    ro = create_engine(make_url(url).set(username=ROLE, password=PASSWORD))
    with ro.connect() as conn:  # "All" of the model and team variables, as Grafana lists them
        for name in ("model", "team"):
            sql = f"SELECT DISTINCT COALESCE({name}, '(none)') FROM ett_v1_jobs"
            ALL[name] = [r[0] for r in conn.exec_driver_sql(sql)]
    yield Query(pipeline, clock=lambda: BASE + 3 * 86400), ro
    ro.dispose()
    store.close()


def _targets() -> list[tuple[str, str, SqlQuery]]:
    out = []
    for uid, model in dashboard_models().items():
        for panel in model.panels or []:
            for target in getattr(panel, "targets", None) or []:
                if isinstance(target, SqlQuery):
                    out.append((uid, str(panel.title), target))
    return out


ALL: dict[str, list[str]] = {}
SIMULATED: list[str] = []


def _variables(uid: str) -> dict[str, Any]:
    return {
        "model": ALL.get("model", []),
        "team": ALL.get("team", []),
        "by": "model",
        "bucket": "1h",
        "job_id": "tt-a",
    }


def _run(
    engine: Any, sql: str, window: tuple[int, int] = (FROM, TO), **variables: Any
) -> tuple[list[str], list[tuple[Any, ...]]]:
    with engine.connect() as conn:
        result = conn.exec_driver_sql(
            expand(sql, *window, {**_variables(""), **variables}).replace("%", "%%")
        )
        return list(result.keys()), [tuple(r) for r in result]


TARGETS = _targets()


def test_the_dashboards_have_sql_panels() -> None:
    uids = {uid for uid, _, _ in TARGETS}
    assert {"ett-fleet", "ett-job", "ett-checkpoints"} <= uids
    assert len(TARGETS) >= 20


@pytest.mark.parametrize(
    ("uid", "title", "target"), TARGETS, ids=[f"{u}:{t}" for u, t, _ in TARGETS]
)
def test_every_panel_query_returns_its_columns(
    fleet: Any, uid: str, title: str, target: SqlQuery
) -> None:
    _, ro = fleet
    for job in ("tt-a", "dlrm-a"):  # tt-a has compiles and async checkpoints, dlrm-a a failure
        columns, rows = _run(ro, target.sql, job_id=job)
        assert tuple(columns) == target.columns, title
        assert rows or job != "tt-a", f"{uid} / {title}: no rows"
        if target.format == "time_series":
            assert all(r[0] is not None for r in rows)


def test_variable_queries_list_the_fleet(fleet: Any) -> None:
    _, ro = fleet
    for model in dashboard_models().values():
        for v in model.templating.list_val or []:
            if v.type_val == "query":
                _, rows = _run(ro, str(v.query))
                assert rows
    _, rows = _run(ro, "SELECT job_id FROM ett_v1_jobs ORDER BY job_id")
    assert set(FLEET) < {r[0] for r in rows}
    assert len(rows) == len(FLEET) + len(SIMULATED)  # and the simulated fleet


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-6)


@pytest.mark.parametrize(
    ("window", "by"),
    [((FROM, TO), "model"), ((int(BASE) + 200, int(BASE) + 3700), "team")],
)
def test_lost_hours_equal_the_read_api(fleet: Any, window: tuple[int, int], by: str) -> None:
    query, ro = fleet
    lo, hi = window
    for target, group_by in ((_fleet.LOST_BY_COMPONENT, "component"), (_fleet.LOST_BY_KEY, by)):
        with ro.connect() as conn:
            sql = expand(target.build().sql, lo, hi, {**_variables(""), "by": by})
            rows = conn.exec_driver_sql(sql.replace("%", "%%")).fetchall()
        api = query.lost_time(group_by, str(lo), str(hi))
        assert rows, "no lost time in the window"
        assert sorted((r[0] or "") for r in rows) == sorted((a["key"] or "") for a in api)
        by_key = {r[0]: r for r in rows}
        for a in api:
            row = by_key[a["key"]]
            assert _close(row[1] * 3600, a["idle_s"]), a
            assert _close(row[2] * 3600, a["failure_s"]), a
            assert _close(row[3] * 3600, a["lost_s"]), a


def test_an_hourly_panel_over_whole_hours_sums_to_the_read_api(fleet: Any) -> None:
    """The hour 23:00 to 00:00 holds dlrm-b's losses, and the next hour anon's: with
    ``$__timeFilter`` (a ``BETWEEN``) the panel also summed the bucket that starts at the
    range's end, anon's."""
    query, ro = fleet
    lo = int(BASE + 3500) // 3600 * 3600
    hi = lo + 3600
    with ro.connect() as conn:
        sql = expand(_fleet.LOST_BY_COMPONENT_OVER_TIME.build().sql, lo, hi, _variables(""))
        rows = conn.exec_driver_sql(sql.replace("%", "%%")).fetchall()
    api = query.lost_time("component", str(lo), str(hi))
    next_hour = query.lost_time("component", str(hi), str(hi + 3600))
    assert api and next_hour, "the fleet has losses in both hours"
    assert {float(r[0]) for r in rows} == {float(lo)}  # one bucket: the range's own hour
    assert _close(sum(r[2] for r in rows) * 3600, sum(a["lost_s"] for a in api))


def test_fleet_ett_of_a_model_over_a_day_equals_the_read_api(fleet: Any) -> None:
    """ETT % of model dlrm over the first day: the segments API, clipped, against the panel."""
    query, ro = fleet
    lo, hi = int(BASE), int(BASE) + 86400
    totals = {"productive": 0.0, "idle": 0.0, "failure": 0.0}
    for job in query.jobs(model="dlrm"):
        for s in query.segments(job["job_id"]):
            overlap = min(s["end"], hi) - max(s["start"], lo)
            if overlap > 0:
                totals[s["category"]] += overlap
    wall = sum(totals.values())
    with ro.connect() as conn:
        sql = expand(_fleet.SHARES.build().sql, lo, hi, {**_variables(""), "model": ["dlrm"]})
        ett, idle, failure = conn.exec_driver_sql(sql.replace("%", "%%")).one()
    assert _close(ett, 100 * totals["productive"] / wall)
    assert _close(idle, 100 * totals["idle"] / wall)
    assert _close(failure, 100 * totals["failure"] / wall)
    assert 0 < ett < 100


def test_job_drill_down_equals_the_read_api(fleet: Any) -> None:
    query, _ = fleet
    jobs = [j["job_id"] for j in query.jobs(limit=1000)]
    assert set(FLEET) < set(jobs)
    for job_id in jobs:
        _check_job(fleet, job_id)


def _check_job(
    fleet: Any, job_id: str, window: tuple[int, int] = (FROM, TO), **variables: Any
) -> None:
    query, ro = fleet
    job = query.job(job_id)
    for target in (_job.SHARES, _job.TIMES, _job.STATE, _job.ADVICE):
        t = target.build()
        columns, rows = _run(ro, t.sql, window, **{**variables, "job_id": job_id})
        (row,) = rows
        for column, value in zip(columns, row, strict=True):
            expected = {
                "checkpoint_interval_s": job["checkpoint_advice"]["interval_s"],
                "checkpoint_optimal_interval_s": job["checkpoint_advice"]["optimal_interval_s"],
                "checkpoint_saving_s": job["checkpoint_advice"]["saving_s"],
            }.get(column, job.get(column))
            if isinstance(expected, str):
                assert value == expected, column
            else:
                assert _close(value, expected), (column, value, expected)
    _, attempts = _run(ro, _job.ATTEMPTS.build().sql, window, **{**variables, "job_id": job_id})
    assert [r[0] for r in attempts] == [a["attempt"] for a in job["attempts"]]
    ttr = [r[-1] for r, a in zip(attempts, job["attempts"], strict=True) if a["failed"]]
    assert len(ttr) == len(job["ttr_s"])
    assert all(_close(a, b) for a, b in zip(ttr, job["ttr_s"], strict=True))
    _, lost = _run(ro, _job.LOST.build().sql, window, **{**variables, "job_id": job_id})
    assert {r[0]: r[1] + r[2] for r in lost}.keys() == job["lost_by_component"].keys()
    for component, idle, failure in lost:
        assert _close(idle + failure, job["lost_by_component"][component])
    _, timeline = _run(ro, _job.SEGMENTS.build().sql, window, **{**variables, "job_id": job_id})
    starts = sorted({s["start"] for s in query.segments(job_id)})
    assert len(timeline) == len(query.segments(job_id)) + 1
    assert timeline[0][0].timestamp() == pytest.approx(starts[0])
    assert timeline[-1][1] is None and timeline[-1][0].timestamp() == pytest.approx(job["end"])


def test_checkpoints_and_compiles_of_a_job(fleet: Any) -> None:
    _, ro = fleet
    _, rows = _run(ro, _job.CHECKPOINTS.build().sql, job_id="tt-a")
    ((attempt, step, mode, _, blocking, durable, size, ranks),) = rows
    assert (attempt, step, mode, ranks, size) == (0, 500, "async", 2, 1e6)
    assert blocking == pytest.approx(3.0) and durable == pytest.approx(11.0)
    # the fleet's panel counts that one save once, blocking over its ranks as the API does
    _, saves = _run(ro, _checkpoints.CHECKPOINT_SAVES.build().sql, model=["twotower"])
    ((key, mode, count, mean_blocking, max_blocking, mean_durable),) = saves
    assert (key, mode, count) == ("twotower", "async", 1)
    assert mean_blocking == max_blocking == pytest.approx(3.0)
    assert mean_durable == pytest.approx(11.0)
    _, compiles = _run(ro, _job.COMPILES.build().sql, job_id="tt-a")
    assert [(r[1], r[3], r[4], r[6]) for r in compiles] == [
        (0, "miss", 3, 24.0),
        (1, "miss", 3, 24.0),
    ]


def test_the_read_only_role_reads_the_views_and_nothing_else(fleet: Any) -> None:
    _, ro = fleet
    with ro.connect() as conn:
        for view in GRAFANA_VIEWS:
            conn.exec_driver_sql(f"SELECT * FROM {view} LIMIT 1").fetchall()
    for sql in (
        "SELECT * FROM spans LIMIT 1",
        "SELECT * FROM job_figures LIMIT 1",
        "DELETE FROM ett_v1_jobs",
        "CREATE TABLE x (a int)",
    ):
        with ro.connect() as conn, pytest.raises(DBAPIError):
            conn.exec_driver_sql(sql)


def test_ett_db_grant_readonly(fresh_postgres_url: str, monkeypatch, capsys) -> None:
    from ett_cli import main

    monkeypatch.setenv("VIEWER_PW", "pw-1")
    argv = ["db", "grant-readonly", "ett_viewer", "--db", fresh_postgres_url]
    assert main([*argv, "--password-env", "VIEWER_PW"]) == 0
    assert "ett_v1_jobs" in capsys.readouterr().out
    engine = create_engine(make_url(fresh_postgres_url).set(username="ett_viewer", password="pw-1"))
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT COUNT(*) FROM ett_v1_jobs").scalar_one() == 0
    engine.dispose()
    assert main(["db", "grant-readonly", "Bad-Name", "--db", fresh_postgres_url]) == 2
    assert main([*argv, "--password-env", "UNSET_VAR_X"]) == 2
    assert "not a plain identifier" in capsys.readouterr().err


# -- a real trainer run -------------------------------------------------------------------------

PLAIN_TRAINER = Path(__file__).resolve().parents[1] / "e2e" / "plain_trainer.py"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def trainer_run(
    postgres_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Query, Any, str, tuple[int, int]]]:
    """A real 2-rank DDP training run under torchrun (tests/e2e/plain_trainer.py: async DCP
    checkpoints, an exception on rank 1 at step 15, a restart that resumes from step 10) sent to
    a live `ett serve` on PostgreSQL; (query layer, read-only engine, job id, time window)."""
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"torchrun is missing: {exc}")
        pytest.skip(f"torchrun is missing ({exc}): `make setup` installs torch")
    root = tmp_path_factory.mktemp("grafana-trainer")
    url = postgres_server.create_database("grafana_trainer")
    collector = start_collector(root / "home", db_url=url)
    job_id = f"grafana-trainer-{os.getpid()}"
    env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
        "ETT_MODEL": "plain-ddp",
        "ETT_TEAM": "grafana",
    }
    for var in ("ETT_ALLOCATED_AT", "ETT_ATTEMPT", "ETT_DISABLED", "RANK", "WORLD_SIZE"):
        env.pop(var, None)
    started = int(time.time()) - 60
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "--monitor-interval",
        "0.1",
        str(PLAIN_TRAINER),
        "--ckpt-dir",
        str(root / "ckpt"),
        "--clock-dir",
        str(root / "clock"),
        "--steps",
        "30",
        "--ckpt-every",
        "10",
        "--fail",
        "0:1:exception:15",
    ]
    try:
        out = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
        # the collector has seen both attempts end, in figures of every span the trainer sent
        collector.wait_for_job(
            job_id, lambda j: j["state"] == "completed" and len(j["attempts"]) == 2
        )
    finally:
        collector.stop()
    store = Store(url)
    grant_readonly(store.engine, ROLE, PASSWORD)
    ro = create_engine(make_url(url).set(username=ROLE, password=PASSWORD))
    yield Query(Pipeline(store)), ro, job_id, (started, int(time.time()) + 60)
    ro.dispose()
    store.close()


def test_panels_of_a_real_trainer_run_equal_the_read_api(trainer_run: Any) -> None:
    query, ro, job_id, window = trainer_run
    job = query.job(job_id)
    assert job["failures"] == 1 and job["model"] == "plain-ddp"  # the run we meant
    mine = {"model": ["plain-ddp"], "team": ["grafana"]}  # this database's "All"
    _check_job((query, ro), job_id, window, **mine)  # figures, attempts, TTR, lost, the timeline
    activity = Overview(query).activity(job_id)
    _, rows = _run(ro, _job.CHECKPOINTS.build().sql, window, **mine, job_id=job_id)
    assert [(r[0], r[1]) for r in rows] == [
        (c["attempt"], c["step"]) for c in activity["checkpoints"]
    ]
    for (_, _, mode, _, blocking, durable, _, ranks), c in zip(
        rows, activity["checkpoints"], strict=True
    ):
        assert (mode, ranks) == ("async", 2)
        assert _close(blocking, c["blocking_s"])
        assert c["persist_s"] is not None and _close(durable, c["blocking_s"] + c["persist_s"])
    # and the fleet panels count the run: its model's ETT over the window, as the API's figures
    with ro.connect() as conn:
        sql = expand(_fleet.SHARES.build().sql, *window, {**_variables(""), **mine})
        ett, _, _ = conn.exec_driver_sql(sql.replace("%", "%%")).one()
    assert _close(ett, job["ett_pct"])
