"""Every view of a job whose raw spans (then runs) retention pruned answers, on real SQLite.

Before, ``/activity`` read the job's spans and took none for "no job": after a prune of spans
and runs it answered 404 ``no job 'ID'`` while ``/api/v1/jobs/ID`` and ``/segments`` answered
200 (the dashboard's Job page then lost every section after its headline figures), and after a
spans-only prune it answered empty lists without saying why. Now it answers 200, its lists
empty, ``spans_pruned`` true and ``spans_pruned_at`` when the prune began; 404 stays for a job
the store does not hold.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.storage._retention import Policy, Retention
from ett_collector.write.pipeline import Pipeline
from tests.support.worked_example import worked_example

DAY = 86400.0
NOW = time.time()
VIEWS = ("", "/segments", "/activity", "/performance")


def _get(store: Store, url: str, paths: list[str]) -> dict[str, httpx.Response]:
    app = create_app(Settings(db_url=url), Pipeline(store))  # a new app: no answer cached

    async def read() -> dict[str, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return {p: await client.get("/api/v1/jobs/" + p) for p in paths}

    return asyncio.run(read())


def _prune(store: Store, **periods: float) -> None:
    policy = Policy(
        **{"spans_s": None, "runs_s": None, "figures_s": None, "alerts_s": None, **periods},
        quiet_s=0.0,
    )
    Retention(store.engine, policy, pause_s=0, clock=time.time).run()


@pytest.fixture
def store(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'collector.db'}"
    s = Store(url, raw_window_retention_s=0.0)  # windows folded into runs at once
    s.upgrade()
    pipeline = Pipeline(s, clock=lambda: NOW)
    pipeline.ingest(worked_example("old", base=NOW - 40 * DAY))
    pipeline.ingest(worked_example("recent", base=NOW - 1000))
    pipeline.recompute_dirty()
    try:
        yield s, url
    finally:
        s.close()


def test_a_pruned_job_answers_every_view_and_says_its_spans_are_gone(store: Any) -> None:
    s, url = store
    before = _get(s, url, ["old/activity"])["old/activity"].json()
    assert before["checkpoints"] and before["startup"] and before["spans_pruned"] is False
    assert before["spans_pruned_at"] is None
    pruned_from = time.time()

    for periods in ({"spans_s": 30 * DAY}, {"spans_s": 30 * DAY, "runs_s": 30 * DAY}):
        _prune(s, **periods)  # the raw spans; then the runs too (the probe's 404)
        got = _get(s, url, [f"old{v}" for v in VIEWS] + ["recent/activity"])
        assert {p: r.status_code for p, r in got.items()} == dict.fromkeys(got, 200), periods
        act = got["old/activity"].json()
        assert act["spans_pruned"] is True
        assert pruned_from <= act["spans_pruned_at"] <= time.time()
        lists = {k: v for k, v in act.items() if not k.startswith("spans_pruned")}
        assert lists.keys() == before.keys() - {"spans_pruned", "spans_pruned_at"}
        assert not any(lists.values())  # nothing read from what the prune left
        assert got["old/segments"].json()  # the timeline's segments are kept
        recent = got["recent/activity"].json()  # a job within its retention: untouched
        assert recent["checkpoints"] and recent["spans_pruned"] is False


def test_an_unknown_job_is_404_in_every_view(store: Any) -> None:
    s, url = store
    got = _get(s, url, [f"nosuch{v}" for v in VIEWS])
    assert {p: r.status_code for p, r in got.items()} == dict.fromkeys(got, 404)
    assert got["nosuch/activity"].json()["error"] == "no job 'nosuch'"


def test_a_job_pruned_whole_is_404(store: Any) -> None:
    s, url = store
    _prune(s, spans_s=30 * DAY, runs_s=30 * DAY, figures_s=30 * DAY)
    got = _get(s, url, [f"old{v}" for v in VIEWS])
    assert {p: r.status_code for p, r in got.items()} == dict.fromkeys(got, 404)
