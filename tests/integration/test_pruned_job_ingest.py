"""Spans for a job whose raw spans retention pruned, on real SQLite and PostgreSQL.

An operator probe: a job pruned while silent that then sent spans again (a stalled trainer, or a
job re-run under the same ``ETT_JOB_ID`` past ``ETT_RETAIN_SPANS``) had them acknowledged and
stored, its figures frozen with a failure for good (``failed_jobs`` 1) and no pass ever deleting
them. Now ingest refuses them alone (OTLP partial success naming the job and what to do), and
what an older collector stored is deleted by the next pass, clearing the failure.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.read.metrics import CollectorMetrics
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.storage import _store as store_module
from ett_collector.storage._retention import RUNS_GONE, SPANS_GONE, Policy, Retention
from ett_collector.write.pipeline import Pipeline
from tests.support.spans import phase, window
from tests.support.worked_example import worked_example

DAY = 86400.0
NOW = time.time()
OLD = NOW - 40 * DAY
PG_INIT = sc.startup_span_name(sc.StartupPhaseValues.PG_INIT)


@pytest.fixture
def store(folding_store: Store) -> Store:
    """An upgraded store that folds windows into runs at once (as the retention tests')."""
    return folding_store


def _pruned(store: Store, runs_too: bool = False) -> Pipeline:
    """Job ``old`` (40 days old) with its raw spans pruned (and its runs, ``runs_too``); job
    ``recent`` kept."""
    pipeline = Pipeline(store, clock=lambda: NOW, settle_s=0)
    pipeline.ingest(worked_example("old", base=OLD))
    pipeline.ingest(worked_example("recent", base=NOW - 1000))
    pipeline.recompute_dirty()
    _retention(store, runs_too).run()
    assert _level(store, "old") == (RUNS_GONE if runs_too else SPANS_GONE)
    return pipeline


def _retention(store: Store, runs_too: bool = False) -> Retention:
    policy = Policy(
        spans_s=30 * DAY,
        runs_s=30 * DAY if runs_too else None,
        figures_s=None,
        alerts_s=None,
        quiet_s=0.0,
    )
    return Retention(store.engine, policy, batch_rows=7, pause_s=0)


def _level(store: Store, job: str) -> int:
    with store.engine.connect() as conn:
        sql = text("SELECT pruned FROM jobs WHERE job_id = :j")
        return int(conn.execute(sql, {"j": job}).scalar_one())


def _rows(store: Store, table: str, job: str) -> int:
    with store.engine.connect() as conn:
        sql = text(f"SELECT count(*) FROM {table} WHERE job_id = :j")
        return int(conn.execute(sql, {"j": job}).scalar_one())


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _resource(job: str, spans: list[tuple[int, float]]) -> dict[str, Any]:
    """One resource of ``job`` (attempt 0, rank 0) with a startup span per ``(n, start)``."""
    return {
        "resource": {
            "attributes": [_attr(sc.JOB_ID, job), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, 0)]
        },
        "scopeSpans": [
            {
                "spans": [
                    {
                        "traceId": f"{n:032x}",
                        "spanId": f"{n:016x}",
                        "name": PG_INIT,
                        "startTimeUnixNano": str(int(start * 1e9)),
                        "endTimeUnixNano": str(int((start + 5) * 1e9)),
                    }
                    for n, start in spans
                ]
            }
        ],
    }


def _post(pipeline: Pipeline, metrics: CollectorMetrics, body: dict[str, Any]) -> httpx.Response:
    """POST ``body`` to ``/v1/traces`` of the real app (JSON), its worker not started."""
    url = pipeline.store.engine.url.render_as_string(hide_password=False)
    app = create_app(Settings(db_url=url), pipeline, metrics)

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(
                "/v1/traces",
                content=json.dumps(body),
                headers={"Content-Type": "application/json"},
            )

    return asyncio.run(post())


