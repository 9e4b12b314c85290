"""Alerts benchmark: one evaluation of every default rule and one /metrics scrape over a fleet of
2,000 jobs, beside GET /api/v1/lost-time in the same run. Prints figures; it is not a timed test.

    .venv/bin/python -m pytest -m performance -s tests/performance/bench_alerts.py

Target (issue 13): evaluation and scrape each under 1 s at 2,000 jobs.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "alerts"))

from fleet_builder import fleet, load

from ett_collector.alerts import AlertService, backtest, load_rules
from ett_collector.api._factory import build_app
from ett_collector.settings import Settings
from ett_collector.storage import Store

pytestmark = pytest.mark.performance
JOBS = 2000
MODELS = ("dlrm", "ranker", "retrieval", "ctr", "seq", "mmoe", "two_tower", "dcn")
TEAMS = ("ads", "feed", "search")


def _ms(fn, runs: int = 5) -> float:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - t))
    return statistics.median(times)


@pytest.mark.parametrize("days", [5.2, 30.0])
def test_bench_alerts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, days: float) -> None:
    """``days``: the 2,000 jobs over 5.2 days (one job per model every half hour: every job in
    the rules' 7-day reach) or over 30 days (a month's history, of which the rules read 8 days;
    the backtest of the month is timed too)."""
    url = f"sqlite:///{tmp_path / 'collector.db'}"
    store = Store(url)
    store.upgrade()
    every_s = days * 86400 / (JOBS / len(MODELS))
    hours = JOBS / len(MODELS) * every_s / 3600
    now = time.time()
    jobs = fleet(now - hours * 3600 - 2 * 3600, hours, MODELS, TEAMS, every_s=every_s)  # type: ignore[arg-type]
    load(store, list(jobs))
    n = store.span_counts()["jobs"]
    service = AlertService(store.engine, load_rules())
    evaluate = _ms(lambda: service.evaluate_once(now))
    began = time.perf_counter()
    fired = backtest(store.engine, load_rules(), now - days * 86400, now)
    replayed = time.perf_counter() - began

    monkeypatch.setenv("ETT_METRICS_CACHE_S", "0.000001")  # every scrape reads the database
    monkeypatch.setenv("ETT_ALERT_INTERVAL_S", "3600")
    app = build_app(Settings(db_url=url))
    with TestClient(app) as client:
        assert client.get("/metrics").status_code == 200
        scrape = _ms(lambda: client.get("/metrics"))
        series = sum(
            1 for ln in client.get("/metrics").text.splitlines() if ln.startswith("ett_fleet_")
        )
        lost = _ms(lambda: client.get("/api/v1/lost-time", params={"group_by": "component"}))
    print(
        f"\n{n} jobs over {days:g} days, {len(MODELS)} models x {len(TEAMS)} teams (SQLite), "
        "median of 5:"
    )
    print(
        f"  evaluation of {len(load_rules().enabled())} default rules : {evaluate:8.1f} ms"
        f"  ({evaluate / lost:.1f}x lost-time)"
    )
    print(
        f"  GET /metrics ({series} ett_fleet_ series)   : {scrape:8.1f} ms"
        f"  ({scrape / lost:.1f}x lost-time)"
    )
    print(f"  GET /api/v1/lost-time?group_by=component : {lost:8.1f} ms")
    print(
        f"  backtest of the {days:g} days (every event instant)  : {1000 * replayed:8.1f} ms"
        f"  ({len(fired)} firings)"
    )
    print("  target: evaluation and scrape each < 1000 ms")
    assert n == JOBS
