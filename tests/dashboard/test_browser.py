"""The running dashboard in real headless Chromium (Playwright with the system Chromium):
content against the API, a link from the jobs table, a live job, a filter across refreshes.
Screenshots of each page are saved under the test's tmp dir."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard import fleet_seed
from tests.dashboard.dashboard_process import (
    CHROMIUM,
    CHROMIUM_ARGS,
    Dashboard,
    require_browser,
    start_dashboard,
    wait_for_text,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
REFRESH_S = 1.5
CHANGE_S = 60.0  # seconds: what a loaded machine may take to show a change


@pytest.fixture(scope="module")
def app(fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Dashboard]]:
    require_browser()
    c, _ = fleet
    d = start_dashboard(c.url, tmp_path_factory.mktemp("dashboard"), refresh_s=REFRESH_S)
    yield fleet, d
    d.stop()


@pytest.fixture(scope="module")
def browser(app: Any) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    yield pg
    ctx.close()


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    out = tmp_path / f"{name}.png"
    page.screenshot(path=str(out), full_page=True)
    assert out.stat().st_size > 10_000
    return out


def metric(page: Any, label: str) -> str:
    box = page.locator('[data-testid="stMetric"]', has_text=label).first
    return str(box.locator('[data-testid="stMetricValue"]').inner_text()).strip()


def test_fleet_page(app: Any, page: Any, tmp_path: Path) -> None:
    (c, _), d = app
    page.goto(d.url + "/")
    wait_for_text(page, "Fleet ETT")
    data = c.get("/api/v1/fleet", since="7d").json()
    prod = sum(r["productive_s"] for r in data["series"])
    wall = sum(r["wall_s"] for r in data["series"])
    assert metric(page, "Fleet ETT") == f"{100 * prod / wall:.1f} %"
    wait_for_text(page, "Lost GPU-hours, ranked")
    shot(page, tmp_path, "fleet")


def test_job_page_shows_the_api_ett(app: Any, page: Any, tmp_path: Path) -> None:
    (c, ids), d = app
    job = c.job(ids["two_rank"])
    page.goto(f"{d.url}/job?job={ids['two_rank']}")
    wait_for_text(page, "Start-up per rank")
    assert metric(page, "ETT") == f"{job['ett_pct']:.1f} %"
    page.wait_for_timeout(500)
    shot(page, tmp_path, "job")


def test_jobs_table_link_opens_the_job(app: Any, page: Any, tmp_path: Path) -> None:
    (c, ids), d = app
    page.goto(f"{d.url}/jobs?q={ids['example']}")
    wait_for_text(page, "Click a column header")
    shot(page, tmp_path, "jobs")
    grid = page.locator('[data-testid="stDataFrame"]').first
    box = grid.bounding_box()
    assert box is not None
    # the table is a canvas: click the job link in the first row (under the 35 px header)
    x, y = box["x"] + 24, box["y"] + 35 + 17
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    page.mouse.click(x, y)
    deadline = time.monotonic() + CHANGE_S
    while time.monotonic() < deadline:
        if len(page.context.pages) > 1 or "/job?" in page.url:
            break
        page.wait_for_timeout(100)
    job_page = page.context.pages[-1]  # a new tab, or this one
    job_page.wait_for_load_state()
    assert job_page.url.endswith(f"/job?job={ids['example']}")
    wait_for_text(job_page, f"Job {ids['example']}")
    assert metric(job_page, "ETT") == f"{c.job(ids['example'])['ett_pct']:.1f} %"


def test_live_job_wall_time_grows_without_reload(app: Any, page: Any) -> None:
    (c, _), d = app
    job = fleet_seed.live_job("live-job", time.time() - 30)
    fleet_seed.send(job, c.url)
    stop = threading.Event()

    def beat() -> None:
        while not stop.is_set():
            fleet_seed.heartbeat(job, c.url)
            stop.wait(1.0)

    t = threading.Thread(target=beat, daemon=True)
    t.start()
    try:
        page.goto(f"{d.url}/job?job=live-job")
        wait_for_text(page, "updates live")
        first = second = _seconds(metric(page, "Wall time"))
        deadline = time.monotonic() + CHANGE_S  # refreshes come later on a loaded machine
        while second <= first and time.monotonic() < deadline:
            page.wait_for_timeout(int(REFRESH_S * 1000))
            second = _seconds(metric(page, "Wall time"))
        assert second > first, (first, second)
        assert "updates live" in page.content()
    finally:
        stop.set()
        t.join()


def test_filter_survives_the_refresh(app: Any, page: Any, tmp_path: Path) -> None:
    (c, _), d = app
    page.goto(d.url + "/jobs")
    wait_for_text(page, "Click a column header")
    page.locator('[data-testid="stSelectbox"]', has_text="State").first.click()
    page.get_by_role("option", name="failed", exact=True).click()
    page.wait_for_url(re.compile(r"state=failed"), timeout=CHANGE_S * 1000)
    page.wait_for_timeout(int(REFRESH_S * 1000 * 3))  # several automatic refreshes
    assert "state=failed" in page.url
    box = page.locator('[data-testid="stSelectbox"]', has_text="State").first
    inputs = box.locator("input")
    shown = box.inner_text() + " " + (inputs.first.input_value() if inputs.count() else "")
    assert "failed" in shown, shown
    failed = [r for r in c.get("/api/v1/jobs", state="failed").json()]
    wait_for_text(page, f"{len(failed)} jobs")
    shot(page, tmp_path, "jobs-failed")


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) * {"s": 1, "min": 60, "h": 3600}[unit]


NAV_NAMES = ["Fleet", "Jobs", "Job", "Checkpoint advisor", "Alerts"]
"""The sidebar of ``app.py``'s navigation, in its order (issue 23)."""


@pytest.mark.parametrize("first", ["job", "jobs"])
def test_a_deep_link_opened_first_on_a_fresh_server_names_the_pages(
    fleet: Any, browser: Any, tmp_path: Path, first: str
) -> None:
    """A shared link opened before anyone has opened ``/`` shows the navigation's page names,
    not the files' (``app | advisor | alerts | ...``: what Streamlit lists when it finds a
    ``pages/`` folder beside the entry script on its own)."""
    c, ids = fleet
    d = start_dashboard(c.url, tmp_path / "fresh", refresh_s=REFRESH_S)  # no page opened yet
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        pg = ctx.new_page()
        path, content = {
            "job": (f"/job?job={ids['two_rank']}", "Start-up per rank"),
            "jobs": ("/jobs", "Click a column header"),
        }[first]
        pg.goto(d.url + path)
        wait_for_text(pg, content)
        links = pg.locator('[data-testid="stSidebarNav"] a')
        links.first.wait_for(state="visible", timeout=60_000)
        names = [" ".join(t.split()) for t in links.all_inner_texts()]
        shot(pg, tmp_path, f"deep-link-{first}")
        assert names == NAV_NAMES
        assert pg.url == d.url + path  # the link kept its page and its query
    finally:
        ctx.close()
        d.stop()
