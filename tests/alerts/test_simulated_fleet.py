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
START = 1_793_952_000.0  # 2026-11-06T08:00:00Z: fixed, so the fleet is the same on every run, and
# past (`ett simulate` refuses a start after now)
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
    assert "  by rule:\n    regression_by_model: 1 firing(s), 1 true, 0 false\n" in shown.stdout
    as_json = subprocess.run([*bt, "--json"], capture_output=True, text=True, timeout=300)
    quality = json.loads(as_json.stdout)["quality"]
    assert quality["precision"] == 1.0 and quality["recall"] == 1.0
    assert quality["by_rule"] == [
        {"rule": "regression_by_model", "firings": 1, "true_firings": 1, "false_firings": 0}
    ]
    [planted] = quality["planted"]
    assert planted["found"] and 0 <= planted["delay_s"] <= 2 * DAY
    # a truth file that is not one
    (tmp_path / "bad.jsonl").write_text('{"record": "regression", "model": "m"}\n')
    bad = subprocess.run([*bt[:-1], str(tmp_path / "bad.jsonl")], capture_output=True, text=True)
    assert bad.returncode == 2 and "bad.jsonl:1: field 'component' of a regression" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_an_onset_outside_the_backtest_is_not_scored_and_not_missed(
    regressed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from ett_cli import main

    db, truth = regressed
    argv = ["alerts", "backtest", "--db", str(db), "--truth", str(truth)]
    since = datetime.fromtimestamp(START, UTC).isoformat()
    until = datetime.fromtimestamp(ONSET - DAY, UTC).isoformat()
    assert main([*argv, "--since", since, "--until", until]) == 0
    out = capsys.readouterr().out
    assert f"model={MODEL} {COMPONENT} x6" in out
    assert "not scored (onset after the backtest)" in out and "MISSED" not in out, out


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def test_a_backtest_begun_mid_incident_lists_it_from_its_own_firing(
    regressed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """A backtest whose window begins while an incident fires walks the rules' reach before the
    window first, as the live evaluator has walked it: the incident is listed with the firing
    time, onset and size of a backtest begun before its onset, marked as fired before the
    window, where it fired at the window's start against a baseline that already held the
    change. Scored against the truth, the plant is not scored (its onset is before the window),
    its delay is the real one, and its firing is a true one."""
    from ett_cli import main

    db, truth = regressed
    [whole] = _regressions(f"sqlite:///{db}")
    since = ONSET + DAY
    assert whole.fired_at < since and whole.resolved_at is None  # the fleet: firing at since
    argv = ["alerts", "backtest", "--db", str(db), "--since", _iso(since)]
    argv += ["--until", _iso(START + 9 * DAY), "--truth", str(truth)]
    assert main([*argv, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    [mid] = [f for f in shown["firings"] if f["rule"] == "regression_by_model"]
    assert mid["fired_at"] == whole.fired_at and mid["before_window"] is True, mid
    assert mid["description"] == whole.description  # its onset and size: the whole walk's
    quality = shown["quality"]
    assert (quality["precision"], quality["recall"]) == (1.0, None)
    [planted] = quality["planted"]
    assert not planted["scored"] and planted["delay_s"] == whole.fired_at - ONSET
    assert main(argv) == 0
    out = capsys.readouterr().out
    fired = datetime.fromtimestamp(whole.fired_at, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    assert f"  {fired} (before the window) .. firing  regression_by_model" in out, out
    assert "(1 of them fired before it)" in out.splitlines()[0]
    line = next(x for x in out.splitlines() if f"{COMPONENT} x6" in x)
    delay = f"found after {(whole.fired_at - ONSET) / 3600:.1f} h"
    assert f"not scored (onset before the backtest); {delay} (firing since {fired}" in line


def _firing(rule: str, model: str, component: str, at: float) -> Firing:
    labels = {"rule": rule, "model": model, "component": component}
    return Firing(rule, labels, at, None, 1.0, None, (), "")


def test_the_score_counts_each_rules_firings_apart() -> None:
    from ett_collector.alerts._quality import Planted, score

    planted = [Planted(COMPONENT, 6.0, ONSET, model=MODEL)]
    firings = [
        _firing("regression_by_model", MODEL, COMPONENT, ONSET + 3600),
        _firing("regression_by_model", MODEL, "data", ONSET + 3600),
        _firing("ett_drop", MODEL, COMPONENT, ONSET + 7200),
        _firing("ett_drop", MODEL, "compile", ONSET - 3600),
        _firing("ett_drop", "dcn-v2", "data", ONSET + 3600),
    ]
    q = score(firings, planted, START, START + 9 * DAY)
    assert (q.firings, q.true_firings, q.false_firings) == (5, 2, 3)  # pooled, as before
    assert [(r.rule, r.firings, r.true_firings, r.false_firings) for r in q.by_rule] == [
        ("ett_drop", 3, 1, 2),
        ("regression_by_model", 2, 1, 1),
    ]
    assert q.to_dict()["by_rule"][1] == {
        "rule": "regression_by_model",
        "firings": 2,
        "true_firings": 1,
        "false_firings": 1,
    }


def test_a_plant_that_speeds_its_component_up_is_no_regression_to_find() -> None:
    """`--regress` has no end: a probe ended its x5 regression with a x0.2 plant, which the
    score counted as a regression and reported MISSED (recall 0.50 for 2 of 2 found)."""
    from ett_collector.alerts._quality import Planted, score

    end = ONSET + 2 * DAY
    planted = [
        Planted(COMPONENT, 5.0, ONSET, model=MODEL),
        Planted(COMPONENT, 0.2, end, model=MODEL),
    ]
    firings = [_firing("regression_by_model", MODEL, COMPONENT, ONSET + 3600)]
    q = score(firings, planted, START, end + 3 * DAY)  # both onsets inside, days before its end
    assert q.recall == 1.0 and (q.true_firings, q.false_firings) == (1, 0)
    found, ended = q.detections
    assert found.scored and found.found and not ended.scored and not ended.found


def _empty_db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    store = Store(url)
    store.upgrade()
    store.engine.dispose()
    return url


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "holds no planted regressions (it is empty): write them with `ett simulate"),
        (b"\n  \n", "holds no planted regressions (it is empty)"),
        (b"[1, 2]\n", "truth.jsonl:1: not a JSON object, got [1, 2]"),
        (b'\n"x"\n', 'truth.jsonl:2: not a JSON object, got "x"'),
        (b"{}\n\xff\xfe\n", "truth.jsonl: not UTF-8 text (byte 0xff on line 2)"),
    ],
)
def test_a_truth_file_without_planted_records_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, message: str
) -> None:
    from ett_cli import main

    truth = tmp_path / "truth.jsonl"
    truth.write_bytes(content)
    argv = ["alerts", "backtest", "--db", _empty_db(tmp_path), "--truth", str(truth)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--truth {truth}" in err and message in err, err
    assert "UnicodeDecodeError" not in err


def test_a_truth_file_of_jobs_alone_is_scored_with_a_note_off_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], regressed: tuple[Path, Path]
) -> None:
    from ett_cli import main

    db, full = regressed
    truth = tmp_path / "truth.jsonl"  # `ett simulate --truth` without --regress: jobs only
    jobs = [line for line in full.read_text().splitlines() if '"record"' not in line]
    truth.write_text("\n".join(jobs) + "\n")
    argv = ["alerts", "backtest", "--db", str(db), "--since", "1h", "--truth", str(truth)]
    assert main([*argv, "--json"]) == 0
    shown = capsys.readouterr()
    assert json.loads(shown.out)["quality"]["planted"] == []  # stdout is JSON alone
    assert "plants no regression" in shown.err


