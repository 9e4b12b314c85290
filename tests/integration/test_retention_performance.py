"""A job whose raw spans retention pruned keeps its "Inside the loop" figures, in every view.

A simulated fleet (checkpoint saves, evals, restarts, a straggler; the last 10 minutes of each
job's windows still raw) on real SQLite and PostgreSQL. Before, the views computed from what the
prune left: after ``ETT_RETAIN_SPANS=3d ett db prune``, a job's slow time went 71 -> 260 s in
``ett report --json``, ``/performance`` and ``/models/performance``, and the job object
disagreed with its own performance view. Now every view answers the same before and after a
spans-only prune, and after the runs' prune too, less the throughput series, which goes with
the runs.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett_cli import main
from ett_collector.api import create_app
from ett_collector.domain._performance import performance
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.storage._series import job_points
from ett_collector.write.pipeline import Pipeline
from ett_simulator import simulate_into_db
from tests.conftest import BACKENDS

DAY = 86400.0
MODELS_SINCE = "/api/v1/models/performance?since=30d"


@pytest.fixture(params=BACKENDS)
def fleet(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, list[str]]:
    """A database holding a simulated fleet of two days that ended a week ago, and its jobs."""
    for name in ("ETT_RETAIN_SPANS", "ETT_RETAIN_RUNS", "ETT_RETAIN_FIGURES", "ETT_WINDOW_S"):
        monkeypatch.delenv(name, raising=False)
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'fleet.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    straggler = "model=dlrm-large rank=1 factor=1.6 at=2026-01-01T00:00:00Z"
    truths = simulate_into_db(
        url, jobs=8, days=2, seed=3, start=time.time() - 9 * DAY, stragglers=[straggler]
    )
    return url, [t.job_id for t in truths]


def _views(url: str, jobs: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """Every answer that carries a job's performance figures: the job object's block, the
    performance view at two sizes, ``ett report --json``, and the per-model view."""
    store = Store(url)
    app = create_app(Settings(db_url=url), Pipeline(store))  # a new app: no answer cached

    async def read() -> dict[str, Any]:
        out: dict[str, Any] = {}
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            for job in jobs:
                for path in (f"/{job}", f"/{job}/performance", f"/{job}/performance?buckets=7"):
                    r = await client.get("/api/v1/jobs" + path)
                    assert r.status_code == 200, (path, r.text)
                    body = r.json()
                    out[path] = body.get("performance") if path == f"/{job}" else body
            out[MODELS_SINCE] = (await client.get(MODELS_SINCE)).json()
        return out

    try:
        out = asyncio.run(read())
    finally:
        store.close()
    for job in jobs:
        assert main(["report", job, "--db", url, "--json"]) == 0
        out[f"report {job}"] = json.loads(capsys.readouterr().out).get("performance")
    out[MODELS_SINCE].pop("until")  # the answer's own instant
    out[MODELS_SINCE].pop("since")
    return out


def _prune(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], **retain: str
) -> None:
    """``ett db prune`` with windows of 10 ms: an ended job is quiet (3 windows) at once."""
    with monkeypatch.context() as env:
        env.setenv("ETT_WINDOW_S", "0.01")
        for kind, period in retain.items():
            env.setenv(f"ETT_RETAIN_{kind.upper()}", period)
        assert main(["db", "prune", "--db", url]) == 0
    assert capsys.readouterr().out.startswith("deleted: ")


def _left_behind(url: str, jobs: list[str]) -> list[str]:
    """The jobs whose figures, computed from what the prune left, are not those kept."""
    store = Store(url)
    changed = []
    for job in jobs:
        spans, rows = store.load_performance(job)
        assert not spans  # the raw spans are gone
        left = performance(job_points(spans, rows, store.compactor.retention_s), spans)
        if left != store.kept_performance(job).figures:  # type: ignore[union-attr]
            changed.append(job)
    store.close()
    return changed


def _without_series(views: dict[str, Any]) -> dict[str, Any]:
    return {k: {**v, "series": None} if "series" in (v or {}) else v for k, v in views.items()}


def test_a_spans_only_prune_changes_no_performance_figure(
    fleet: tuple[str, list[str]], monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    url, jobs = fleet
    before = _views(url, jobs, capsys)
    assert before[MODELS_SINCE]["models"] and any(
        (before[f"/{j}/performance"]["slow_s"] or 0) > 0 for j in jobs
    )
    assert any(before[f"/{j}/performance"]["straggler"] for j in jobs)

    _prune(url, monkeypatch, capsys, spans="3d")
    assert _left_behind(url, jobs)  # what was left would have given other figures
    assert _views(url, jobs, capsys) == before

    _prune(url, monkeypatch, capsys, spans="3d", runs="3d")  # the series goes with the runs
    after = _views(url, jobs, capsys)
    assert all(after[f"/{j}/performance"]["series"] == [] for j in jobs)
    assert _without_series(after) == _without_series(before)
