"""Every job id is addressable: ids holding ``/``, or ending in a view's name, read through the
HTTP API when written percent-encoded (``quote(job_id, safe="")``), on both stores."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.served_app import get_all
from tests.support.worked_example import worked_example

IDS = ["a", "a/segments", "a/segments/segments", "x/activity", "team/run 1", "ünï%2F?#"]
IDS += [
    "a\nb",
    "job-lf\n",
    "a\r\nb",
    "job-crlf\r\n",
    "\n/segments",
]  # the router's `.*` stops at \n


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_every_job_id_is_addressable(database_url: str) -> None:
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store)
    for n, job_id in enumerate(IDS):
        store.ingest(worked_example(job_id, base=1_700_000_000.0 + 1000 * n))
    pipeline.recompute_dirty()
    app = create_app(Settings(db_url=database_url), pipeline)

    try:
        for job_id in IDS:
            base = f"/api/v1/jobs/{quote(job_id, safe='')}"
            job, segments, activity = get_all(app, [base, base + "/segments", base + "/activity"])
            assert job.status_code == 200, (job_id, job.text)
            assert job.json()["job_id"] == job_id
            assert segments.status_code == 200, (job_id, segments.text)
            assert isinstance(segments.json(), list) and segments.json()
            assert activity.status_code == 200, (job_id, activity.text)
            performance = get_all(app, [base + "/performance"])[0]
            assert performance.status_code == 200, (job_id, performance.text)
            assert performance.json()["job_id"] == job_id
        # unencoded: a trailing view name is the view; other slashes belong to the id
        plain_segments, plain_job, empty = get_all(
            app, ["/api/v1/jobs/a/segments", "/api/v1/jobs/team/run%201", "/api/v1/jobs/"]
        )
        direct = get_all(app, [f"/api/v1/jobs/{quote('a', safe='')}/segments"])[0]
        assert plain_segments.json() == direct.json()
        assert plain_job.json()["job_id"] == "team/run 1"
        assert empty.status_code == 404
    finally:
        store.close()
