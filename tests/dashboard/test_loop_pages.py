"""Inside the loop on the pages (issue 26), against a real `ett serve` fed over OTLP: the Job
page's step time, slow time, throughput per rank (lines, or a band for a large job) and
straggler rank, and the Fleet page's models ranked by slow time. Streamlit's AppTest runs the
pages; one test drives the real dashboard in headless Chromium."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the dashboard extra: pip install -e '.[dashboard]'")

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_dashboard import _format as fmt
from tests.dashboard.conftest import wait_computed
from tests.dashboard.test_pages import _chart_frames, metrics, point_at, run
from tests.support.collector_process import Collector, start_collector
from tests.support.performance_seed import SAMPLES_PER_STEP, SLOW_LOSS_S, perf_job
from tests.support.replay import send_spans
from tests.support.spans import phase

pytestmark = pytest.mark.e2e
JOBS = {"straggler": ("loop-straggler", "slowpoke"), "flat": ("loop-flat", "steady")}
JOBS["wide"] = ("loop-wide", "wide")


PARTIAL = "loop-partial"


def _stepless(span: SpanRecord) -> SpanRecord:
    """``span`` without its step counts when it is a window after the job's sixth."""
    attrs = dict(span.attributes)
    if span.name != sc.SPAN_TRAIN_WINDOW or attrs.get(sc.STEP_FIRST, 0) < 600:
        return span
    attrs.pop(sc.STEP_FIRST, None)
    attrs.pop(sc.STEP_LAST, None)
    return replace(span, attributes=attrs)


LOST_SPANS = 65
SKEW_S = 2.5
"""How far apart the flat job's ranks' clocks put their ``pg_init`` barrier's end."""
"""Spans the flat job's rank 0 says it lost (its attempt span's ``ett.telemetry.dropped_spans``)."""


def _lossy(span: SpanRecord) -> SpanRecord:
    """``span``, saying :data:`LOST_SPANS` lost when it is rank 0's attempt span."""
    if span.name != sc.SPAN_ATTEMPT or span.rank != 0:
        return span
    return replace(span, attributes={**span.attributes, sc.TELEMETRY_DROPPED_SPANS: LOST_SPANS})


@pytest.fixture(scope="module")
def loop_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    home = tmp_path_factory.mktemp("loop") / "ett-home"
    home.mkdir(parents=True)
    c = start_collector(home)
    try:
        t0 = time.time() - 3600
        spans = perf_job(*JOBS["straggler"], t0, slow=3)
        spans += [_lossy(s) for s in perf_job(*JOBS["flat"], t0, straggler=False)]
        # its ranks' clocks put the pg_init barrier's end SKEW_S apart
        flat = {"job": JOBS["flat"][0], sc.MODEL: JOBS["flat"][1], sc.TEAM: "perf"}
        spans += [
            phase("pg_init", t0 - 5, t0 - 4, rank=0, **flat),
            phase("pg_init", t0 - 5, t0 - 4 + SKEW_S, rank=1, **flat),
        ]
        spans += perf_job(*JOBS["wide"], t0, windows=12, ranks=20, straggler=False)
        # a job whose windows after its sixth carry no step counts: partial loop figures
        spans += [_stepless(s) for s in perf_job(PARTIAL, "steady", t0, straggler=False)]
        assert send_spans(spans, c.url) == len(spans)
        wait_computed(c, [job for job, _ in JOBS.values()] + [PARTIAL])
        yield c
    finally:
        c.stop()


@pytest.fixture
def api(loop_api: Collector, monkeypatch: pytest.MonkeyPatch) -> Collector:
    point_at(loop_api.url, monkeypatch)
    return loop_api


