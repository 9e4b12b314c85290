"""The ``--truth`` file: one line per planted regression in the agreed format (also those planted
after the history's end), then the jobs' lines as before; ``read_truth`` reads both back and
names the line of anything it cannot read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ett_cli import main
from ett_simulator import (
    FleetSpec,
    Regression,
    TruthFileError,
    load_profile,
    parse_regression,
    read_truth,
    simulate,
)
from ett_simulator.truth_file import job_line

START = 1_789_948_800.0  # 2026-09-21T00:00:00Z, as --start below
MODEL = "model=dlrm-small component=checkpoint factor=6 at=2026-09-22T18:00:00Z"
TEAM = "team=ads component=failure factor=1.5 at=2026-10-01T00:00:00.250Z"  # after the end
KEYS = ["record", "model", "team", "component", "factor", "at", "at_iso"]


def _run(tmp_path: Path, *args: str) -> Path:
    truth = tmp_path / "truth.jsonl"
    argv = ["simulate", "--dry-run", "--jobs", "8", "--days", "2", "--seed", "3"]
    assert main([*argv, "--start", "2026-09-21T00:00:00Z", "--truth", str(truth), *args]) == 0
    return truth


def test_regressions_are_written_first_in_the_agreed_format(tmp_path: Path) -> None:
    truth = _run(tmp_path, "--regress", MODEL, "--regress", TEAM)
    first, second, *jobs = (json.loads(line) for line in truth.read_text().splitlines())
    assert list(first) == KEYS and list(second) == KEYS
    assert first == {
        "record": "regression",
        "model": "dlrm-small",
        "team": None,
        "component": "checkpoint",
        "factor": 6.0,
        "at": 1_790_100_000.0,
        "at_iso": "2026-09-22T18:00:00Z",
    }
    assert second == {
        "record": "regression",
        "model": None,
        "team": "ads",
        "component": "failure",
        "factor": 1.5,
        "at": 1_790_812_800.25,
        "at_iso": "2026-10-01T00:00:00.250000Z",
    }
    assert isinstance(first["factor"], float) and isinstance(first["at"], float)
    assert second["at"] > START + 2 * 86400  # planted after the history's end, and written
    assert jobs and all("record" not in job and "wall_s" in job for job in jobs)


def test_read_truth_gives_the_jobs_and_the_regressions(tmp_path: Path) -> None:
    truth = _run(tmp_path, "--regress", MODEL, "--regress", TEAM)
    regs = (parse_regression(MODEL), parse_regression(TEAM))
    fleet = FleetSpec(load_profile(), jobs=8, days=2, seed=3, start=START, regressions=regs)
    expected = simulate(fleet, None)
    jobs, regressions = read_truth(truth)
    assert regressions == [parse_regression(MODEL), parse_regression(TEAM)]
    assert regressions[1] == Regression("failure", 1.5, 1_790_812_800.25, team="ads")
    assert [j.to_json() for j in jobs] == [t.to_json() for t in expected.truths]
    assert jobs and all(j.phase_s == {} for j in jobs)


def test_without_regressions_the_file_holds_jobs_only(tmp_path: Path) -> None:
    jobs, regressions = read_truth(_run(tmp_path))
    assert jobs and regressions == []


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "truth.jsonl:2: not a JSON object"),
        ("[1, 2]", "truth.jsonl:2: not a JSON object"),
        ('{"record": "window"}', "truth.jsonl:2: unknown record 'window'"),
        ('{"job_id": "x"}', "truth.jsonl:2: not a job's truth; missing attempts"),
        (
            '{"record": "regression", "model": "m", "team": null}',
            "a regression record has the keys record, model, team, component, factor, at, at_iso",
        ),
        (
            '{"record": "regression", "model": "m", "team": "t", "component": "eval", '
            '"factor": 2.0, "at": 1.0, "at_iso": ""}',
            "a regression names a model or a team (the other null)",
        ),
        (
            '{"record": "regression", "model": "m", "team": null, "component": "disk", '
            '"factor": 2.0, "at": 1.0, "at_iso": ""}',
            "unknown component 'disk'",
        ),
        (
            '{"record": "regression", "model": "m", "team": null, "component": "eval", '
            '"factor": 0, "at": 1.0, "at_iso": ""}',
            "factor must be a number > 0, got 0",
        ),
        (
            '{"record": "regression", "model": "m", "team": null, "component": "eval", '
            '"factor": 2.0, "at": "soon", "at_iso": ""}',
            "at must be unix seconds, got 'soon'",
        ),
    ],
)
def test_read_truth_names_the_line_it_cannot_read(tmp_path: Path, line: str, expected: str) -> None:
    path = tmp_path / "truth.jsonl"
    path.write_text(f"\n{line}\n")  # the blank first line is skipped, and still counted
    with pytest.raises(TruthFileError) as caught:
        read_truth(path)
    assert expected in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_a_job_line_reads_back_as_the_same_truth(tmp_path: Path) -> None:
    fleet = FleetSpec(load_profile(), jobs=3, days=1, seed=2, start=START)
    truths = simulate(fleet, None).truths
    path = tmp_path / "truth.jsonl"
    path.write_text("".join(job_line(t) for t in truths))
    jobs, _ = read_truth(path)
    assert [j.to_json() for j in jobs] == [t.to_json() for t in truths]
