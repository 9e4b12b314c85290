"""A NUL character in a read filter or a job id gets the same answer on both databases.

PostgreSQL's text cannot hold NUL: psycopg raised DataError for ``?model=%00`` and the job
``a%00b``, and the API answered 500 with a traceback in the log, where SQLite answered
``200 []`` or 404. Now a job id with a NUL is 404 (ingest refuses NUL, so no job has one) and a
query parameter with one 400 naming it, on both (docs/collector.md, "Routes")."""

from __future__ import annotations

import logging

import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.served_app import get_all
from tests.support.worked_example import worked_example

JOB_PATHS = [
    "/api/v1/jobs/a%00b",
    "/api/v1/jobs/%00",
    "/api/v1/jobs/a%00b/segments",
    "/api/v1/jobs/a%00b/performance",
    "/api/v1/jobs/a%00b/activity",
]
FILTERS = [
    ("/api/v1/jobs?model=%00", "model"),
    ("/api/v1/jobs?state=completed&team=a%00b", "team"),
    ("/api/v1/jobs?since=%00", "since"),
    ("/api/v1/checkpoint-advice?model=%00", "model"),
    ("/api/v1/checkpoint-advice?team=%00", "team"),
    ("/api/v1/models/performance?model=%00", "model"),
    ("/api/v1/models/performance?team=x%00", "team"),
    ("/api/v1/fleet?model=%00", "model"),
    ("/api/v1/fleet?by=model&team=%00", "team"),
    ("/api/v1/lost-time?until=%00", "until"),
    ("/api/v1/jobs/job-1?x=%00", "x"),
    ("/api/v1/jobs/job-1/segments?buckets=1%00", "buckets"),
]


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_a_nul_in_a_job_id_or_a_filter_is_404_or_400_on_both_databases(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store)
    store.ingest(worked_example("job-1", base=1_700_000_000.0))
    pipeline.recompute_dirty()
    app = create_app(Settings(db_url=database_url), pipeline)

    try:
        with caplog.at_level(logging.WARNING):
            answers = get_all(app, JOB_PATHS + [path for path, _ in FILTERS])
        for path, answer in zip(JOB_PATHS, answers, strict=False):
            assert answer.status_code == 404, (path, answer.text)
            assert answer.json()["error"].startswith("no job"), (path, answer.text)
        for (path, name), answer in zip(FILTERS, answers[len(JOB_PATHS) :], strict=True):
            assert answer.status_code == 400, (path, answer.text)
            assert answer.json() == {
                "error": f"query parameter {name!r} holds a NUL character (%00): "
                "no stored value can",
                "status": 400,
            }, path
        # without a NUL the same reads still answer
        fine = get_all(app, ["/api/v1/jobs?model=", "/api/v1/jobs/job-1/segments"])
        assert [r.status_code for r in fine] == [200, 200]
        assert "Traceback" not in caplog.text and "DataError" not in caplog.text
    finally:
        store.close()
