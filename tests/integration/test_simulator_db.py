"""`ett simulate --db URL` writes a fleet through the collector's ingest path: the figures the
query layer reads back equal the simulator's truth, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.pipeline import Pipeline
from ett_collector.query import Query
from ett_collector.storage import Store
from ett_simulator import Truth, differences
from tests.conftest import BACKENDS


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_simulate_into_a_database_gives_the_truth(database_url: str, tmp_path: Path) -> None:
    profile = tmp_path / "profile.toml"
    profile.write_text("[failures]\nrate_per_hour = 0.5\nstartup_probability = 0.1\n")
    truth = tmp_path / "truth.jsonl"
    argv = [
        "simulate",
        "--db",
        database_url,
        "--jobs",
        "6",
        "--days",
        "2",
        "--seed",
        "31",
        "--start",
        "2026-09-21T00:00:00Z",
        "--profile",
        str(profile),
        "--truth",
        str(truth),
    ]
    assert main(argv) == 0
    truths = [Truth(**json.loads(line), phase_s={}) for line in truth.read_text().splitlines()]
    assert len(truths) >= 6
    query = Query(Pipeline(Store(database_url)))
    mismatches = {}
    for t in truths:
        diffs = differences(t, query.job(t.job_id), components=False)
        if diffs:
            mismatches[t.job_id] = diffs
    assert mismatches == {}
    # a second run with the same seed replays the same spans: nothing changes
    assert main(argv) == 0
    again = {t.job_id: t.wall_s for t in truths}
    assert {t.job_id: query.job(t.job_id)["wall_s"] for t in truths} == pytest.approx(again)
