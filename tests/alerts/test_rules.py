"""Rules files: the defaults load; a user file overrides them by name; bad input is refused at
start-up with the rule and the field named, and nothing is loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ett_collector.alerts.rules import Kind, RulesError, load_rules, parse_rules

GOOD = """\
rules:
  - name: ett_regression_by_model
    kind: ett_regression
    by: model
    window: 1h
    baseline: 24h
    drop_points: 5
    slo_pct: 80
  - name: restart_storm
    kind: restart_storm
    enabled: false
"""


THRESHOLD_KINDS = {
    Kind.ETT_REGRESSION,
    Kind.COMPONENT_REGRESSION,
    Kind.TTS_REGRESSION,
    Kind.CHECKPOINT_BLOCKING_REGRESSION,
}
"""Kinds of earlier versions, kept for users' files, no longer among the defaults."""


def test_defaults_load_and_a_user_file_overrides_them_by_name(tmp_path: Path) -> None:
    defaults = load_rules()
    assert {r.kind for r in defaults.rules} == set(Kind) - THRESHOLD_KINDS
    burn = [r for r in defaults.rules if r.kind is Kind.ETT_SLO_BURN]
    assert [r.enabled for r in burn] == [False, False]  # the objective is the user's to set
    assert {r.kind for r in defaults.enabled()} == {
        Kind.REGRESSION,
        Kind.PRESUMED_DEAD,
        Kind.RESTART_STORM,
    }
    regression = defaults.get("regression_by_model")
    assert regression is not None
    assert (regression.fdr, regression.min_gpu_hours_per_day) == (0.002, 0.25)
    path = tmp_path / "rules.yml"
    path.write_text(GOOD)
    rules = load_rules(path)
    assert len(rules.rules) == len(defaults.rules) + 1  # a threshold rule of its own
    ett = rules.get("ett_regression_by_model")
    assert ett is not None and (ett.window, ett.drop_points, ett.slo_pct) == ("1h", 5.0, 80.0)
    assert "restart_storm" not in [r.name for r in rules.enabled()]
    only = parse_rules("include_defaults: false\n" + GOOD)
    assert [r.name for r in only.enabled()] == ["ett_regression_by_model"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ("    threshold: 3\n", "threshold"),
        ("    for: 5 minutes\n", "for"),
        ("    drop_points: 150\n", "drop_points"),
        ("    drop_points: ten\n", "drop_points"),
        ("    window: 2h\n", "window"),
        ("    min_jobs: 0\n", "min_jobs"),
        ("    by: cluster\n", "by"),
    ],
)
def test_bad_field_names_the_rule_and_the_field(change: str, field: str) -> None:
    text = (
        "rules:\n  - name: fine\n    kind: tts_regression\n"
        "  - name: broken\n    kind: ett_regression\n    drop_points: 10\n"
    )
    lines = text.splitlines(keepends=True)
    lines = [ln for ln in lines if not (field == "drop_points" and "drop_points" in ln)]
    with pytest.raises(RulesError) as err:
        parse_rules("".join(lines) + change, "mine.yml")
    message = str(err.value)
    assert "mine.yml" in message and "'broken'" in message and f"'{field}'" in message


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fdr", "0"),
        ("fdr", "0.9"),
        ("fdr", "often"),
        ("resolve_p", "1.5"),
        ("min_gpu_hours_per_day", "-1"),
        ("components", "[speed]"),
        ("baseline", "24h"),  # not longer than the 24h window
        ("test", "t-test"),  # no such field: the kind chooses each quantity's test
    ],
)
def test_a_bad_regression_field_names_the_rule_and_the_field(field: str, value: str) -> None:
    text = f"rules:\n  - name: mine\n    kind: regression\n    window: 24h\n    {field}: {value}\n"
    with pytest.raises(RulesError) as err:
        parse_rules(text, "mine.yml")
    assert "rule 'mine'" in str(err.value) and f"'{field}'" in str(err.value)


def test_unknown_kind_and_duplicate_names_are_refused() -> None:
    with pytest.raises(RulesError, match=r"rule 'x': field 'kind'"):
        parse_rules("rules:\n  - name: x\n    kind: vibes\n")
    with pytest.raises(RulesError, match="used twice"):
        parse_rules(
            "rules:\n  - {name: x, kind: presumed_dead}\n  - {name: x, kind: presumed_dead}\n"
        )
    with pytest.raises(RulesError, match="field 'baseline'"):
        parse_rules("rules:\n  - {name: x, kind: tts_regression, window: 24h, baseline: 1h}\n")


def test_ett_serve_refuses_to_start_with_a_bad_rules_file(tmp_path: Path) -> None:
    bad = tmp_path / "rules.yml"
    bad.write_text("rules:\n  - name: slow_start\n    kind: tts_regression\n    for: soon\n")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ett_cli",
            "serve",
            "--db",
            f"sqlite:///{tmp_path / 'c.db'}",
            "--port",
            "1",
            "--alert-rules",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "rule 'slow_start': field 'for'" in run.stderr
    assert "Traceback" not in run.stderr
