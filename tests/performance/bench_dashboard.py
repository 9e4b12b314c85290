"""Dashboard benchmark: time from navigation to content for the Fleet and Job pages in real
Chromium, and the API requests one refresh of each page makes, for a small fleet and a large one
(default 2,000 simulated jobs), measured side by side in one run. Prints figures; not a timed test.

    .venv/bin/python -m tests.performance.bench_dashboard [--jobs 2000] [--small 100] [--keep DIR]
    make bench      # runs it through pytest (marker: performance)

Targets (issue 14): requests per refresh do not grow with the number of jobs; both pages show
content within 2 s on this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from ett_simulator import simulate_into_db
from tests.dashboard.dashboard_process import (
    CHROMIUM,
    CHROMIUM_ARGS,
    require_browser,
    start_dashboard,
    wait_for_text,
)
from tests.support.collector_process import start_collector

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
REPEATS = 3


def _requests_per_refresh(api_url: str, page: str | None, **params: str) -> tuple[int, float]:
    """API requests and seconds of one uncached run of ``page`` under Streamlit's AppTest
    (in-process, so the client's own counter sees them; the seconds are the page script's run,
    its reads included, without a browser)."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from ett_dashboard import client

    os.environ["ETT_API_URL"] = api_url
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    if page:
        at.switch_page(page)
    before = client.requests_made()
    t0 = time.perf_counter()
    at.run()
    seconds = time.perf_counter() - t0
    assert not at.exception, [e.value for e in at.exception]
    return client.requests_made() - before, seconds


def _time_to_content(browser: Any, url: str, text: str) -> tuple[float, float]:
    """Median seconds from navigation until ``text`` is visible: in a fresh browser context
    (nothing cached: Streamlit's scripts are fetched and compiled) and again in a second tab of
    that context (its scripts cached, as for a user who opened the dashboard before)."""
    cold, warm = [], []
    for _ in range(REPEATS):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        for times in (cold, warm):
            page = ctx.new_page()
            t0 = time.perf_counter()
            page.goto(url)
            wait_for_text(page, text, timeout_ms=60_000)
            times.append(time.perf_counter() - t0)
            page.close()
        ctx.close()
    return statistics.median(cold), statistics.median(warm)


def _api_seconds(collector: Any, path: str) -> float:
    """Median seconds of the collector's answer to ``path?since=7d`` (the Fleet page's read)."""
    times = []
    for _ in range(REPEATS):
        t0 = time.perf_counter()
        assert collector.get(path, since="7d").status_code == 200
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(jobs: int, home: Path) -> dict[str, float]:
    """Seed ``jobs`` simulated jobs (unless ``home`` holds them from an earlier run), then
    measure both pages."""
    from playwright.sync_api import sync_playwright

    home.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{home / 'collector.db'}"
    if not (home / "seeded").exists():
        simulate_into_db(db_url, jobs=jobs, days=7, seed=3)  # ends now: the pages show it
        (home / "seeded").touch()
    collector = start_collector(home, db_url=db_url)
    dash = start_dashboard(collector.url, home / "dash", refresh_s=30)
    try:
        job_id = collector.get("/api/v1/jobs?limit=1").json()[0]["job_id"]
        out: dict[str, float] = {"fleet_api_s": _api_seconds(collector, "/api/v1/fleet")}
        out["fleet_requests"], out["fleet_script_s"] = _requests_per_refresh(collector.url, None)
        out["job_requests"], out["job_script_s"] = _requests_per_refresh(
            collector.url, "views/job.py", job=job_id
        )
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            out["fleet_s"], out["fleet_warm_s"] = _time_to_content(
                browser, dash.url + "/", "Fleet ETT"
            )
            out["job_s"], out["job_warm_s"] = _time_to_content(
                browser, f"{dash.url}/job?job={job_id}", "Start-up per rank"
            )
            browser.close()
        return out
    finally:
        dash.stop()
        collector.stop()


def report(small: int, large: int, keep: Path | None = None) -> dict[int, dict[str, float]]:
    """Measure both fleets; with ``keep``, their databases stay there and a later run with the
    same folder measures them again without seeding (a repeat in minutes, not a quarter hour)."""
    with tempfile.TemporaryDirectory() as tmp:
        where = keep or Path(tmp)
        results = {n: measure(n, where / f"fleet-{n}") for n in (small, large)}
    print(f"\ndashboard, fleets of {small} and {large} simulated jobs (median of {REPEATS}):")
    load = os.getloadavg()[0]
    print(f"(load average {load:.1f} on {os.cpu_count()} CPUs at the end)")
    print(f"{'':32}{small:>10}{large:>10}")
    for key, label in (
        ("fleet_requests", "Fleet: API requests / refresh"),
        ("job_requests", "Job: API requests / refresh"),
        ("fleet_s", "Fleet: to content s, fresh"),
        ("fleet_warm_s", "Fleet: to content s, cached"),
        ("job_s", "Job: to content s, fresh"),
        ("job_warm_s", "Job: to content s, cached"),
        ("fleet_api_s", "GET /api/v1/fleet s"),
        ("fleet_script_s", "Fleet: script run s (AppTest)"),
        ("job_script_s", "Job: script run s (AppTest)"),
    ):
        a, b = results[small][key], results[large][key]
        print(f"{label:32}{a:>10.2f}{b:>10.2f}")
    return results


@pytest.mark.performance
@pytest.mark.browser
@pytest.mark.timeout(1800)  # seeding 2,000 simulated jobs alone takes minutes here
def test_dashboard_benchmark() -> None:
    require_browser()
    small = int(os.environ.get("ETT_BENCH_SMALL", "100"))
    large = int(os.environ.get("ETT_BENCH_JOBS", "2000"))
    results = report(small, large)
    # the figures are the product; the one structural property is checked
    assert results[large]["fleet_requests"] <= results[small]["fleet_requests"]
    assert results[large]["job_requests"] <= results[small]["job_requests"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="the large fleet (default 2000)")
    parser.add_argument("--small", type=int, default=100, help="the small fleet (default 100)")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the seeded databases in this folder and reuse them on the next run",
    )
    a = parser.parse_args()
    report(a.small, a.jobs, a.keep)
