"""A new user's wrong turns with `ett` (issue 17): each test types the command the user typed.

Read commands never create a database and name the one they searched; a bad --db or
ETT_DB_URL is one line (exit 2), an unreachable database one line (exit 1); `ett serve` checks
its address before it creates anything; tables never cut job ids; help states defaults.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from ett_cli import main
from ett_cli._main import build_parser
from ett_collector.commands import _render
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.errors import one_line
from tests.support.ports import free_port
from tests.support.worked_example import worked_example

ETT = str(Path(sys.executable).with_name("ett"))
LONG_ID = "newcomer-dlrm-2026-11-30-rank-sweep-0042"


def _fill(path: Path, job_ids: list[str]) -> str:
    url = f"sqlite:///{path}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    for i, job_id in enumerate(job_ids):
        pipeline.ingest(worked_example(job_id, base=1_790_000_000.0 + i))
    while pipeline.recompute_dirty():
        pass
    store.close()
    return url


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    path = tmp_path / "collector.db"
    _fill(path, [LONG_ID])
    return path


# --- reads never create a database --------------------------------------------------------


def test_report_on_a_missing_database_creates_nothing(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    assert main(["report", "X", "--db", f"sqlite:///{missing}"]) == 1
    line = one_line(capsys.readouterr().err)
    assert str(missing) in line and "does not exist" in line
    assert "--db" in line and "ETT_HOME" in line
    assert not (tmp_path / "nonexistent").exists()


def test_reads_without_ett_home_data_create_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    home = tmp_path / "fresh-home"
    monkeypatch.setenv("ETT_HOME", str(home))
    monkeypatch.delenv("ETT_DB_URL", raising=False)
    for argv in (["report", "X"], ["jobs"], ["lost-time"], ["alerts"]):
        assert main(argv) == 1, argv
        line = one_line(capsys.readouterr().err)
        assert str(home / "collector.db") in line and "from ETT_HOME" in line
    assert not home.exists()


def test_a_missing_job_names_the_database_searched(db_path: Path, capsys) -> None:
    assert main(["report", "nope", "--db", str(db_path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "no job 'nope'" in line and str(db_path) in line and "--db" in line


def test_an_empty_sqlite_file_is_not_taken_for_data(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    assert main(["jobs", "--db", str(empty)]) == 1
    assert "holds no ett data" in one_line(capsys.readouterr().err)
    assert empty.stat().st_size == 0


# --- bad database settings: one line, exit 2 (configuration) or 1 (runtime) ----------------


def test_a_plain_path_is_a_sqlite_database(db_path: Path, capsys) -> None:
    assert main(["jobs", "--json", "--db", str(db_path)]) == 0
    assert [j["job_id"] for j in json.loads(capsys.readouterr().out)] == [LONG_ID]


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["report", "X", "--db", "foo"], {}, "--db 'foo' is not a database"),
        (["jobs"], {"ETT_DB_URL": "bogus"}, "ETT_DB_URL 'bogus' is not a database"),
        (["lost-time", "--db", "mysql://u:secret@db/ett"], {}, "mysql databases are not supported"),
        (["serve", "--db", "foo"], {}, "--db 'foo' is not a database"),
        (["serve", "--db", "mysql://u@db/ett"], {}, "mysql databases are not supported"),
        (["recompute", "--db", "bogus"], {}, "--db 'bogus' is not a database"),
    ],
)
def test_bad_database_settings_exit_2_in_one_line(
    argv: list[str], env: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert expected in line and "sqlite:///PATH" in line and "postgresql" in line
    assert "secret" not in line


def test_unreachable_postgresql_exits_1_in_one_line(capsys) -> None:
    url = f"postgresql+psycopg://ett:secret@127.0.0.1:{free_port()}/ett"
    serve = ["serve", "--db", url, "--port", str(free_port())]
    for argv in (
        ["jobs", "--db", url],
        ["db", "upgrade", "--db", url],
        ["alerts", "--db", url],
        serve,
    ):
        assert main(argv) == 1
        line = one_line(capsys.readouterr().err)
        assert "127.0.0.1" in line and "secret" not in line and "from --db" in line


# --- ett serve checks its address first ------------------------------------------------------


def _run(argv: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ETT_HOME": str(tmp_path / "home")}
    env.pop("ETT_DB_URL", None)
    return subprocess.run(
        [ETT, *argv], capture_output=True, text=True, env=env, timeout=60, check=False
    )


def test_serve_on_a_busy_port_says_so_and_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        db = tmp_path / "new" / "collector.db"
        done = _run(["serve", "--port", str(port), "--db", str(db)], tmp_path)
    assert done.returncode == 2
    line = one_line(done.stderr)
    assert f"port {port} is in use (another ett serve?)" in line
    assert done.stdout == ""  # never announced listening
    assert not (tmp_path / "new").exists()


def test_serve_on_a_bad_host_says_so_and_creates_nothing(tmp_path: Path) -> None:
    done = _run(["serve", "--host", "999.1.1.1", "--port", str(free_port())], tmp_path)
    assert done.returncode == 2
    assert "--host '999.1.1.1'" in one_line(done.stderr)
    assert done.stdout == ""
    assert not (tmp_path / "home").exists()


def test_serve_announces_listening_once_it_accepts_connections(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "ETT_HOME": str(tmp_path / "home")}
    env.pop("ETT_DB_URL", None)
    proc = subprocess.Popen(
        [ETT, "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"listening on http://127.0.0.1:{port}" in line, proc.stderr
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the line came after the socket listened: connecting now succeeds
    finally:
        proc.terminate()
        proc.wait(timeout=30)


# --- tables never cut ids; pipes get plain text; a closed pipe is quiet ----------------------


def test_jobs_piped_is_plain_text_with_whole_ids(db_path: Path, tmp_path: Path) -> None:
    done = _run(["jobs", "--db", str(db_path)], tmp_path)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    assert header.split()[:2] == ["job", "state"]
    assert row.split()[0] == LONG_ID
    assert not set("│┃━─…") & set(done.stdout)


@pytest.mark.parametrize("width", [80, 60, 50])
def test_jobs_on_a_narrow_terminal_never_cut_nor_fold_ids(
    db_path: Path, width: int, capsys
) -> None:
    """An id too long for the table was folded over lines ('sim0-0' / '0052'): what a person
    copies from the terminal must be the id. Such a table is now a card per job."""
    assert main(["jobs", "--json", "--db", str(db_path)]) == 0
    rows = json.loads(capsys.readouterr().out)
    out = io.StringIO()
    _render.print_jobs(rows, Console(file=out, width=width, force_terminal=True, color_system=None))
    text = out.getvalue()
    assert "…" not in text
    assert LONG_ID in text.split() or f"│ {LONG_ID} " in text  # on one line, whole
    assert "completed" in text


def test_jobs_json_into_head_exits_quietly(tmp_path: Path) -> None:
    ids = [f"{i:04d}-" + "x" * 600 for i in range(120)]  # well past a pipe's 64 KiB buffer
    url = _fill(tmp_path / "many.db", ids)
    done = subprocess.run(
        [
            "bash",
            "-o",
            "pipefail",
            "-c",
            f"'{ETT}' jobs --json --limit 1000 --db '{url}' | head -1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout == "[\n"
    assert done.stderr == ""
    assert done.returncode == 0


def test_report_attempts_keep_whole_times_at_80_columns(db_path: Path, capsys) -> None:
    assert main(["report", LONG_ID, "--json", "--db", str(db_path)]) == 0
    job = json.loads(capsys.readouterr().out)
    out = io.StringIO()
    _render.print_report(job, Console(file=out, width=80, force_terminal=True, color_system=None))
    text = out.getvalue()
    assert "…" not in text
    for a in job["attempts"]:
        date, clock = _render.instant(a["end"]).split()
        assert date in text and clock in text
        assert (a["end_reason"] or "-") in text


# --- the report says what its figures rest on ------------------------------------------------


def _job(db_path: Path, capsys) -> dict:
    assert main(["report", LONG_ID, "--json", "--db", str(db_path)]) == 0
    return json.loads(capsys.readouterr().out)


def _render_text(job: dict) -> str:
    out = io.StringIO()
    _render.print_report(job, Console(file=out, width=200, color_system=None))  # type: ignore[arg-type]
    return " ".join(out.getvalue().replace("│", " ").split())


def test_report_names_a_restart_that_never_trained(db_path: Path, capsys) -> None:
    job = _job(db_path, capsys)
    failed = [a for a in job["attempts"] if a["failed"]]
    assert len(failed) == 1 and job["ttr_s"][0] is not None
    nxt = failed[0]["attempt"] + 1
    assert _render.duration(job["ttr_s"][0]) in _render.recovery(job)
    for a in job["attempts"]:
        if a["attempt"] == nxt:
            a["first_batch"] = None  # the restart died in pg_init
    job["ttr_s"] = [None]
    assert f"time to recover attempt {nxt} never trained" in _render_text(job)
    job["attempts"] = [a for a in job["attempts"] if a["attempt"] != nxt]
    assert "time to recover no restart" in _render_text(job)


def test_checkpoint_advice_states_the_failures_it_rests_on(db_path: Path, capsys) -> None:
    job = _job(db_path, capsys)
    adv = job["checkpoint_advice"]
    assert job["failures"] == 1 and adv["optimal_interval_s"] is not None
    text = _render_text(job)
    assert "optimal: not enough failures yet (1 of 3)" in text  # as checkpoint-advice says it
    assert _render.duration(adv["optimal_interval_s"]) not in text.split("checkpoint interval")[1]
    job["failures"] = _render.MIN_ADVICE_FAILURES
    text = _render_text(job)
    assert f"optimal {_render.duration(adv['optimal_interval_s'])} (from 3 failures)" in text
    job["failures"], adv["optimal_interval_s"] = 0, None  # no failure: no optimum at all
    assert "optimal: not enough failures yet (0 of 3)" in _render_text(job)


def test_report_shows_expected_unsaved_and_explains_blocking(db_path: Path, capsys) -> None:
    job = _job(db_path, capsys)
    text = _render_text(job)
    assert f"expected unsaved {_render.duration(job['expected_unsaved_s'])}" in text
    assert f"checkpoint blocking {_render.fine(job['checkpoint_blocking_s'])}" in text
    assert f"checkpoint restore {_render.fine(job['checkpoint_restore_s'])}" in text
    component = _render.fine(job["lost_by_component"]["checkpoint"])
    assert f"checkpoint component {component} = blocking" in text


def test_report_marks_its_times_utc(db_path: Path, capsys) -> None:
    """`ett report` and `ett jobs` printed times with no zone; they are UTC, as in `ett fleet`."""
    job = _job(db_path, capsys)
    text = _render_text(job)
    assert f"figures as of {_render.instant(job['computed_at'])}" in text
    assert _render.instant(job["computed_at"]).endswith("Z")
    assert _render.instant(1_790_000_000.0) == "2026-09-21 14:13:20Z"
    assert main(["jobs", "--db", str(db_path)]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    assert _render.instant(job["end"]) in row


def test_report_loop_section_speaks_one_duration_format() -> None:
    """It printed "(median of 1 all)", a slow window's step as "96011.0 ms" and its lost time
    as "95.8 s" where every other table says "1m 36s"."""
    from ett_collector.commands._render_performance import print_performance

    perf = {
        "ideal_step_s": 0.0257,
        "ideal_points": 1,
        "ideal_basis": "all",
        "slow_s": 95.8,
        "slow_pct": 4.0,
        "samples_per_s": 100.0,
        "steps": 10,
        "windows": 3,
        "straggler": None,
        "stragglers": [],
        "straggler_threshold": 1.2,
        "slow_windows": [
            {
                "attempt": 0,
                "start": 1_790_000_000.0,
                "step_s": 96.011,
                "ratio": 3735.8,
                "lost_s": 95.8,
                "overlaps": [],
            }
        ],
    }
    out = io.StringIO()
    print_performance(perf, Console(file=out, width=200, color_system=None))
    text = " ".join(out.getvalue().replace("│", " ").split())
    assert "ideal step time 25.7 ms (median of 1 window, warm-up included)" in text
    assert "96011.0 ms" not in text and "95.8 s" not in text
    assert "2026-09-21 14:13:20Z 1m 36s 3735.80 1m 36s" in text
    perf |= {"ideal_points": 12, "ideal_basis": "steady"}
    out = io.StringIO()
    print_performance(perf, Console(file=out, width=200, color_system=None))
    assert "(median of 12 steady windows)" in out.getvalue()


# --- help ------------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _subparsers(sub).items()})
    return found


def test_every_option_has_help_and_states_its_default() -> None:
    commands = _subparsers(build_parser())
    for name in ("jobs", "lost-time", "report", "alerts", "simulate"):
        assert name in commands, name
    for name, parser in commands.items():
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            assert action.help, f"ett {name} {action.option_strings or action.dest}: no help"
            flag = action.nargs == 0
            must_state = name in ("jobs", "lost-time", "report") or action.default not in (
                None,
                False,
                [],
                argparse.SUPPRESS,
            )
            if action.option_strings and not flag and must_state:
                assert "default" in action.help or str(action.default) in action.help, (
                    f"ett {name} {action.option_strings}: help does not state its default"
                )
    assert commands["report"].description


def test_serve_help_names_every_variable_the_collector_reads() -> None:
    """Every ``ETT_*`` name the collector's code spells is in ``ett serve --help`` (it lacked
    ETT_MAX_INFLIGHT_BYTES and the /metrics pair), which also gives examples."""
    import re

    root = Path(__file__).resolve().parents[3] / "collector"
    names = {
        m
        for path in root.rglob("*.py")
        for m in re.findall(r'"(ETT_[A-Z_]*[A-Z])"', path.read_text(encoding="utf-8"))
    }
    assert {"ETT_MAX_INFLIGHT_BYTES", "ETT_METRICS_CACHE_S", "ETT_PORT"} <= names
    text = _subparsers(build_parser())["serve"].format_help()
    missing = sorted(n for n in names if not re.search(rf"\b{n}\b", text))
    assert not missing, f"ett serve --help does not name {missing}"
    assert "not read by `ett serve`: --host and --port set them" in text
    assert "\nexamples:\n  ett serve " in text


def test_help_says_how_times_and_states_are_read() -> None:
    """A date without a zone is read as UTC, a state is the job's state now (a job that failed
    and recovered is completed), and an optional ACTION is not written as a required one."""
    commands = _subparsers(build_parser())
    for name in ("jobs", "lost-time", "fleet", "checkpoint-advice", "alerts backtest"):
        since = next(a for a in commands[name]._actions if "--since" in a.option_strings)
        assert "12h" in since.help and "without a zone: UTC" in since.help, name
        assert "unix seconds" in since.help, name
    for name in ("jobs", "fleet"):
        state = next(a for a in commands[name]._actions if "--state" in a.option_strings)
        assert "a job that failed and recovered is completed" in state.help, name
    usage = commands["alerts"].format_usage()
    assert "ett alerts [-h] [--db URL]" in usage and "[--json]\n" in usage
    assert "ett alerts {backtest,export-prometheus} ..." in usage


def test_every_command_with_options_has_a_description() -> None:
    """``ett db upgrade``, ``db grant-readonly``, ``grafana build`` and ``grafana push`` had
    none: their help was the usage and the options alone."""
    for name, parser in _subparsers(build_parser()).items():
        if parser.add_help:  # `train` and `publish` hand -h to the trainer's own parsers
            assert parser.description, f"ett {name}: no description"


def test_top_level_help_names_ett_debug() -> None:
    """``ETT_DEBUG=1`` does what ``--debug`` does (``ett_cli._main.main``); only code said so."""
    assert "(or ETT_DEBUG=1)" in " ".join(build_parser().format_help().split())


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out.split()
    assert out[0] == "ett" and out[1][0].isdigit()


def test_another_applications_alembic_database_is_named_so(tmp_path: Path, capsys) -> None:
    """A database whose alembic_version is none of ett's migrations: one line that says so,
    for a read and for the service, and nothing changed in it."""
    import sqlite3

    path = tmp_path / "theirs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)")
    conn.execute("INSERT INTO alembic_version VALUES ('deadbeef1234')")
    conn.commit()
    conn.close()

    def tables() -> list[tuple[str, ...]]:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
            return [*names, *conn.execute("SELECT * FROM alembic_version").fetchall()]
        finally:
            conn.close()

    before = tables()
    for argv in (["jobs"], ["db", "upgrade"], ["serve", "--port", "1"]):
        assert main([*argv, "--db", str(path)]) == 1, argv
        line = one_line(capsys.readouterr().err)
        assert "its alembic_version is 'deadbeef1234', which is none of this ett's" in line
        assert "another application's schema" in line
    assert tables() == before  # no table of ett's made in it


def test_a_folder_or_a_text_file_is_named_for_what_it_is(tmp_path: Path, capsys) -> None:
    (tmp_path / "dir.db").mkdir()
    text = tmp_path / "notes.db"
    text.write_text("my notes\n")
    assert main(["jobs", "--db", str(tmp_path / "dir.db")]) == 2
    assert "is a folder, not a database" in one_line(capsys.readouterr().err)
    assert main(["jobs", "--db", f"sqlite:///{tmp_path / 'dir.db'}"]) == 1
    assert "is a folder, not a SQLite file" in one_line(capsys.readouterr().err)
    assert main(["report", "X", "--db", str(text)]) == 1
    assert "is not a SQLite file" in one_line(capsys.readouterr().err)
    assert text.read_text() == "my notes\n"


def test_alerts_with_a_dashboards_api_option_says_where_they_are_read(capsys) -> None:
    assert main(["alerts", "--api", "http://127.0.0.1:4318/"]) == 2
    line = one_line(capsys.readouterr().err)
    assert "reads the collector's database (--db URL)" in line
    assert "GET http://127.0.0.1:4318/api/v1/alerts" in line


def test_a_database_that_cannot_be_read_is_not_called_empty(
    db_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """A WAL-mode file on a read-only mount was called "holds no ett data" (a probe): SQLite
    could not open its -shm file. Here the -shm is a FIFO, which SQLite cannot map (a real
    OperationalError on any file system); the message says it cannot be read, and why."""
    import os

    shm = db_path.with_name(db_path.name + "-shm")
    shm.unlink(missing_ok=True)
    os.mkfifo(shm)
    assert main(["jobs", "--db", str(db_path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "cannot read database" in line and "holds no ett data" not in line
    assert "read-only mount" not in line  # its folder can be written
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m: False if m == os.W_OK else real_access(p, m))
    assert main(["jobs", "--db", str(db_path)]) == 1
    line = one_line(capsys.readouterr().err)
    assert "cannot be written (a read-only mount?)" in line and "copy the file" in line
