"""The SLO burn rules with real promtool (marked ``prometheus``): off by default, they are not
exported; a user's rules file that enables them exports rules that pass ``promtool check rules``
and the committed ``promtool test rules`` cases (promtool/burn_test.yml: fire, and stay quiet at
every edge); moving a threshold past a planted figure makes those cases fail."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from processes import need

pytestmark = pytest.mark.prometheus
PROMTOOL_DIR = Path(__file__).resolve().parent / "promtool"
BURN_RULES = PROMTOOL_DIR / "burn_rules.yml"
BURN = {"ett_slo_burn_fast_by_model", "ett_slo_burn_slow_by_model", "ett_slo_burn_fast_by_team"}


def _export(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ett_cli", "alerts", "export-prometheus", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _alerts(text: str) -> dict[str, dict[str, object]]:
    return {r["alert"]: r for r in yaml.safe_load(text)["groups"][0]["rules"]}


def _promtool_test(tmp_path: Path, rules: Path) -> subprocess.CompletedProcess[str]:
    promtool = need("promtool")
    shutil.copy(PROMTOOL_DIR / "burn_test.yml", tmp_path / "burn_test.yml")
    export = _export("--rules", str(rules), "-o", str(tmp_path / "ett-burn-rules.yml"))
    assert export.returncode == 0, export.stderr
    return subprocess.run(
        [promtool, "test", "rules", "burn_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_disabled_by_default_and_exported_once_a_user_file_enables_them(tmp_path: Path) -> None:
    promtool = need("promtool")
    default = _export()
    assert default.returncode == 0, default.stderr
    assert not BURN & _alerts(default.stdout).keys()  # shipped off: the objective is yours

    out = tmp_path / "ett-burn-rules.yml"
    assert _export("--rules", str(BURN_RULES), "-o", str(out)).returncode == 0
    alerts = _alerts(out.read_text())
    assert alerts.keys() >= BURN
    assert "regression_by_model" in alerts  # the other defaults are kept
    fast = alerts["ett_slo_burn_fast_by_model"]
    assert fast["labels"] == {
        "rule": "ett_slo_burn_fast_by_model",
        "severity": "critical",
        "component": "burn",
    }
    assert "< 0.7)" in str(fast["expr"]) and 'window="1h"' in str(fast["expr"])
    check = subprocess.run(
        [promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"SUCCESS: {len(alerts)} rules found" in check.stdout


def test_promtool_cases_fire_and_stay_quiet_at_the_edges(tmp_path: Path) -> None:
    run = _promtool_test(tmp_path, BURN_RULES)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        # a threshold just above the planted 3.1x: the fast rule no longer fires at 25m
        (
            "    burn_rate: 3\n    min_jobs: 3\n    for: 0s\n",
            "    burn_rate: 3.2\n    min_jobs: 3\n    for: 0s\n",
            "ett_slo_burn_fast_by_model",
        ),
        # a higher objective: the slow rule now fires on the 7d edge (90%) at 15m
        (
            "    objective_pct: 90\n    long_window: 7d\n",
            "    objective_pct: 91\n    long_window: 7d\n",
            "ett_slo_burn_slow_by_model",
        ),
    ],
)
def test_the_cases_fail_when_a_threshold_moves(
    tmp_path: Path, old: str, new: str, rule: str
) -> None:
    text = BURN_RULES.read_text()
    assert text.count(old) == 1
    moved = tmp_path / "moved.yml"
    moved.write_text(text.replace(old, new))
    run = _promtool_test(tmp_path, moved)
    assert run.returncode != 0
    assert f"alertname: {rule}," in run.stdout + run.stderr
