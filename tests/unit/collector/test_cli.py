"""The `ett` command in-process: database commands, reports, errors for bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.read.query import QueryError, parse_instant
from ett_collector.settings import ConfigError, Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.figures import WORKED_EXAMPLE
from tests.support.worked_example import worked_example


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(worked_example("cli-job", base=1_790_000_000.0))
    pipeline.recompute_dirty()  # the background worker's part: reads never recompute
    store.close()
    return url


def test_report_json_matches_the_worked_example(db: str, capsys) -> None:
    assert main(["report", "cli-job", "--json", "--db", db]) == 0
    job = json.loads(capsys.readouterr().out)
    for key, value in WORKED_EXAMPLE.items():
        assert job[key] == pytest.approx(value), key
    assert job["fresh"] is True and job["computed_at"] > 0


def test_report_table_is_readable(db: str, capsys) -> None:
    assert main(["report", "cli-job", "--db", db]) == 0
    out = capsys.readouterr().out
    for text in ("Job cli-job", "60.0%", "Lost time by component", "scheduler", "Attempts"):
        assert text in out


def test_recompute_and_db_upgrade(db: str, capsys) -> None:
    assert main(["db", "upgrade", "--db", db]) == 0
    assert main(["recompute", "--db", db]) == 0
    assert "recomputed 1 job(s)" in capsys.readouterr().out
    assert main(["recompute", "missing-job", "--db", db]) == 1
    assert "no spans for job 'missing-job'" in capsys.readouterr().err


def test_lost_time_and_jobs(db: str, capsys) -> None:
    assert main(["lost-time", "--by", "team", "--since", "1790000000", "--json", "--db", db]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "key": "ranking",
            "idle_s": pytest.approx(70),
            "failure_s": pytest.approx(130),
            "lost_s": pytest.approx(200),
        }
    ]
    assert main(["jobs", "--json", "--db", db, "--state", "completed"]) == 0
    assert [j["job_id"] for j in json.loads(capsys.readouterr().out)] == ["cli-job"]


def test_bad_times_are_refused_with_a_message(db: str, capsys) -> None:
    assert main(["lost-time", "--since", "yesterday-ish", "--db", db]) == 2
    assert "cannot read time 'yesterday-ish'" in capsys.readouterr().err
    assert main(["lost-time", "--since", "1d", "--until", "2d", "--db", db]) == 2
    assert "until is before since" in capsys.readouterr().err
    for command in ("lost-time", "jobs", "fleet", "checkpoint-advice"):
        for text in ("nan", "inf", "-inf"):
            assert main([command, f"--since={text}", "--db", db]) == 2, (command, text)
            assert f"cannot read time '{text}'" in capsys.readouterr().err


def test_unknown_job_exits_1(db: str, capsys) -> None:
    assert main(["report", "nope", "--db", db]) == 1
    err = capsys.readouterr().err
    assert "no job 'nope'" in err and "`ett jobs` lists the jobs there" in err
    assert "set ETT_HOME" not in err  # --db was given: the id is what to check
    assert "did you mean" not in err  # nothing like it
    assert main(["report", "cli-jb", "--db", db]) == 1
    assert "did you mean 'cli-job'?" in capsys.readouterr().err


def test_bad_config_fails_fast(capsys) -> None:
    assert main(["serve", "--db", "mysql://x@y/z"]) == 2
    assert "mysql databases are not supported" in capsys.readouterr().err
    with pytest.raises(ConfigError):
        Settings(port=70000, db_url="sqlite:///x.db")


def test_parse_instant() -> None:
    now = 1_000_000.0
    assert parse_instant("7d", now) == now - 7 * 86400
    assert parse_instant("30m", now) == now - 1800
    assert parse_instant("2026-11-29T00:00:00Z", now) == 1795910400.0
    assert parse_instant("", now) is None
    with pytest.raises(QueryError):
        parse_instant("soon", now)
    # ISO 8601's basic date form read as unix seconds would be a day of 1970
    with pytest.raises(QueryError, match="write 2026-12-01"):
        parse_instant("20261201", now)
    assert parse_instant("99999999", now) == 99999999.0  # no date: seconds still
    assert parse_instant("1795910400", now) == 1795910400.0
    # a duration before now, as shells and Grafana write it
    assert parse_instant("-3d", now) == parse_instant("now-3d", now) == now - 3 * 86400
    assert parse_instant("now", now) == now
    with pytest.raises(QueryError):
        parse_instant("now3d", now)
    for digits in ("\u0663d", "\u0663\u0660", "\uff13\uff10m"):  # another script's digits
        with pytest.raises(QueryError, match="cannot read time"):
            parse_instant(digits, now)


def test_a_dashed_duration_reaches_the_option(tmp_path: Path, capsys) -> None:
    """``--since -3d`` was taken by argparse for an option and stopped the command."""
    url = f"sqlite:///{tmp_path / 'none.db'}"
    assert main(["lost-time", "--db", url, "--since", "-3d"]) == 1
    err = capsys.readouterr().err
    assert "expected one argument" not in err and "does not exist" in err
    # a real option after --since is still an option
    with pytest.raises(SystemExit) as stop:
        main(["lost-time", "--since", "--json"])
    assert stop.value.code == 2
    assert "expected one argument" in capsys.readouterr().err


def test_reads_of_a_dirty_database(tmp_path: Path, capsys) -> None:
    url = f"sqlite:///{tmp_path / 'dirty.db'}"
    store = Store(url)
    store.upgrade()
    Pipeline(store).ingest(worked_example("dirty-job", base=1_790_000_000.0))
    store.close()

    assert main(["jobs", "--json", "--db", url]) == 0  # a list read computes nothing...
    captured = capsys.readouterr()
    assert json.loads(captured.out) == []
    assert "1 job(s) have spans newer than their figures" in captured.err  # ...and says so
    assert main(["report", "dirty-job", "--json", "--db", url]) == 0  # one job: waits for it
    assert json.loads(capsys.readouterr().out)["ett_pct"] == pytest.approx(60)
    assert main(["jobs", "--json", "--db", url]) == 0
    captured = capsys.readouterr()
    assert [j["job_id"] for j in json.loads(captured.out)] == ["dirty-job"]
    assert captured.err == ""


def test_jobs_says_when_no_job_matches(db: str, capsys) -> None:
    assert main(["jobs", "--db", db, "--model", "nosuch", "--state", "completed"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""  # piped: no header for no rows (`| wc -l` counts jobs)
    assert captured.err.strip() == "ett jobs: no job matches (--state completed --model nosuch)"
    assert main(["jobs", "--db", db]) == 0
    assert capsys.readouterr().err == ""  # one job: the whole list, nothing to say
    assert main(["jobs", "--db", db, "--limit", "1"]) == 0
    assert capsys.readouterr().err.strip() == "ett jobs: the 1 newest shown; --limit N shows more"


def test_lost_time_says_the_window_it_summed(db: str, capsys) -> None:
    """It printed no window at all: a sum over "--since 7d" read as over all time."""
    since, until = "2026-09-21T12:00:00Z", "2026-09-22T00:00:00"  # no zone: UTC
    assert main(["lost-time", "--since", since, "--until", until, "--db", db]) == 0
    out = capsys.readouterr().out
    assert "Window: 2026-09-21 12:00:00 to 2026-09-22 00:00:00 UTC" in out.splitlines()[0]
    assert main(["lost-time", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("Window: everything stored up to ")
    assert main(["lost-time", "--json", "--db", db]) == 0
    assert capsys.readouterr().out.startswith("[")  # the API's list, as it was


def test_lost_time_keeps_names_whole_and_drops_its_bars_when_narrow() -> None:
    from rich.console import Console

    from ett_collector.commands._render import LOST_TIME_BARS_FROM, print_lost_time

    rows = [
        {"key": "checkpoint", "idle_s": 4000.0, "failure_s": 300.0, "lost_s": 4300.0},
        {"key": "scheduler", "idle_s": 700.0, "failure_s": 4200.0, "lost_s": 4900.0},
    ]
    for width in (50, LOST_TIME_BARS_FROM):
        out = Console(width=width, record=True, file=io.StringIO())
        print_lost_time(rows, "component", out)  # type: ignore[arg-type]
        text = out.export_text()
        assert ("█" in text) is (width >= LOST_TIME_BARS_FROM), text
        cells = "".join(line.split("│")[1].strip() for line in text.splitlines() if "│" in line)
        assert "checkpoint" in cells and "scheduler" in cells, text  # folded, not cut