def test_job_page_names_the_straggler_and_the_slow_time(api: Collector) -> None:
    job = JOBS["straggler"][0]
    perf = api.get(f"/api/v1/jobs/{job}/performance").json()
    at = run("views/job.py", job=job)
    m = metrics(at)
    assert m["Ideal step time"] == "100.0 ms"
    assert m["Slow time"] == f"{3 * SLOW_LOSS_S:.1f} s" == f"{perf['slow_s']:.1f} s"
    assert m["Straggler rank"] == "rank 1"
    (straggler,) = [x for x in at.metric if x.label == "Straggler rank"]
    assert straggler.delta == "score 2.00×"
    # the bare figure, three digits at most: "64.2k samples/s" was cut to "64.2k s…" at 1400 px
    assert m["Samples/s"] == fmt.rate(perf["samples_per_s"], unit="") == "608"
    assert any("Rank 1 (attempt 0) computes 2.00×" in c.value for c in at.caption)
    assert not [w for w in at.warning if "Incomplete telemetry" in w.value]
    assert not [w for w in at.warning if "Clocks disagree" in w.value]
    frames = _chart_frames(at)
    per_rank = [f for f in frames if "rank" in f.columns and "samples_per_s" in f.columns]
    assert len(per_rank) == 1 and set(per_rank[0]["rank"]) == {"rank 0", "rank 1"}
    assert per_rank[0]["samples_per_s"].max() == pytest.approx(100 * SAMPLES_PER_STEP / 10)
    steps = [f for f in frames if "step_ms" in f.columns]
    assert len(steps) == 1 and steps[0]["step_ms"].min() == pytest.approx(100.0)
    slow = [d.value for d in at.dataframe if "× ideal" in d.value.columns]
    assert len(slow) == 1 and len(slow[0]) == len(perf["slow_windows"]) > 0


def test_a_flat_job_has_no_straggler_and_a_wide_one_a_band(api: Collector) -> None:
    at = run("views/job.py", job=JOBS["flat"][0])
    assert metrics(at)["Straggler rank"] == "none"
    # its rank 0 lost spans: the page says its idle time may be lost telemetry
    (warned,) = [w.value for w in at.warning if "Incomplete telemetry" in w.value]
    assert f"lost {LOST_SPANS:,} span(s)" in warned and "miss what those spans said" in warned
    (skewed,) = [w.value for w in at.warning if "Clocks disagree" in w.value]
    assert f"{fmt.duration(SKEW_S)} apart" in skewed and "NTP" in skewed
    assert metrics(at)["Slow time"] == "0.0 s"
    at = run("views/job.py", job=JOBS["wide"][0])
    frames = _chart_frames(at)
    assert not [f for f in frames if "rank" in f.columns and "samples_per_s" in f.columns]
    (band,) = [f for f in frames if {"min", "median", "max"} <= set(f.columns)]
    assert band["median"].max() == pytest.approx(320.0)
    assert any("band from the slowest to the fastest rank" in c.value for c in at.caption)


def test_fleet_page_ranks_models_by_slow_time(api: Collector) -> None:
    data = api.get("/api/v1/models/performance", since="7d").json()
    at = run()
    (table,) = [d.value for d in at.dataframe if "slow time" in d.value.columns]
    assert list(table["model"]) == [m["model"] for m in data["models"]]
    assert table["model"].iloc[0] == "slowpoke"
    assert table["slow time"].iloc[0] == f"{3 * SLOW_LOSS_S:.1f} s"
    assert list(table["straggler jobs"]) == [1, 0, 0]
    (bars,) = [f for f in _chart_frames(at) if "slow_h" in f.columns]
    assert bars["slow_h"].max() == pytest.approx(3 * SLOW_LOSS_S / 3600)


@pytest.mark.browser
def test_job_page_in_chromium(loop_api: Collector, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from tests.dashboard.dashboard_process import (
        CHROMIUM,
        CHROMIUM_ARGS,
        require_browser,
        start_dashboard,
        wait_for_text,
    )

    require_browser()
    d = start_dashboard(loop_api.url, tmp_path / "dash", refresh_s=30.0)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{d.url}/job?job={JOBS['straggler'][0]}")
            wait_for_text(page, "Inside the loop")
            wait_for_text(page, "score 2.00×")
            box = page.locator('[data-testid="stMetric"]', has_text="Ideal step time").first
            assert box.locator('[data-testid="stMetricValue"]').inner_text().strip() == "100.0 ms"
            out = tmp_path / "job.png"
            page.screenshot(path=str(out), full_page=True)
            assert out.stat().st_size > 10_000
            browser.close()
    finally:
        d.stop()


def test_a_job_with_partial_loop_figures_says_so(api: Collector) -> None:
    at = run("views/job.py", job=PARTIAL)
    (warned,) = [w.value for w in at.warning if "Partial loop figures" in w.value]
    assert "20.0 %" in warned and "no step counts" in warned
    at = run("views/job.py", job=JOBS["flat"][0])
    assert not [w for w in at.warning if "Partial loop figures" in w.value]
