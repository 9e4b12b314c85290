"""A simulated fleet through a real `ett serve`: every job's figures equal the simulator's truth,
on SQLite and PostgreSQL; a `--live` job shows as running and then completes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ett_simulator import Truth, differences, read_truth, simulate_to_endpoint
from tests.support.collector_process import Collector, start_collector

pytestmark = pytest.mark.e2e

START = 1_790_000_000.0
FAILURES = {"failures": {"rate_per_hour": 0.6, "startup_probability": 0.1}}
"""More failures than the default, so that a small fleet has every kind."""
NO_WAITS = {"fleet": {"rank_jitter_sigma": 0.0}, "startup": {"straggler_probability": 0.0}}
"""Ranks reach the barrier together: no rank waits for another in start-up."""


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def fleet(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Collector, list[Truth], list[Truth]]]:
    """A collector on one backend, sent two small fleets over OTLP/HTTP: one of the default
    profile with more failures (gzip), one whose ranks never wait at a barrier."""
    home = tmp_path_factory.mktemp("sim") / "ett-home"
    db_url = None
    if request.param == "postgres":
        db_url = request.getfixturevalue("postgres_server").create_database()
    collector = start_collector(home, db_url)
    try:
        common: dict[str, Any] = {"jobs": 10, "days": 2, "start": START}
        waits = simulate_to_endpoint(
            collector.url, seed=21, overrides=FAILURES, gzip=True, **common
        )
        plain = simulate_to_endpoint(
            collector.url, seed=22, overrides={**FAILURES, **NO_WAITS}, **common
        )
        collector.wait_computed()
        yield collector, waits, plain
    finally:
        collector.stop()


def _mismatches(
    collector: Collector, truths: list[Truth], components: bool
) -> dict[str, list[str]]:
    out = {}
    for truth in truths:
        diffs = differences(truth, collector.job(truth.job_id), components=components)
        if diffs:
            out[truth.job_id] = diffs
    return out


def test_every_job_equals_its_truth(fleet: tuple[Collector, list[Truth], list[Truth]]) -> None:
    collector, waits, plain = fleet
    truths = waits + plain
    causes = {c for t in truths for c in t.failure_causes}
    assert len(causes) >= 4, causes  # the fleet exercises several failure paths
    assert any(t.standalone_publish for t in truths)
    assert any(t.state == "failed" for t in truths) or sum(t.failures for t in truths) > 5
    assert _mismatches(collector, truths, components=False) == {}


def test_lost_time_by_component_equals_its_truth(
    fleet: tuple[Collector, list[Truth], list[Truth]],
) -> None:
    collector, _, plain = fleet
    assert _mismatches(collector, plain, components=True) == {}
    # the fleet's lost time by team (any attribution to components gives the same sums)
    lost = collector.get("/api/v1/lost-time", group_by="team").json()
    by_team = {row["key"]: row["lost_s"] for row in lost}
    expected: dict[str, float] = {}
    for t in fleet[1] + plain:
        expected[t.team] = expected.get(t.team, 0.0) + t.idle_s + t.failure_s
    assert by_team.keys() == expected.keys()
    for team, secs in expected.items():
        assert by_team[team] == pytest.approx(secs, abs=0.05), team


def test_start_up_waits_are_charged_to_the_rank_that_arrived_last(
    fleet: tuple[Collector, list[Truth], list[Truth]],
) -> None:
    collector, waits, _ = fleet
    assert _mismatches(collector, waits, components=True) == {}


LIVE_PROFILE = """\
[live]
train_s = 5.0
checkpoint_interval_s = 2.0
startup_scale = 0.02
[failures]
rate_per_hour = 0.0
startup_probability = 0.0
exit = { median_s = 0.3, sigma = 0.0 }
[checkpoint]
sync_blocking = { median_s = 0.2, sigma = 0.0 }
async_blocking = { median_s = 0.1, sigma = 0.0 }
persist = { median_s = 0.3, sigma = 0.0 }
[compile]
miss = { median_s = 1.0, sigma = 0.0 }
hit = { median_s = 0.5, sigma = 0.0 }
"""


def test_a_live_job_runs_and_then_completes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETT_WINDOW_S", "1")
    collector = start_collector(tmp_path / "ett-home")
    try:
        profile = tmp_path / "live.toml"
        profile.write_text(LIVE_PROFILE)
        truth = tmp_path / "truth.jsonl"
        cmd = [
            sys.executable,
            "-m",
            "ett_cli",
            "simulate",
            "--live",
            "1",
            "--jobs",
            "0",
            "--endpoint",
            collector.url,
            "--profile",
            str(profile),
            "--truth",
            str(truth),
        ]
        launched = time.time()
        proc = subprocess.Popen(cmd, env=os.environ.copy(), stderr=subprocess.PIPE, text=True)
        states: list[str] = []
        deadline = time.monotonic() + 90
        while proc.poll() is None and time.monotonic() < deadline:
            jobs = collector.get("/api/v1/jobs").json()
            states += [j["state"] for j in jobs]
            time.sleep(0.5)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "running" in states
        collector.wait_computed()
        (expected,), regressions = read_truth(truth)
        assert regressions == []
        # a live job is not history: it runs past the history's end (the command's now)
        assert expected.attempts[-1]["end"] > launched + 5
        figures = collector.job(expected.job_id)
        assert figures["state"] == "completed"
        assert figures["wall_s"] == pytest.approx(expected.wall_s, abs=1e-3)
        assert figures["productive_s"] == pytest.approx(expected.productive_s, abs=1e-3)
        assert figures["tts_s"] == pytest.approx(expected.tts_s, abs=1e-3)
    finally:
        collector.stop()