def test_spans_of_a_pruned_job_are_refused_alone(store: Store) -> None:
    pipeline = _pruned(store)
    before = (store.get_job("old"), store.get_segments("old"), store.span_counts())
    metrics = CollectorMetrics()
    body = {
        "resourceSpans": [
            _resource("old", [(1, OLD + 10_000), (2, OLD + 10_010)]),  # the pruned job
            _resource("fresh", [(3, NOW - 60)]),  # another job of the same request
        ]
    }
    answer = _post(pipeline, metrics, body)
    assert answer.status_code == 200, answer.text
    partial = answer.json()["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 2, partial
    message = partial["errorMessage"]
    when = time.strftime("%Y-%m-%d", time.gmtime(store.spans_pruned_at("old") or 0))
    assert "2 span(s) of job 'old' refused" in message, message
    assert f"raw spans were pruned at {when}" in message, message
    assert "send them under a new job id (ETT_JOB_ID)" in message, message

    assert len(store.load_spans("fresh")) == 1  # the rest of the request is stored
    assert _rows(store, "spans", "old") == 0  # nothing stored for the pruned job
    assert not store.is_dirty("old") and store.recompute_failure("old") is None
    pipeline.recompute_dirty()
    after = (store.get_job("old"), store.get_segments("old"), store.span_counts())
    assert after[:2] == before[:2]  # its kept figures and segments unchanged
    assert after[2]["failed_jobs"] == 0

    sample = metrics.registry.get_sample_value
    rejected = {"outcome": "rejected", "reason": "pruned_job"}
    assert sample("ett_ingest_spans_total", rejected) == 2
    assert sample("ett_ingest_spans_total", {"outcome": "accepted", "reason": ""}) == 1
    assert sample("ett_ingest_spans_total", {"outcome": "rejected", "reason": "invalid"}) is None

    # sent again (the exporter does not retry a partial success, but a spool might): the same
    answer = _post(pipeline, metrics, body)
    assert int(answer.json()["partialSuccess"]["rejectedSpans"]) == 2
    assert sample("ett_ingest_spans_total", rejected) == 4


@pytest.mark.parametrize("runs_too", [False, True], ids=["spans-gone", "runs-gone"])
def test_spans_an_older_collector_stored_after_the_prune_go_at_the_next_pass(
    store: Store, runs_too: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = _pruned(store, runs_too)
    before = (store.get_job("old"), store.get_segments("old"))
    runs_before = _rows(store, "window_runs", "old")
    # a collector older than the refusal: it stored them, and its recompute marked the job failed
    with monkeypatch.context() as older:
        older.setattr(store_module, "pruned_marks", lambda *_args: {})
        late = [phase("model_init", OLD + 20_000, OLD + 20_020, job="old")]
        late += [window(OLD + 20_030 + 10 * i, OLD + 20_040 + 10 * i, job="old") for i in range(3)]
        assert pipeline.ingest(late) == {"old"}
    pipeline.recompute_dirty()
    assert "raw spans were pruned" in (store.recompute_failure("old") or "")
    assert store.span_counts()["failed_jobs"] == 1
    assert _rows(store, "spans", "old") == 1
    assert _rows(store, "window_runs", "old") > (runs_before if not runs_too else 0)

    retention = _retention(store, runs_too)
    plan = retention.plan()
    assert (plan.span_jobs, plan.spans) == (1, 1)
    done = retention.run()
    assert (done.span_jobs, done.spans) == (1, 1)
    assert _rows(store, "spans", "old") == 0
    if runs_too:  # the windows folded from them go as the job's own runs did
        assert _rows(store, "window_runs", "old") == 0
    assert store.recompute_failure("old") is None and not store.is_dirty("old")
    assert store.span_counts()["failed_jobs"] == 0
    assert (store.get_job("old"), store.get_segments("old")) == before
    assert _rows(store, "spans", "recent") > 0  # the kept job untouched
    assert retention.plan().rows() == 0  # nothing due any more


@pytest.mark.postgres
def test_a_prune_that_begins_during_an_ingest_refuses_its_spans(
    fresh_postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mark commits after the ingest's check and before its update of the job's row: the
    check after the update sees it, and the ingest goes again without the job's spans."""
    store = Store(fresh_postgres_url, raw_window_retention_s=0.0)
    store.upgrade()
    try:
        Pipeline(store, clock=lambda: NOW).ingest(worked_example("old", base=OLD))
        stored = _rows(store, "spans", "old")
        checks = []
        real = store_module.pruned_marks

        def marked_meanwhile(conn: Any, ph: str, job_ids: Any) -> dict[str, float]:
            checks.append(sorted(job_ids))
            if len(checks) == 1:  # another pass marks the job now, on its own connection
                with store.engine.begin() as other:
                    other.execute(
                        text(
                            "UPDATE jobs SET pruned = 1, spans_pruned_at = :t WHERE job_id = 'old'"
                        ),
                        {"t": NOW},
                    )
                return {}
            return real(conn, ph, job_ids)

        monkeypatch.setattr(store_module, "pruned_marks", marked_meanwhile)
        late = [phase("model_init", OLD + 20_000, OLD + 20_020, job="old")]
        late.append(phase("model_init", NOW - 50, NOW - 40, job="other"))
        done = store.accept(late)
        assert done.touched == {"other"} and set(done.refused) == {"old"}
        assert done.refused["old"].spans == 1 and done.refused["old"].spans_pruned_at == NOW
        assert _rows(store, "spans", "old") == stored and _rows(store, "spans", "other") == 1
        # check, check after the update (rolled back), then both again without the job
        assert checks == [["old", "other"], ["old", "other"], ["other"], ["other"]]
    finally:
        store.close()
