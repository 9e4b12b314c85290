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
