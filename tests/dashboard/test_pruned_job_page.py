"""The Job page of a job whose raw spans and runs retention pruned (its figures, segments and
kept loop figures stay), under Streamlit's AppTest against a real `ett serve`.

Before, the page read the job's activity, got 404 ``no job 'ID'`` and stopped after its
headline figures: no Timeline, Attempts, Inside the loop or Lost time. Now every section the
kept figures allow renders, and one line says which detail went with the raw spans.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

pytest.importorskip("streamlit", reason="the dashboard extra: pip install -e '.[dashboard]'")

from ett_collector.storage import Store
from ett_collector.storage._retention import Policy, Retention
from ett_collector.write.pipeline import Pipeline
from tests.dashboard.test_pages import _chart_frames, metrics, point_at, run
from tests.support.collector_process import Collector, start_collector
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.e2e
DAY = 86400.0
JOB = "pruned-example"
SECTIONS = [
    "Timeline",
    "Attempts",
    "Start-up per rank",
    "Checkpoints",
    "Inside the loop",
    "Lost time by component",
]


@pytest.fixture(scope="module")
def pruned_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A collector on a database whose one job, 40 days old, lost its raw spans and runs."""
    home = tmp_path_factory.mktemp("pruned") / "ett-home"
    home.mkdir(parents=True)
    url = f"sqlite:///{home / 'collector.db'}"
    store = Store(url, raw_window_retention_s=0.0)
    store.upgrade()
    now = time.time()
    pipeline = Pipeline(store, clock=lambda: now)
    pipeline.ingest(worked_example(JOB, base=now - 40 * DAY))
    pipeline.recompute_dirty()
    periods = {"spans_s": 30 * DAY, "runs_s": 30 * DAY, "figures_s": None, "alerts_s": None}
    Retention(store.engine, Policy(**periods, quiet_s=0.0), pause_s=0, clock=time.time).run()
    assert store.spans_pruned_at(JOB) is not None and not store.load_spans(JOB)
    store.close()
    c = start_collector(home, db_url=url)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def api(pruned_api: Collector, monkeypatch: pytest.MonkeyPatch) -> Collector:
    point_at(pruned_api.url, monkeypatch)
    return pruned_api


def test_a_pruned_job_page_shows_every_kept_section_and_says_what_went(api: Collector) -> None:
    job = api.job(JOB)
    at = run("views/job.py", job=JOB)
    assert not [e.value for e in at.error]
    assert [s.value for s in at.subheader] == SECTIONS
    assert metrics(at)["ETT"] == f"{job['ett_pct']:.1f} %"
    (note,) = [i.value for i in at.info if "Raw spans pruned on" in i.value]
    assert "start-up per rank, checkpoint detail and compile times are not available" in note
    frames = _chart_frames(at)
    assert any({"category", "component"} <= set(f.columns) for f in frames)  # the timeline
    attempts = next(d.value for d in at.dataframe if "attempt" in d.value.columns)
    assert list(attempts["attempt"]) == [a["attempt"] for a in job["attempts"]]
    lost = [d.value for d in at.dataframe if "component" in d.value.columns][-1]
    assert set(lost["component"]) == set(job["lost_by_component"])
    gone = [c.value for c in at.caption if c.value.startswith("Not kept:")]
    assert len(gone) == 2  # start-up per rank and checkpoints, each pointing at the note
