"""The loop's alert kinds in PromQL (issue 26): approximations over the ``ett_model_*`` gauges.

A user's rules file that enables them (promtool/loop_rules.yml) exports rules that pass
``promtool check rules`` and the committed ``promtool test rules`` cases (promtool/loop_test.yml:
fire, and stay quiet at every edge); moving a threshold past a planted figure makes a case fail;
a rule grouped by team is left out and named. The Monte Carlo behind ``THROUGHPUT_RATIO``'s
docstring is re-run here, seeded, so its figures stay true."""

from __future__ import annotations

import math
import random
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from processes import need

from ett_collector.alerts._loop_promql import THROUGHPUT_RATIO
from ett_collector.alerts.prometheus import NotPromQL, has_promql, prometheus_rule
from ett_collector.alerts.rules import load_rules

PROMTOOL_DIR = Path(__file__).resolve().parent / "promtool"
LOOP_RULES = PROMTOOL_DIR / "loop_rules.yml"
LOOP = {"throughput_regression_by_model", "straggler_by_model"}
_BY_MODEL_SCORE = (
    "    min_score: 1.3\n    min_windows: 20\n    for: 0s\n\n  - name: straggler_by_team"
)
"""The by-model straggler rule's threshold (the line before the by-team rule)."""


def _export(rules: Path, out: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ett_cli", "alerts", "export-prometheus"]
    return subprocess.run(
        [*command, "--rules", str(rules), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _promtool_test(tmp_path: Path, rules: Path) -> subprocess.CompletedProcess[str]:
    promtool = need("promtool")
    shutil.copy(PROMTOOL_DIR / "loop_test.yml", tmp_path / "loop_test.yml")
    export = _export(rules, tmp_path / "ett-loop-rules.yml")
    assert export.returncode == 0, export.stderr
    return subprocess.run(
        [promtool, "test", "rules", "loop_test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.prometheus
def test_enabled_loop_rules_export_and_pass_promtool(tmp_path: Path) -> None:
    promtool = need("promtool")
    out = tmp_path / "ett-loop-rules.yml"
    export = _export(LOOP_RULES, out)
    assert export.returncode == 0, export.stderr
    assert "left out, no PromQL: straggler_by_team" in export.stdout
    text = out.read_text()
    assert "# rule straggler_by_team (kind straggler) is not exported: by team" in text
    alerts = {r["alert"]: r for r in yaml.safe_load(text)["groups"][0]["rules"]}
    assert alerts.keys() >= LOOP and "straggler_by_team" not in alerts
    assert "approximation" in alerts["straggler_by_model"]["annotations"]
    check = subprocess.run(
        [promtool, "check", "rules", str(out)], capture_output=True, text=True, timeout=120
    )
    assert check.returncode == 0, check.stdout + check.stderr
    run = _promtool_test(tmp_path, LOOP_RULES)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.prometheus
@pytest.mark.parametrize(
    ("old", "new"),
    [
        # just above model e's planted 1.3: the straggler case at 191h loses e
        (_BY_MODEL_SCORE, _BY_MODEL_SCORE.replace("1.3", "1.31")),
        # a floor above m's and e's cost (28.8 and 16.1 GPU-hours a day): both go quiet
        ("    min_gpu_hours_per_day: 0.25\n", "    min_gpu_hours_per_day: 30\n"),
    ],
)
def test_the_cases_fail_when_a_threshold_moves(tmp_path: Path, old: str, new: str) -> None:
    text = LOOP_RULES.read_text()
    assert old in text
    moved = tmp_path / "moved.yml"
    moved.write_text(text.replace(old, new))
    run = _promtool_test(tmp_path, moved)
    assert run.returncode != 0, "the cases should see the moved threshold"


def test_a_loop_rule_by_team_has_no_promql() -> None:
    rules = load_rules(str(LOOP_RULES))
    team = rules.get("straggler_by_team")
    model = rules.get("straggler_by_model")
    assert team is not None and model is not None
    assert has_promql(model) and not has_promql(team)
    with pytest.raises(NotPromQL, match="carry only the model"):
        prometheus_rule(team)


def _passes(rng: random.Random, sigma: float, factor: float, jobs: int = 6, days: int = 6) -> bool:
    """One evaluation of the throughput approximation on draws: a day's median rank throughput
    of ``jobs`` jobs (log-normal spread ``sigma`` per attempt, steps ``factor`` slower) against
    the mean of ``days`` such medians of the flat baseline."""

    def day(f: float) -> float:
        return statistics.median(math.exp(sigma * rng.gauss(0.0, 1.0)) / f for _ in range(jobs))

    base = statistics.mean(day(1.0) for _ in range(days))
    return base / day(factor) > THROUGHPUT_RATIO


@pytest.mark.parametrize(
    ("sigma", "factor", "lo", "hi"),
    [
        (0.05, 1.0, 0.0, 0.0),
        (0.1, 1.0, 0.001, 0.006),
        (0.15, 1.0, 0.02, 0.05),
        (0.05, 1.2, 0.93, 0.98),
        (0.1, 1.2, 0.77, 0.85),
        (0.1, 1.3, 0.98, 1.0),
        (0.15, 1.3, 0.93, 0.97),
    ],
)
def test_the_throughput_ratios_error_rates_hold(
    sigma: float, factor: float, lo: float, hi: float
) -> None:
    rng = random.Random(f"{sigma}-{factor}")
    n = 20_000
    rate = sum(_passes(rng, sigma, factor) for _ in range(n)) / n
    assert lo <= rate <= hi, rate
