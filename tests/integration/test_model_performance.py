"""Per-model performance (issue 26) where the fleet reads it: ``GET /api/v1/models/performance``
(the Fleet page's ranking by slow time) and the ``ett_model_*`` gauges on ``/metrics``, on a
real SQLite store."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ett_collector.alerts.settings import AlertSettings
from ett_collector.api import create_app
from ett_collector.read.performance_models import ModelPerformance
from ett_collector.read.query import Query
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.performance_seed import SAMPLES_PER_STEP, SLOW_LOSS_S, perf_job


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'models.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    t0 = time.time() - 3600
    spans = perf_job("fast-1", "fast", t0) + perf_job("fast-2", "fast", t0, straggler=False)
    spans += perf_job("slow-1", "slowpoke", t0, slow=4) + perf_job("slow-2", "slowpoke", t0, slow=2)
    pipeline.ingest(spans)
    pipeline.recompute_dirty()
    store.close()
    return url


def _get(url: str, paths: list[str], max_models: int = 200) -> list[httpx.Response]:
    store = Store(url)
    alerts = AlertSettings(metrics_max_pairs=max_models)
    app = create_app(Settings(db_url=url, alerts=alerts), Pipeline(store))

    async def read() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [await client.get(p) for p in paths]

    try:
        return asyncio.run(read())
    finally:
        store.close()


def test_models_are_ranked_by_slow_time(db: str) -> None:
    ok, team, bad = _get(
        db,
        [
            "/api/v1/models/performance?since=7d",
            "/api/v1/models/performance?team=nobody",
            "/api/v1/models/performance?since=tomorrow",
        ],
    )
    assert ok.status_code == 200, ok.text
    body = ok.json()
    assert (body["jobs_read"], body["truncated"]) == (4, False)
    slow, fast = body["models"]
    assert (slow["model"], fast["model"]) == ("slowpoke", "fast")
    assert slow["slow_s"] == pytest.approx((4 + 2) * SLOW_LOSS_S)  # median over ranks, summed
    assert fast["slow_s"] == pytest.approx(0.0) and fast["slow_pct"] == pytest.approx(0.0)
    assert slow["slow_pct"] == pytest.approx(100 * 30 / slow["stepping_s"], abs=1e-4)
    assert slow["stepping_s"] == pytest.approx(2 * 29 * 10.0)  # windows after warm-up
    assert fast["samples_per_s_per_rank"] == pytest.approx(100 * SAMPLES_PER_STEP / 10)
    assert slow["samples_per_s_per_rank"] < fast["samples_per_s_per_rank"]
    assert fast["ideal_step_s"] == pytest.approx(0.1)
    assert (fast["straggler_jobs"], slow["straggler_jobs"]) == (1, 2)
    assert fast["straggler_score"] == pytest.approx(2.0)  # the highest of its jobs' attempts
    assert team.json()["models"] == []
    assert bad.status_code == 400


def test_metrics_carry_per_model_gauges_labelled_by_model_only(db: str) -> None:
    (text,) = _get(db, ["/metrics"])
    families = {f.name: f for f in text_string_to_metric_families(text.text)}
    slow = {s.labels["model"]: s.value for s in families["ett_model_slow_seconds"].samples}
    assert slow == pytest.approx({"slowpoke": 30.0, "fast": 0.0})
    rate = families["ett_model_samples_per_second_per_rank"].samples
    assert {s.labels["model"]: s.value for s in rate}["fast"] == pytest.approx(320.0)
    ratio = families["ett_model_slow_ratio"].samples
    assert all(0.0 <= s.value <= 1.0 for s in ratio) and len(ratio) == 2
    score = {s.labels["model"]: s.value for s in families["ett_model_straggler_score"].samples}
    assert score == pytest.approx({"slowpoke": 2.0, "fast": 2.0})  # fast-1's rank 1 computes 2x
    rank_s = {s.labels["model"]: s.value for s in families["ett_model_rank_seconds"].samples}
    assert rank_s["fast"] > 0 and set(rank_s) == {"slowpoke", "fast"}
    names = ("ett_model_slow_seconds", "ett_model_slow_ratio", "ett_model_performance_jobs")
    for name in (*names, "ett_model_straggler_score", "ett_model_rank_seconds"):
        assert all(set(s.labels) == {"model"} for s in families[name].samples), name


def test_models_past_the_bound_are_left_out_and_counted(db: str) -> None:
    (whole,) = _get(db, ["/metrics"])
    (bounded,) = _get(db, ["/metrics"], max_models=1)
    counts = []
    for text in (whole.text, bounded.text):
        families = {f.name: f for f in text_string_to_metric_families(text)}
        (left_out,) = families["ett_model_performance_models_left_out"].samples
        jobs = families["ett_model_performance_jobs"].samples
        counts.append((left_out.value, {s.labels["model"]: s.value for s in jobs}))
    assert counts[0] == (0, {"fast": 2, "slowpoke": 2})
    assert counts[1] == (1, {"fast": 2})  # two jobs each: the first name is kept


def test_job_facts_are_read_once_per_recompute(db: str) -> None:
    store = Store(db)
    try:
        models = ModelPerformance(Query(Pipeline(store)), cache_s=0.0)
        reads = 0
        load = store.load_performance

        def counted(job_id: str) -> object:
            nonlocal reads
            reads += 1
            return load(job_id)

        store.load_performance = counted  # type: ignore[method-assign,assignment]
        first = models.models()
        again = models.models()
        assert first["models"] == again["models"]
        assert reads == 4  # the second answer reused every job's facts
    finally:
        store.close()
