"""The fleet answer (``GET /api/v1/fleet``, ``ett fleet``) summed in SQL equals a row-by-row
reference over the same segments, on SQLite and PostgreSQL, for every split, bucket and filter.

The reference reads every segment row of the window and cuts it at bucket edges in Python (the
first implementation of the fleet answer); the SQL version groups inside the database.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text

from ett_collector.storage._timeseries import _split, bucket_seconds, fleet_overview
from ett_simulator import simulate_into_db
from tests.conftest import BACKENDS
from tests.support.reports import computed_sqlite
from tests.support.worked_example import worked_example

START = 1_790_000_000.0  # a fixed fleet start, so the buckets are the same on every run
DAYS = 2.0


def _reference(
    url: str, since: float, until: float, by: str, bucket: str | None, **flt: str | None
) -> dict[str, Any]:
    size = bucket_seconds(since, until, bucket)
    engine = create_engine(url)
    with engine.connect() as conn:
        jobs = {}
        for job_id, state, ett, mdl, tm, summary in conn.execute(
            text(
                "SELECT job_id, state, ett_pct, model, team, summary FROM job_figures "
                'WHERE "end" > :lo AND alloc < :hi'
            ),
            {"lo": since, "hi": until},
        ):
            if any(
                v is not None and {"model": mdl, "team": tm, "state": state}[k] != v
                for k, v in flt.items()
            ):
                continue
            ranks = {
                int(a["attempt"]): max(1, len(a.get("ranks") or ()))
                for a in json.loads(summary).get("attempts", [])
            }
            jobs[job_id] = {"state": state, "ett_pct": ett, "model": mdl, "ranks": ranks}
        rows = conn.execute(
            text(
                'SELECT s.job_id, s.attempt, s.start, s."end", s.category, s.component, s.share,'
                " s.model, s.team, f.state FROM segments s LEFT JOIN job_figures f"
                ' ON f.job_id = s.job_id WHERE s."end" > :lo AND s.start < :hi'
            ),
            {"lo": since, "hi": until},
        ).all()
    engine.dispose()
    series: dict[Any, dict[str, float]] = {}
    lost: dict[Any, list[float]] = {}
    per_job: dict[str, list[float]] = {}
    for job_id, attempt, start, end, category, component, share, mdl, tm, state in rows:
        if any(
            v is not None and {"model": mdl, "team": tm, "state": state}[k] != v
            for k, v in flt.items()
        ):
            continue
        ranks = jobs.get(job_id, {}).get("ranks", {}).get(attempt, 1)
        key = mdl if by == "model" else tm if by == "team" else None
        acc = per_job.setdefault(job_id, [0.0, 0.0, 0.0])
        for t, seconds in _split(max(start, since), min(end, until), size):
            part = seconds * share
            series.setdefault((t, key), {"productive": 0.0, "idle": 0.0, "failure": 0.0})
            series[(t, key)][category] += part
            acc[0] += part
            if category != "productive":
                acc[1] += part
                acc[2] += part * ranks
                cell = lost.setdefault((t, component or "other"), [0.0, 0.0, 0.0])
                cell[0 if category == "idle" else 1] += part
                cell[2] += part * ranks
    worst = sorted(
        ((j, v) for j, v in per_job.items() if v[2] > 0), key=lambda kv: (-kv[1][2], kv[0])
    )
    return {"series": series, "lost": lost, "worst": worst, "jobs": jobs}


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@pytest.fixture(scope="module", params=BACKENDS)
def fleet_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_server").create_database()
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('fleet') / 'collector.db'}"
    simulate_into_db(url, jobs=14, days=DAYS, seed=11, start=START)
    return url


CASES = [
    {"by": "fleet", "bucket": None},
    {"by": "model", "bucket": "hour"},
    {"by": "team", "bucket": "day", "state": "completed"},
    {"by": "fleet", "bucket": "hour", "model": "dlrm-large"},
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_sql_fleet_answer_equals_the_row_by_row_reference(
    fleet_url: str, case: dict[str, Any]
) -> None:
    # a window that cuts the fleet (segments clipped at both ends, buckets cut mid-segment)
    since, until = START + 0.3 * 86400 + 1234.5, START + 1.7 * 86400
    flt = {k: case.get(k) for k in ("model", "team", "state")}
    got = fleet_overview(
        create_engine(fleet_url), since, until, case["by"], case["bucket"], limit=1000, **flt
    )
    want = _reference(fleet_url, since, until, case["by"], case["bucket"], **flt)
    assert want["series"], "the window holds no segment: the test would prove nothing"
    assert {(r["t"], r["key"]) for r in got["series"]} == set(want["series"])
    for r in got["series"]:
        w = want["series"][(r["t"], r["key"])]
        assert all(_close(r[f"{c}_s"], w[c]) for c in ("productive", "idle", "failure")), r
    assert {(r["t"], r["component"]) for r in got["lost_by_component"]} == set(want["lost"])
    for r in got["lost_by_component"]:
        idle, failure, gpu = want["lost"][(r["t"], r["component"])]
        assert _close(r["idle_s"], idle) and _close(r["failure_s"], failure)
        assert _close(r["lost_gpu_h"], gpu / 3600), r
    assert [w["job_id"] for w in got["worst_jobs"]] == [j for j, _ in want["worst"]]
    pairs = zip(got["worst_jobs"], want["worst"], strict=True)
    for w, (job_id, (window_s, lost_s, gpu_s)) in pairs:
        assert _close(w["window_s"], window_s) and _close(w["lost_s"], lost_s)
        assert _close(w["lost_gpu_h"], gpu_s / 3600)
        job = want["jobs"].get(job_id, {})
        assert (w["state"], w["model"], w["ett_pct"]) == (
            job.get("state"),
            job.get("model"),
            job.get("ett_pct"),
        )


def test_a_job_that_lost_nothing_in_the_window_is_not_among_the_worst(tmp_path: Path) -> None:
    """Two runs of the worked example 40 s apart, seen over [60, 140] of the first: it only
    trained then, the second was still starting (30 s lost). The first was listed as a worst
    job with 0 s lost."""
    base = 1_790_000_000.0
    url = computed_sqlite(
        tmp_path, worked_example("trains", base) + worked_example("starts", base + 40)
    )
    got = fleet_overview(create_engine(url), base + 60, base + 140, "fleet", None, limit=10)
    assert [(w["job_id"], w["lost_s"]) for w in got["worst_jobs"]] == [("starts", 30.0)]
