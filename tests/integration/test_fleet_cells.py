"""The Fleet page's rollup (``job_totals``, ``job_cells``, ``fleet_cells``) stays equal to the
segments it sums while jobs are saved again and again (a live job growing, a job changing state
or model), on SQLite and PostgreSQL; the migration's backfill builds the same cells; and the
fleet answer read from it equals the row-by-row reference of ``test_fleet_overview``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, text

from ett_collector.domain import summarize
from ett_collector.storage import Store
from ett_collector.storage._fleet_cells import job_cells_of
from ett_collector.storage._migrate import alembic_config
from ett_collector.storage._timeseries import fleet_overview
from ett_simulator import simulate_into_db
from tests.conftest import BACKENDS
from tests.integration.test_fleet_overview import _close, _reference

START = 1_790_000_000.0
DAYS = 2.0


def _scratch(engine: Engine) -> dict[tuple[Any, ...], list[float]]:
    """Fleet cells summed from scratch from the stored segments and summaries."""
    out: dict[tuple[Any, ...], list[float]] = {}
    with engine.connect() as conn:
        figures = conn.execute(text("SELECT job_id, model, team, state, summary FROM job_figures"))
        for job_id, model, team, state, summary in figures.all():
            ranks = {int(a["attempt"]): len(a["ranks"]) for a in json.loads(summary)["attempts"]}
            rows = conn.execute(
                text(
                    'SELECT attempt, start, "end", category, component, share FROM segments '
                    "WHERE job_id = :j ORDER BY seg, part"
                ),
                {"j": job_id},
            ).all()
            cells, _ = job_cells_of([tuple(r) for r in rows], ranks)
            for (g, t, cat, comp), (sec, gpu) in cells.items():
                cell = out.setdefault((g, t, model or "", team or "", state, cat, comp), [0, 0, 0])
                cell[0] += sec
                cell[1] += gpu
                cell[2] += 1
    return out


def _stored(engine: Engine) -> dict[tuple[Any, ...], list[float]]:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT grain, t, model, team, state, category, component, seconds, gpu_s, jobs "
                "FROM fleet_cells"
            )
        ).all()
    return {tuple(r[:7]): [r[7], r[8], r[9]] for r in rows}


def _assert_same(got: dict[tuple[Any, ...], list[float]], want: dict[Any, list[float]]) -> None:
    assert set(got) == set(want), set(got) ^ set(want)
    for key, (sec, gpu, jobs) in got.items():
        w = want[key]
        assert _close(sec, w[0]) and _close(gpu, w[1]) and jobs == w[2], (key, got[key], w)


@pytest.fixture(scope="module", params=BACKENDS)
def fleet(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Store:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_server").create_database()
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('cells') / 'collector.db'}"
    simulate_into_db(url, jobs=10, days=DAYS, seed=7, start=START)
    return Store(url)


def test_cells_follow_every_save_and_the_backfill_builds_the_same(fleet: Store) -> None:
    store = fleet
    assert _stored(store.engine), "the simulated fleet filled no cell: the test proves nothing"
    _assert_same(_stored(store.engine), _scratch(store.engine))
    job_ids = store.job_ids()[:6]
    for i, job_id in enumerate(job_ids):
        spans = store.load_spans(job_id)
        cut = min(s.start for s in spans) + 0.6 * (
            max(s.end for s in spans) - min(s.start for s in spans)
        )
        early = [s for s in spans if s.end <= cut]
        seq = store.dirty_seq(job_id)
        # the job as it was mid-run (live: running or presumed dead), then under another model
        assert store.save_summary(summarize(early, cut + 30.0), seq, cut + 30.0)
        moved = dataclasses.replace(summarize(spans, max(s.end for s in spans)), model=f"m{i % 2}")
        assert store.save_summary(moved, seq, cut + 60.0)
        if i % 3 == 0:  # and some back to their own figures
            full = summarize(spans, max(s.end for s in spans))
            assert store.save_summary(full, seq, cut + 90.0)
    incremental = _stored(store.engine)
    _assert_same(incremental, _scratch(store.engine))
    assert {"m0", "m1"} <= {k[2] for k in incremental}, "the model change moved no cell"

    # the answer over the moved cells equals the row-by-row reference (day buckets, cut window)
    since, until = START + 0.3 * 86400 + 1234.5, START + 1.7 * 86400
    got = fleet_overview(store.engine, since, until, "model", "day", limit=1000)
    want = _reference(
        str(store.engine.url.render_as_string(hide_password=False)), since, until, "model", "day"
    )
    assert {(r["t"], r["key"]) for r in got["series"]} == set(want["series"])
    for r in got["series"]:
        w = want["series"][(r["t"], r["key"])]
        assert all(_close(r[f"{c}_s"], w[c]) for c in ("productive", "idle", "failure")), r
    assert [w["job_id"] for w in got["worst_jobs"]] == [j for j, _ in want["worst"]]
    for w, (_, (window_s, lost_s, gpu_s)) in zip(got["worst_jobs"], want["worst"], strict=True):
        assert _close(w["window_s"], window_s) and _close(w["lost_s"], lost_s)
        assert math.isclose(w["lost_gpu_h"], gpu_s / 3600, rel_tol=1e-9, abs_tol=1e-9)

    # the migration's backfill, from the segments alone, builds the same cells
    cfg = alembic_config()
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")
    store.upgrade()
    _assert_same(_stored(store.engine), incremental)


DAY = 86400.0
MIDNIGHT = (START // DAY + 1) * DAY  # the first midnight (UTC) inside the fleet


@pytest.mark.parametrize(
    ("since", "until", "bucket"),
    [
        (MIDNIGHT - 4 * 3600 - 17.5, MIDNIGHT + 2 * 3600 + 3.25, "day"),  # no whole day
        (MIDNIGHT - 3 * 3600, MIDNIGHT + 5 * 3600, "hour"),  # on hour edges: no partial hour
        (MIDNIGHT + 600.5, MIDNIGHT + 2400.0, "hour"),  # inside one hour
        (START - DAY, START + 3 * DAY, None),  # wider than the fleet: every job inside
    ],
    ids=["6h-across-midnight-by-day", "aligned", "within-an-hour", "whole-fleet"],
)
def test_answer_equals_the_reference_at_any_window_edge(
    fleet: Store, since: float, until: float, bucket: str | None
) -> None:
    got = fleet_overview(fleet.engine, since, until, "team", bucket, limit=1000)
    url = fleet.engine.url.render_as_string(hide_password=False)
    want = _reference(url, since, until, "team", bucket)
    assert want["series"], "the window holds no segment: the test would prove nothing"
    assert {(r["t"], r["key"]) for r in got["series"]} == set(want["series"])
    for r in got["series"]:
        w = want["series"][(r["t"], r["key"])]
        assert all(_close(r[f"{c}_s"], w[c]) for c in ("productive", "idle", "failure")), r
    assert {(r["t"], r["component"]) for r in got["lost_by_component"]} == set(want["lost"])
    for r in got["lost_by_component"]:
        assert _close(r["lost_gpu_h"], want["lost"][(r["t"], r["component"])][2] / 3600), r
    assert [(w["job_id"], round(w["lost_gpu_h"], 6)) for w in got["worst_jobs"]] == [
        (j, round(v[2] / 3600, 6)) for j, v in want["worst"]
    ]


def test_concurrent_saves_of_different_jobs_keep_the_cells_exact(fleet: Store) -> None:
    """Saves of different jobs at once move shared fleet cells (same hours, models, teams):
    no deadlock, no lost update."""
    store = fleet
    job_ids = store.job_ids()
    work = []
    for job_id in job_ids:
        spans = store.load_spans(job_id)
        end = max(s.end for s in spans)
        cut = end - 0.5 * (end - min(s.start for s in spans))
        early = summarize([s for s in spans if s.end <= cut], cut + 30.0)
        work.append((job_id, early, summarize(spans, end), store.dirty_seq(job_id), end))

    def save(item: tuple[str, Any, Any, int, float]) -> None:
        _, early, full, seq, end = item
        for i in range(3):
            assert store.save_summary(early if i % 2 == 0 else full, seq, end + i)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(save, work))
    _assert_same(_stored(store.engine), _scratch(store.engine))
