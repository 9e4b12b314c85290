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
        ("    for: \u0665m\n", "for"),  # another script's digit: no duration Prometheus reads
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


@pytest.mark.parametrize(
    ("kind", "field", "value", "message"),
    [
        ("regression", "fdr", ".nan", "must be a finite number, got nan"),
        ("regression", "fdr", "0", "must be a false-discovery rate in (0, 0.5], got 0"),
        ("regression", "resolve_p", ".inf", "must be a finite number, got inf"),
        ("regression", "min_gpu_hours_per_day", "-1", "must be >= 0, got -1"),
        ("tts_regression", "increase_pct", "-5", "must be >= 0, got -5"),
        ("ett_regression", "drop_points", "150", "must be in [0, 100], got 150"),
        ("ett_slo_burn", "objective_pct", ".nan", "must be a finite number, got nan"),
        (
            "ett_slo_burn",
            "objective_pct",
            "100",
            "must be a percentage strictly between 0 and 100, got 100",
        ),
        ("ett_slo_burn", "burn_rate", ".nan", "must be a finite number, got nan"),
        ("ett_slo_burn", "burn_rate", "0", "must be a number above 0, got 0"),
        ("straggler", "min_score", "1", "must be a ratio above 1, got 1"),
    ],
)
def test_a_range_error_names_only_the_bounds_that_exist(
    kind: str, field: str, value: str, message: str
) -> None:
    needed = {"ett_slo_burn": {"objective_pct": "90", "burn_rate": "2"}}.get(kind, {})
    given = {**needed, field: value}
    text = f"rules:\n  - name: mine\n    kind: {kind}\n" + "".join(
        f"    {k}: {v}\n" for k, v in given.items()
    )
    with pytest.raises(RulesError) as err:
        parse_rules(text, "mine.yml")
    assert str(err.value) == f"mine.yml: rule 'mine': field '{field}': {message}"
    assert "None" not in str(err.value)


@pytest.mark.parametrize("value", ["{}", '""', "null", "", "abc", "{name: x}"])
def test_rules_that_are_not_a_list_are_refused_empty_or_not(value: str) -> None:
    with pytest.raises(RulesError, match=r"'rules' must be a list of rules \(`rules: \[\]` for"):
        parse_rules(f"include_defaults: false\nrules: {value}\n", "mine.yml")
    # an explicit empty list, or no rules key at all, stays allowed (only the defaults' flag)
    assert parse_rules("include_defaults: false\nrules: []\n").rules == ()
    assert parse_rules("include_defaults: false\n").rules == ()


def test_a_rules_file_that_is_not_utf8_is_a_rules_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ett_cli import main

    binary = tmp_path / "binary.yml"
    binary.write_bytes(b"rules:\n  - name: x\xff\xfe\n")
    with pytest.raises(RulesError, match=r"binary.yml: not UTF-8 text \(byte 0xff on line 2\)"):
        load_rules(binary)
    db = f"sqlite:///{tmp_path / 'none.db'}"  # never opened: the rules are read first
    for argv in (
        ["alerts", "export-prometheus", "--rules", str(binary)],
        ["alerts", "backtest", "--db", db, "--rules", str(binary)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"--rules {binary}: not UTF-8 text (byte 0xff on line 2)" in err, err
        assert "UnicodeDecodeError" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # PyYAML kept the last of two keys: a second `fdr` won, a second `rules` dropped all
        (
            "rules:\n  - name: r\n    kind: regression\n    fdr: 0.01\n    fdr: 0.5\n",
            "line 5, column 5: 'fdr' is given twice (first on line 4)",
        ),
        (
            "rules:\n  - name: r\n    kind: regression\nrules: []\n",
            "line 4, column 1: 'rules' is given twice (first on line 1)",
        ),
    ],
)
def test_a_key_given_twice_is_refused_with_its_lines(text: str, message: str) -> None:
    with pytest.raises(RulesError) as err:
        parse_rules(text, "mine.yml")
    assert str(err.value) == f"mine.yml: not valid YAML: {message}"


def test_a_yaml_error_names_the_line_not_a_unicode_string() -> None:
    with pytest.raises(RulesError) as err:
        parse_rules("rules:\n  - name: [\n", "mine.yml")
    text = str(err.value)
    assert text.startswith("mine.yml: not valid YAML: line 3, column 1: ")
    assert "<unicode string>" not in text


@pytest.mark.parametrize(
    ("text", "noted"),
    [
        ("", True),
        ("# truncated\n", True),
        ("rules: []\n", True),
        ("include_defaults: false\nrules: []\n", False),
    ],
)
def test_a_file_of_no_rules_is_noted_where_the_defaults_stay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, noted: bool
) -> None:
    """An empty or truncated rules file left the defaults in force without a word."""
    from ett_cli import main

    path = tmp_path / "mine.yml"
    path.write_text(text)
    assert load_rules(path).defaults_only is noted
    argv = ["alerts", "export-prometheus", "--rules", str(path), "-o", str(tmp_path / "o.yml")]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (f"note: {path} holds no rules: the default rules are in force" in err) is noted
    assert err.count("holds no rules") == int(noted)  # once, not once per read of the file
