"""A new user's wrong turns with the README's commands, typed as they would type them: each is
one line on stderr, no traceback, and the exit code the README promises (2 for what was typed
wrong, 0 for a reader that left the pipe early)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.errors import one_line
from tests.support.worked_example import worked_example

ETT = str(Path(sys.executable).with_name("ett"))
JOB = "wrong-turns-job"


def _run(
    argv: list[str], tmp_path: Path, stdout: int = subprocess.PIPE, columns: int = 80
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(tmp_path), "ETT_HOME": str(tmp_path / "home")}
    env["COLUMNS"] = str(columns)  # the width rich lays its tables out in
    env.pop("ETT_DEBUG", None)
    return subprocess.run(
        [ETT, *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'collector.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(worked_example(JOB, base=1_790_000_000.0))
    while pipeline.recompute_dirty():
        pass
    store.close()
    return url


def test_dashboard_on_a_busy_port_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        done = _run(["dashboard", "--port", str(port)], tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert line == (
        f"ett dashboard: port {port} is in use (another ett dashboard?): stop it or pass --port N"
    )
    assert done.stdout == ""  # never announced a dashboard that is not there


def test_dashboard_on_a_bad_host_is_one_line(tmp_path: Path) -> None:
    done = _run(["dashboard", "--host", "999.1.1.1", "--port", "18501"], tmp_path)
    assert done.returncode == 2
    assert one_line(done.stderr).startswith("ett dashboard: --host '999.1.1.1' is not an address")
    assert done.stdout == ""


@pytest.mark.parametrize(
    "argv",
    [["report", JOB], ["lost-time", "--since", "30d"], ["fleet", "--since", "30d"]],
    ids=["report", "lost-time", "fleet"],
)
def test_a_table_into_a_closed_pipe_exits_0_quietly(
    argv: list[str], db_url: str, tmp_path: Path
) -> None:
    """`ett report JOB | head -1`: the reader is gone before the table is written (a pipe whose
    read end is closed, so the write fails every time, whatever the machine's speed)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = _run([*argv, "--db", db_url], tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 0


def test_a_truth_file_into_a_closed_pipe_exits_0_quietly(tmp_path: Path) -> None:
    """`ett simulate --dry-run --truth /dev/stdout | head -1`: the truth is the stdout."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    argv = ["simulate", "--dry-run", "--jobs", "50", "--days", "2", "--truth", "/dev/stdout"]
    try:
        done = _run(argv, tmp_path, stdout=write_end)
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 0


def test_the_same_tables_print_when_read(db_url: str, tmp_path: Path) -> None:
    """The closed-pipe test's commands do write their tables (so it tested a real write)."""
    done = _run(["report", JOB, "--db", db_url], tmp_path)
    assert done.returncode == 0, done.stderr
    assert JOB in done.stdout and "ETT" in done.stdout


FIRED, RESOLVED = 1_790_000_060.0, 1_790_000_090.0


def _utc(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _seed_alerts(db_url: str, long: bool = False) -> None:
    from ett_collector.alerts._state import Alert, AlertState
    from ett_collector.alerts._store import AlertStore

    def alert(
        rule: str, state: AlertState, resolved: float | None, model: str = "dlrm-small"
    ) -> Alert:
        return Alert(
            rule=rule,
            key=f"model={model},{rule}",
            labels={"model": model, "component": "checkpoint", "rule": rule},
            annotations={"description": f"{rule} says the checkpoints of {model} " * 3},
            state=state,
            active_since=1_790_000_000.0,
            last_eval=1_790_000_100.0,
            fired_at=FIRED,
            resolved_at=resolved,
        )

    store = Store(db_url)
    AlertStore(store.engine).save(
        [
            alert("ett_slo_burn_fast_by_model", AlertState.FIRING, None),
            alert("regression_by_model", AlertState.RESOLVED, RESOLVED),
            *([alert("regression_by_model", AlertState.FIRING, None, LONG_MODEL)] if long else []),
        ]
    )
    store.close()


LONG_MODEL = "recsys-ranking-dlrm-extra-large-multitask-experimental-candidate-v17-rc3"


def test_alerts_of_a_long_model_name_keep_what_they_say(db_url: str, tmp_path: Path) -> None:
    """A probe's 105-character model took the alert column's whole width at 80 and 100 columns, and
    the column of what the alert says was left out: now the name folds in its column."""
    _seed_alerts(db_url, long=True)
    done = _run(["alerts", "--db", db_url, "--state", "firing"], tmp_path, columns=80)
    assert done.returncode == 0, done.stderr
    rows = [line.split("│")[1:3] for line in done.stdout.splitlines() if line.startswith("│")]
    alert = "".join(cell.strip() for cell, _ in rows)
    what = " ".join(cell.strip() for _, cell in rows)
    assert f"model={LONG_MODEL}" in alert and "regression_by_model" in alert
    assert "says the checkpoints of" in what and max(len(c) for _, c in rows) >= 20


@pytest.mark.parametrize("columns", [80, 60, 40])
def test_alerts_on_a_narrow_terminal_keep_every_rule_name_whole(
    db_url: str, tmp_path: Path, columns: int
) -> None:
    _seed_alerts(db_url)
    done = _run(["alerts", "--db", db_url], tmp_path, columns=columns)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= max(columns, 30)  # the longest rule name + frame
    cells = [line.split("│")[1].strip() for line in lines if line.startswith("│")]
    for rule in ("ett_slo_burn_fast_by_model", "regression_by_model"):
        assert rule in cells
    assert {"firing", "resolved", f"fired {_utc(FIRED)}", f"resolved {_utc(RESOLVED)}"} <= set(
        cells
    )
    firing = _run(["alerts", "--db", db_url, "--state", "firing"], tmp_path, columns=columns)
    cells = [line.split("│")[1].strip() for line in firing.stdout.splitlines() if "│" in line]
    assert "ett_slo_burn_fast_by_model" in cells
    assert not {"firing", "resolved", "regression_by_model"} & set(cells)


def test_simulate_into_a_plain_path_as_the_readers_take_it(tmp_path: Path) -> None:
    """README: `--db` also takes a plain path to a SQLite file; `ett simulate --db fleet.db`
    used to stop at "Could not parse SQLAlchemy URL"."""
    db = tmp_path / "fleet.db"
    done = _run(["simulate", "--db", str(db), "--jobs", "1", "--days", "1"], tmp_path)
    assert done.returncode == 0, done.stderr
    listed = _run(["jobs", "--db", str(db)], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) >= 2  # the header and the simulated job(s)


def test_serve_with_a_database_under_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("not a folder")
    db = tmp_path / "afile" / "x.db"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _run(["serve", "--db", str(db), "--port", str(port)], tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert line.startswith(f"ett serve: cannot create the database sqlite:///{db} (from --db): ")
    assert line.endswith(f"{tmp_path / 'afile'} is a file, not a folder")


def test_simulate_with_no_collector_says_so(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # released: nothing listens there
    endpoint = f"http://127.0.0.1:{port}"
    done = _run(["simulate", "--jobs", "1", "--days", "1", "--endpoint", endpoint], tmp_path)
    assert done.returncode == 1
    line = one_line(done.stderr)
    assert line.startswith(f"ett simulate: nothing answers at {endpoint} (")
    assert "ett serve" in line


def test_a_read_names_its_command_in_its_error(db_url: str, tmp_path: Path) -> None:
    done = _run(["report", "nope", "--db", db_url], tmp_path)
    assert done.returncode == 1
    assert one_line(done.stderr).startswith("ett report: no job 'nope' in ")
    done = _run(["lost-time", "--since", "yesterday", "--db", db_url], tmp_path)
    assert done.returncode == 2
    assert one_line(done.stderr).startswith("ett lost-time: cannot read time 'yesterday'")


def test_recompute_of_a_mistyped_database_creates_nothing(db_url: str, tmp_path: Path) -> None:
    typo = tmp_path / "colector.db"
    done = _run(["recompute", JOB, "--db", str(typo)], tmp_path)
    assert done.returncode == 1, done  # as `ett report` on a missing database
    assert "does not exist" in one_line(done.stderr) and done.stdout == ""
    assert not typo.exists()
    done = _run(["recompute", "nope", "--db", db_url], tmp_path)
    assert done.returncode == 1 and done.stdout == ""  # no "recomputed 0 job(s)" beside the error
    assert one_line(done.stderr) == "ett recompute: no spans for job 'nope'"
    done = _run(["recompute", JOB, "nope", "--db", db_url], tmp_path)
    assert done.returncode == 1 and done.stdout == "recomputed 1 job(s)\n"


@pytest.mark.parametrize("columns", [100, 60, 40])
def test_a_report_on_a_narrow_terminal_cuts_no_column(
    db_url: str, tmp_path: Path, columns: int
) -> None:
    """At 60 columns the attempts table lost its "cause" and "rank" columns off the right
    edge, and the slowest windows their start times ("2026-1…"): rich measured a minimum that
    fitted and then cropped. A table that does not fit whole is now one card per row."""
    done = _run(["report", JOB, "--db", db_url], tmp_path, columns=columns)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "…" not in out
    assert max(len(line.rstrip()) for line in out.splitlines()) <= columns
    flat = " ".join(out.split())  # a value folded over lines is still whole, word by word
    for header in ("first batch", "end reason", "cause", "rank"):
        assert header in flat
    assert "killed" in flat and "completed" in flat  # the attempts' causes and end reasons
    assert "checkpoint" in flat


@pytest.mark.parametrize("command", ["jobs", "alerts"])
def test_a_limit_past_any_list_is_one_line(db_url: str, tmp_path: Path, command: str) -> None:
    """ett jobs --limit 99999999999999999999 printed 'OverflowError: ...' as an internal error."""
    done = _run([command, "--limit", "9" * 20, "--db", db_url], tmp_path)
    assert done.returncode == 2
    assert "between 1 and 1,000,000" in one_line(done.stderr)


@pytest.mark.parametrize("db", ["sqlite:///", "sqlite://", "sqlite:///:memory:", ""])
@pytest.mark.parametrize(
    "command", [["jobs"], ["serve", "--port", "0"], ["simulate", "--jobs", "2", "--days", "1"]]
)
def test_a_database_that_names_no_file_is_refused(
    tmp_path: Path, db: str, command: list[str]
) -> None:
    """--db sqlite:/// was taken: ett serve said it listened, then logged 'no such table'
    tracebacks every few seconds; ett simulate wrote a fleet into a database that vanished with
    its connection and exited 0. An empty --db fell back to $ETT_HOME without a word."""
    done = _run([*command, "--db", db], tmp_path)
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert ("names no file" in line) if db else ("--db is empty" in line)
    assert not (tmp_path / "home").exists()  # nothing created at the default either


@pytest.mark.parametrize("columns", [30, 50, 80])
@pytest.mark.parametrize("command", [["lost-time"], ["fleet"], ["checkpoint-advice"]])
def test_tables_on_a_narrow_terminal_cut_no_figure(
    db_url: str, tmp_path: Path, columns: int, command: list[str]
) -> None:
    """At 50 columns ett lost-time cut its durations ('2h 48' for '2h 48m 03s') and lost its
    share column; ett fleet folded model names mid-word ('dlrm-larg' / 'e') even at 80. A
    table that does not fit whole drops its least figures, or becomes one card per row."""
    since = ["--since", "3650d"] if command != ["checkpoint-advice"] else []
    done = _run([*command, *since, "--db", db_url], tmp_path, columns=columns)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "…" not in done.stdout
    assert max(len(line.rstrip()) for line in lines) <= columns, done.stdout
    words = done.stdout.split()
    assert any(w.endswith("%") for w in words) or command == ["checkpoint-advice"]
    if command == ["fleet"]:
        assert JOB in words or f"│{JOB}" in done.stdout  # the job id on one line
    if command == ["lost-time"]:
        assert "scheduler" in words and "checkpoint" in words


def test_small_wrong_turns_get_their_own_answer(db_url: str, tmp_path: Path) -> None:
    """From one probe: an empty piped list printed its header (`| wc -l` said 1); ett db
    upgrade of a new file said 'up to date'; --refresh-s nan was taken."""
    none = _run(["jobs", "--state", "failed", "--db", db_url], tmp_path)
    assert none.returncode == 0 and none.stdout == ""
    assert "no job matches" in none.stderr
    fresh = tmp_path / "fresh.db"
    made = _run(["db", "upgrade", "--db", str(fresh)], tmp_path)
    assert made.returncode == 0 and made.stdout.startswith("created ") and fresh.exists()
    again = _run(["db", "upgrade", "--db", str(fresh)], tmp_path)
    assert again.stdout.strip() == "database schema is up to date"
    for bad in ("nan", "inf", "0"):
        refused = _run(["dashboard", "--refresh-s", bad], tmp_path)
        assert refused.returncode == 2
        assert "--refresh-s must be a positive number" in one_line(refused.stderr)


def test_the_readmes_lost_time_example_is_what_its_commands_print(tmp_path: Path) -> None:
    """The README showed a table no command could reproduce (the week ended at the run's now)."""
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    shown = readme.split("--db week.db`: the same", 1)[1].split("```", 2)[1].strip().splitlines()
    db = tmp_path / "week.db"
    start = "2026-11-01T00:00:00Z"
    sim = _run(
        ["simulate", "--days", "7", "--jobs", "60", "--start", start, "--db", str(db)], tmp_path
    )
    assert sim.returncode == 0, sim.stderr
    done = _run(["lost-time", "--since", start, "--db", str(db)], tmp_path, columns=100)
    printed = [line.rstrip() for line in done.stdout.splitlines()]
    for line in shown:
        assert line.rstrip() in printed, (line, done.stdout)


def test_serve_says_the_folder_it_makes_for_a_named_database(tmp_path: Path) -> None:
    """ett serve --db /nonexistdir/x.db made /nonexistdir at the file system's root without a
    word (a typo in a path is then a new empty collector); a short --token passed silently
    where a token file refuses it."""
    db = tmp_path / "not" / "there" / "x.db"
    proc = subprocess.Popen(
        [ETT, "serve", "--port", str(_free()), "--db", str(db), "--token", "short"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "HOME": str(tmp_path), "ETT_HOME": str(tmp_path / "home")},
    )
    try:
        assert proc.stderr is not None
        lines = [proc.stderr.readline(), proc.stderr.readline()]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert "--token has 5 characters" in lines[0] and "short" not in lines[0].split(":")[-1]
    assert lines[1].strip() == f"ett serve: created the folder {db.parent} for the database"


def _free() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
