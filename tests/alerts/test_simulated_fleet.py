"""The default rules on the fleet simulator's fleets: a regression planted with ``--regress`` is
found, named by model and component, no earlier than it was planted, with its size and onset;
the same fleet without it raises no regression at all. ``ett alerts backtest --truth`` scores
the firings against the planted regressions of ``ett simulate --truth``."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ett_collector.alerts import Firing, backtest, load_rules
from ett_collector.storage import Store
from ett_simulator import simulate_into_db

DAY = 86400.0
START = 1_800_000_000.0  # fixed, so the fleet is the same on every run
ONSET = START + 7 * DAY
MODEL, COMPONENT = "dlrm-small", "checkpoint"
AT = datetime.fromtimestamp(ONSET, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
REGRESS = f"model={MODEL} component={COMPONENT} factor=6 at={AT}"


def _regressions(url: str) -> list[Firing]:
    store = Store(url)
    try:
        firings = backtest(store.engine, load_rules(), since=START + 5 * DAY, until=START + 9 * DAY)
    finally:
        store.engine.dispose()
    return [f for f in firings if f.rule == "regression_by_model"]


@pytest.fixture(scope="module")
def regressed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The fleet with the planted regression, simulated once for the module by ``ett simulate
    --truth`` (the command a user runs): its database and its truth file."""
    home = tmp_path_factory.mktemp("regressed")
    db, truth = home / "c.db", home / "truth.jsonl"
    sim = [
        sys.executable,
        "-m",
        "ett_cli",
        "simulate",
        "--db",
        str(db),
        "--jobs",
        "120",
        "--days",
        "9",
        "--seed",
        "5",
        "--start",
        datetime.fromtimestamp(START, UTC).isoformat(),
        "--regress",
        REGRESS,
        "--truth",
        str(truth),
    ]
    done = subprocess.run(sim, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return db, truth


def test_planted_regression_fires_once_named_and_sized_and_a_flat_fleet_stays_quiet(
    tmp_path: Path, regressed: tuple[Path, Path]
) -> None:
    flat = f"sqlite:///{tmp_path / 'f.db'}"
    simulate_into_db(flat, jobs=120, days=9, seed=5, start=START)

    found = _regressions(f"sqlite:///{regressed[0]}")
    named = [f for f in found if (f.labels["model"], f.labels["component"]) == (MODEL, COMPONENT)]
    assert len(named) == 1, [f.description for f in found]  # one incident, one alert
    [f] = named
    assert ONSET <= f.fired_at <= ONSET + 2 * DAY
    assert "×" in f.description and "GPU-hours/day" in f.description and "since" in f.description
    assert _regressions(flat) == []


def test_backtest_truth_scores_the_firings(tmp_path: Path, regressed: tuple[Path, Path]) -> None:
    db, truth = regressed
    since = datetime.fromtimestamp(START + 5 * DAY, UTC).isoformat()
    until = datetime.fromtimestamp(START + 9 * DAY, UTC).isoformat()
    bt = [
        sys.executable,
        "-m",
        "ett_cli",
        "alerts",
        "backtest",
        "--db",
        str(db),
        "--since",
        since,
        "--until",
        until,
        "--truth",
        str(truth),
    ]
    shown = subprocess.run(bt, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert "precision 1.00   recall 1.00" in shown.stdout, shown.stdout
    assert f"model={MODEL} {COMPONENT} x6" in shown.stdout and "found after" in shown.stdout
    as_json = subprocess.run([*bt, "--json"], capture_output=True, text=True, timeout=300)
    quality = json.loads(as_json.stdout)["quality"]
    assert quality["precision"] == 1.0 and quality["recall"] == 1.0
    [planted] = quality["planted"]
    assert planted["found"] and 0 <= planted["delay_s"] <= 2 * DAY
    # a truth file that is not one
    (tmp_path / "bad.jsonl").write_text('{"record": "regression", "model": "m"}\n')
    bad = subprocess.run([*bt[:-1], str(tmp_path / "bad.jsonl")], capture_output=True, text=True)
    assert bad.returncode == 2 and "needs component, factor and at" in bad.stderr
    assert "Traceback" not in bad.stderr
