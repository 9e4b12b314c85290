"""What the commands that migrate say, on real SQLite and PostgreSQL: ``ett serve`` and ``ett db
grant-readonly`` name the migrations they applied (they migrated silently); ``grant-readonly``
refuses SQLite before it creates the file; Ctrl-C during ``ett db upgrade`` says where it left
the database (it exited 130 without a word), and a wait on another session's lock is said
once (a killed upgrade's session held it ~44 s in silence); ``ett db upgrade`` refuses a typo'd
folder (it created the folders and a database, exit 0) and names a read-only one."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from ett_cli import main
from ett_collector.commands import _target
from ett_collector.commands.serve_commands import _prepare_database
from ett_collector.settings import Settings
from ett_collector.storage import Store, _migrate, head_revision
from tests.conftest import BACKENDS
from tests.support.errors import one_line
from tests.support.tmpfs import mounted_tmpfs
from tests.support.waits import wait_until


def _at(url: str, revision: str) -> None:
    store = Store(url)
    _migrate.upgrade(store.engine, revision)
    store.close()


def _revision(url: str) -> str | None:
    store = Store(url)
    try:
        return store.revision()
    finally:
        store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_serve_names_the_migrations_it_applied(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _at(database_url, "0008")
    target = _target.resolve(database_url)
    _prepare_database(Settings(db_url=database_url), target)
    line = one_line(capsys.readouterr().err)
    head = head_revision()
    assert head is not None
    after = ", ".join(f"{n:04d}" for n in range(9, int(head) + 1))
    assert line == (
        f"ett serve: {target.shown}: applied migration(s) {after}: the schema is now {head}"
    )
    _prepare_database(Settings(db_url=database_url), target)  # at the newest: not a word
    assert capsys.readouterr().err == ""


@pytest.mark.postgres
def test_grant_readonly_names_the_migrations_it_applied(
    fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _at(fresh_postgres_url, "0010")
    assert main(["db", "grant-readonly", "Bad-Name", "--db", fresh_postgres_url]) == 2
    assert "not a plain identifier" in one_line(capsys.readouterr().err)
    assert _revision(fresh_postgres_url) == "0010"  # a bad name is refused before any migration
    role = f"ett_r_{uuid.uuid4().hex[:8]}"
    assert main(["db", "grant-readonly", role, "--db", fresh_postgres_url]) == 0
    shown = capsys.readouterr()
    line = one_line(shown.err)
    assert line.startswith("ett db grant-readonly: ") and "applied migration(s) 0011" in line
    assert shown.out.startswith(f"role {role} may log in and read ett_v1_jobs")


def test_grant_readonly_refuses_sqlite_before_creating_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    assert main(["db", "grant-readonly", "ett_grafana", "--db", str(db)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "SQLite has no roles" in line and "is for PostgreSQL" in line
    assert not db.exists()


def test_ctrl_c_of_another_command_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(_raw: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(_target, "resolve", interrupted)
    assert main(["jobs"]) == 130
    assert capsys.readouterr().err == "ett jobs: interrupted\n"


@pytest.mark.postgres
def test_ctrl_c_of_an_upgrade_waiting_on_a_lock_says_where_it_left_the_database(
    fresh_postgres_url: str, tmp_path: Path
) -> None:
    """From 0009, the upgrade applies 0010 in its transaction, then waits in 0011 (its foreign
    key on ``jobs``) for a session that holds ``jobs``: the wait is said once, and Ctrl-C leaves
    the database at 0009, 0010 rolled back with the rest."""
    _at(fresh_postgres_url, "0009")
    holder = Store(fresh_postgres_url)
    err_path = tmp_path / "err"
    with holder.engine.connect() as other, err_path.open("w") as err:
        other.execute(text("LOCK TABLE jobs IN SHARE MODE"))  # held until this block ends
        upgrade = subprocess.Popen(
            [sys.executable, "-m", "ett_cli", "db", "upgrade", "--db", fresh_postgres_url],
            stdout=subprocess.PIPE,
            stderr=err,
        )
        try:
            wait_until(
                lambda: "waiting for another session's lock" in err_path.read_text(),
                what="the lock note",
                detail=err_path.read_text,
            )
            upgrade.send_signal(signal.SIGINT)
            assert upgrade.wait(timeout=60) == 130
        finally:
            if upgrade.poll() is None:
                upgrade.kill()
                upgrade.wait()
        other.rollback()
    holder.close()
    lines = [line for line in err_path.read_text().splitlines() if line]
    assert "Traceback" not in err_path.read_text() and len(lines) == 2, lines
    assert lines[0].startswith(
        "ett db upgrade: waiting for another session's lock on the database (a previous "
        "upgrade?): PostgreSQL backend "
    )
    assert lines[1] == (
        "ett db upgrade: interrupted; nothing of the unfinished upgrade was applied (the "
        "database is at schema 0009): run it again"
    )
    assert upgrade.stdout is not None and upgrade.stdout.read() == b""
    assert _revision(fresh_postgres_url) == "0009"
    assert main(["db", "upgrade", "--db", fresh_postgres_url]) == 0
    assert _revision(fresh_postgres_url) == head_revision()


def test_upgrade_refuses_a_missing_folder_and_creates_in_an_existing_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    typo = tmp_path / "nope" / "x.db"
    assert main(["db", "upgrade", "--db", str(typo)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line == (
        f"ett db upgrade: the folder {typo.parent} of the database sqlite:///{typo} (from --db) "
        "does not exist: check the path, or create the folder first to start a new database "
        "there"
    )
    assert not typo.parent.exists()
    monkeypatch.setenv("ETT_DB_URL", f"sqlite:///{typo}")
    assert main(["db", "upgrade"]) == 2 and "(from ETT_DB_URL) does not exist" in (
        capsys.readouterr().err
    )
    assert not typo.parent.exists()
    monkeypatch.delenv("ETT_DB_URL")
    new = tmp_path / "x.db"
    assert main(["db", "upgrade", "--db", str(new)]) == 0
    assert capsys.readouterr().out == f"created sqlite:///{new}\n" and new.exists()
    monkeypatch.setenv("ETT_HOME", str(tmp_path / "home"))  # the data folder: made on first use
    assert main(["db", "upgrade"]) == 0
    assert (tmp_path / "home" / "collector.db").exists()


def test_upgrade_names_a_read_only_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with mounted_tmpfs(tmp_path / "disk", "4m") as disk:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True)
        db = disk / "x.db"
        assert main(["db", "upgrade", "--db", str(db)]) == 1
        line = one_line(capsys.readouterr().err)
        assert line.startswith(f"ett db upgrade: cannot create the database sqlite:///{db} ")
        assert f"its folder {disk} cannot be written (a read-only mount?)" in line
        assert "Error" not in line and not db.exists()


@pytest.mark.postgres
def test_a_read_of_an_older_schema_names_the_database_to_upgrade(
    fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "run `ett db upgrade --db URL`", a literal URL; the password stays hidden."""
    _at(fresh_postgres_url, "0008")
    with_password = make_url(fresh_postgres_url).set(password="s3cret-pw")
    url = with_password.render_as_string(hide_password=False)
    assert main(["jobs", "--db", url]) == 1
    err = capsys.readouterr().err
    shown = with_password.render_as_string(hide_password=True)
    assert f"run `ett db upgrade --db {shown}` (on PostgreSQL" in err
    assert "s3cret-pw" not in err and ":***@" in err
