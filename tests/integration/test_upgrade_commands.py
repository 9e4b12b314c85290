"""What the commands that migrate say, on real SQLite and PostgreSQL: ``ett serve`` and ``ett db
grant-readonly`` name the migrations they applied (they migrated silently); ``grant-readonly``
refuses SQLite before it creates the file."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.commands import _target
from ett_collector.commands.serve_commands import _prepare_database
from ett_collector.settings import Settings
from ett_collector.storage import Store, _migrate, head_revision
from tests.conftest import BACKENDS


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]


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
    line = _one_line(capsys.readouterr().err)
    head = head_revision()
    assert line == (
        f"ett serve: {target.shown}: applied migration(s) 0009, 0010, {head}: the schema is "
        f"now {head}"
    )
    _prepare_database(Settings(db_url=database_url), target)  # at the newest: not a word
    assert capsys.readouterr().err == ""


@pytest.mark.postgres
def test_grant_readonly_names_the_migrations_it_applied(
    fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _at(fresh_postgres_url, "0010")
    assert main(["db", "grant-readonly", "Bad-Name", "--db", fresh_postgres_url]) == 2
    assert "not a plain identifier" in _one_line(capsys.readouterr().err)
    assert _revision(fresh_postgres_url) == "0010"  # a bad name is refused before any migration
    role = f"ett_r_{uuid.uuid4().hex[:8]}"
    assert main(["db", "grant-readonly", role, "--db", fresh_postgres_url]) == 0
    shown = capsys.readouterr()
    line = _one_line(shown.err)
    assert line.startswith("ett db grant-readonly: ") and "applied migration(s) 0011" in line
    assert shown.out.startswith(f"role {role} may log in and read ett_v1_jobs")


def test_grant_readonly_refuses_sqlite_before_creating_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.db"
    assert main(["db", "grant-readonly", "ett_grafana", "--db", str(db)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert "SQLite has no roles" in line and "is for PostgreSQL" in line
    assert not db.exists()
