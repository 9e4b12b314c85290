"""``Store.upgrade`` says which migrations it applied, on real SQLite and PostgreSQL: every
one on a new database, those after its revision on an older one, none when it is at the
newest (what ``ett db upgrade`` needs to say more than "database schema is up to date")."""

from __future__ import annotations

import pytest

from ett_collector.storage import Store, _migrate, head_revision
from tests.conftest import BACKENDS


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_upgrade_returns_the_revisions_it_applied(database_url: str) -> None:
    store = Store(database_url)
    everything = store.upgrade()
    assert everything[0] == "0001" and everything[-1] == head_revision()
    assert everything == sorted(everything) and len(set(everything)) == len(everything)
    assert store.upgrade() == []  # at the newest already
    store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_an_older_schema_reports_the_migrations_after_it(database_url: str) -> None:
    store = Store(database_url)
    assert _migrate.upgrade(store.engine, "0008") == [f"{n:04d}" for n in range(1, 9)]
    applied = store.upgrade()
    assert applied[:2] == ["0009", "0010"] and applied[-1] == head_revision()
    assert store.revision() == head_revision() and store.upgrade() == []
    store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_a_read_of_an_older_schema_migrates_nothing_and_says_what_to_run(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ett jobs`` on a database at 0008 ran migrations 0009 on (0009 copies every span under
    its lock; on a hot standby it failed with "cannot execute DROP VIEW in a read-only
    transaction"). A read now leaves the schema as it is and names the command to run."""
    from ett_cli import main

    store = Store(database_url)
    _migrate.upgrade(store.engine, "0008")
    store.close()
    assert main(["jobs", "--db", database_url]) == 1
    err = capsys.readouterr().err
    assert f"is at schema 0008, this ett reads {head_revision()}" in err
    assert f"run `ett db upgrade --db {database_url}`" in err and "Traceback" not in err
    store = Store(database_url)
    assert store.revision() == "0008"  # nothing migrated
    store.close()
    assert main(["db", "upgrade", "--db", database_url]) == 0
    assert main(["jobs", "--db", database_url]) == 0


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_db_upgrade_says_which_migrations_it_applied(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ett db upgrade`` said "database schema is up to date" right after migrating."""
    from ett_cli import main

    store = Store(database_url)
    _migrate.upgrade(store.engine, "0008")
    store.close()
    assert main(["db", "upgrade", "--db", database_url]) == 0
    out = capsys.readouterr().out
    assert out.startswith("applied migration(s) 0009, 0010") and head_revision() in out
    assert main(["db", "upgrade", "--db", database_url]) == 0
    assert capsys.readouterr().out == "database schema is up to date\n"


@pytest.mark.postgres
def test_a_prune_while_another_runs_exits_1_on_stderr(
    fresh_postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A second pass deletes nothing while another holds the database's prune lock: it said so
    on stdout and exited 0, as if it had pruned."""
    from sqlalchemy import text

    from ett_cli import main
    from ett_collector.storage._retention import PASS_LOCK_KEY

    store = Store(fresh_postgres_url)
    store.upgrade()
    with store.engine.connect() as other:  # the other pass, holding the lock
        assert other.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": PASS_LOCK_KEY}).scalar()
        assert main(["db", "prune", "--db", fresh_postgres_url]) == 1
        shown = capsys.readouterr()
        assert "a prune is already running" in shown.err and shown.out == ""
        other.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": PASS_LOCK_KEY})
    store.close()
    assert main(["db", "prune", "--db", fresh_postgres_url]) == 0
    assert capsys.readouterr().out.startswith("deleted: ")