def test_a_truth_file_of_another_fleet_is_refused_and_an_unknown_model_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], regressed: tuple[Path, Path]
) -> None:
    """A truth file scored against another fleet's database gave precision and recall as if
    it were its own (1.00 / 1.00 once, by chance), and a plant of a model the database lacks
    was MISSED with no word."""
    from ett_cli import main

    db, _ = regressed
    other = tmp_path / "other.jsonl"
    other.write_text('{"job_id": "elsewhere-1"}\n{"job_id": "elsewhere-2"}\n')
    argv = ["alerts", "backtest", "--db", str(db), "--since", "1h", "--truth"]
    assert main([*argv, str(other)]) == 2
    err = capsys.readouterr().err
    assert "none of its 2 job(s) is in the database" in err and "another fleet" in err
    ghost = tmp_path / "ghost.jsonl"
    ghost.write_text(
        '{"record": "regression", "model": "gpt-x", "component": "data", "factor": 3, '
        f'"at": {START + DAY}}}\n'
    )
    assert main([*argv, str(ghost)]) == 0
    err = capsys.readouterr().err
    assert "plants a regression of model 'gpt-x', which has no job in the database" in err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"record": "bogus"}', "'record' must be regression or straggler, got 'bogus'"),
        ('{"foo": 1}', "neither a planted record (a 'record' field) nor a job"),
        (
            '{"record": "regression", "model": "m", "component": "warp", "factor": 3, "at": 1}',
            "field 'component' of a regression record must be one of scheduler,",
        ),
        (
            '{"record": "regression", "model": "m", "component": "data", "factor": 3, '
            '"at": "yesterday"}',
            "field 'at' of a regression record must be epoch seconds, got 'yesterday'",
        ),
        (
            '{"record": "regression", "model": "m", "component": "data", "factor": 0, "at": 1}',
            "field 'factor' of a regression record must be above 0, got 0",
        ),
        (
            '{"record": "regression", "component": "data", "factor": 3, "at": 1}',
            "a regression record needs a 'model' or a 'team'",
        ),
        ('{"record": "straggler", "factor": 1.5, "at": 1}', "a straggler record needs a 'model'"),
    ],
)
def test_a_bad_truth_record_names_its_line_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    from ett_cli import main

    truth = tmp_path / "truth.jsonl"
    truth.write_text('{"job_id": "j1"}\n' + line + "\n")
    argv = ["alerts", "backtest", "--db", _empty_db(tmp_path), "--truth", str(truth)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--truth {truth}:2: {message}" in err, err


def test_backtest_step_must_be_positive_and_the_help_says_its_default_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ett_cli import main

    db = _empty_db(tmp_path)
    for step in ("0s", "0m"):
        assert main(["alerts", "backtest", "--db", db, "--step", step]) == 2
        err = capsys.readouterr().err
        assert f"--step must be a positive duration such as 30s, got '{step}'" in err
    assert main(["alerts", "backtest", "--db", db, "--step", "1h"]) == 0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["alerts", "backtest", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "(default: none;" in shown
    assert 'with --truth, an object {"firings": [...], "quality": {...}}' in shown
