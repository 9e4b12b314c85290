"""The default rules on the fleet simulator's fleets: a regression planted with ``--regress`` is
found, named by model and component, no earlier than it was planted; the same fleet without it
raises nothing about that model's checkpoints."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from ett_collector.alerts import backtest, load_rules
from ett_collector.storage import Store
from ett_simulator import simulate_into_db

DAY = 86400.0
START = 1_800_000_000.0  # fixed, so the fleet is the same on every run
ONSET = START + 7 * DAY
MODEL, COMPONENT = "dlrm-small", "checkpoint"


def _checkpoint_firings(tmp_path: Path, name: str, regress: list[str]) -> list[tuple[float, str]]:
    url = f"sqlite:///{tmp_path / name}.db"
    simulate_into_db(url, jobs=120, days=8, seed=5, start=START, regress=regress)
    store = Store(url)
    try:
        firings = backtest(store.engine, load_rules(), since=START + 5 * DAY, until=START + 9 * DAY)
    finally:
        store.engine.dispose()
    return [
        (f.fired_at, f.rule)
        for f in firings
        if f.labels.get("model") == MODEL and f.labels.get("component") == COMPONENT
    ]


def test_planted_regression_fires_names_model_and_component_and_not_before(tmp_path: Path) -> None:
    at = datetime.fromtimestamp(ONSET, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    regressed = _checkpoint_firings(
        tmp_path, "regressed", [f"model={MODEL} component={COMPONENT} factor=6 at={at}"]
    )
    stable = _checkpoint_firings(tmp_path, "stable", [])

    assert regressed, "the planted checkpoint regression raised no alert naming it"
    assert {rule for _, rule in regressed} >= {"checkpoint_blocking_regression_by_model"}
    assert min(t for t, _ in regressed) >= ONSET
    assert min(t for t, _ in regressed) <= ONSET + DAY  # found within the rules' 24 h window
    assert stable == []
