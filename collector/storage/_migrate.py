"""Alembic, run from code: the migration scripts ship inside this package; no ``alembic.ini``."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from ett_collector.storage._engine import SQLITE_BEGIN_OPTION

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
"""The Alembic script location."""

_IN_PROCESS = threading.Lock()

_PG_LOCK_KEY = 0x455454_5343_4D41  # "ETT" "SC" "MA": serializes concurrent upgrades on PostgreSQL


def alembic_config(url: str | None = None) -> Config:
    """An Alembic config pointing at the packaged migrations (and at ``url``, when given)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


class ForeignSchema(Exception):
    """The database's ``alembic_version`` names a revision that is none of ett's migrations:
    another application's Alembic schema (or a newer ett's)."""

    def __init__(self, revision: str) -> None:
        super().__init__(
            f"its alembic_version is {revision!r}, which is none of this ett's migrations: the "
            "database holds another application's schema (or a newer ett's); give ett a "
            "database of its own, or run the ett that made it"
        )
        self.revision = revision


def head_revision() -> str | None:
    """The newest revision of the packaged migrations."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(engine: Engine) -> str | None:
    """The revision the database is at (None: not created yet)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> list[str]:
    """Bring the schema to ``revision`` in one transaction; a no-op when it is there already.
    Returns the revisions applied, oldest first (empty: it was there already), for
    ``ett db upgrade`` to say.

    Concurrent upgrades (service start and ``ett db upgrade`` at once) wait for each other
    instead of racing: an advisory lock on PostgreSQL, ``BEGIN IMMEDIATE`` on SQLite, and a
    process-wide lock, since Alembic's ``context``/``op`` proxies are global to the process.
    """
    if engine.dialect.name == "sqlite":
        engine = engine.execution_options(**{SQLITE_BEGIN_OPTION: "BEGIN IMMEDIATE"})
    with _IN_PROCESS, engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_PG_LOCK_KEY})")
        cfg = alembic_config()
        cfg.attributes["connection"] = conn
        current = MigrationContext.configure(conn).get_current_revision()
        known = {r.revision for r in ScriptDirectory.from_config(cfg).walk_revisions()}
        if current is not None and current not in known:
            raise ForeignSchema(current)
        command.upgrade(cfg, revision)
        after = MigrationContext.configure(conn).get_current_revision()
        return applied_between(current, after)


def applied_between(before: str | None, after: str | None) -> list[str]:
    """The packaged revisions after ``before`` up to ``after``, oldest first (None: none)."""
    if after is None or after == before:
        return []
    out = []
    for script in ScriptDirectory.from_config(alembic_config()).walk_revisions(head=after):
        if script.revision == before:
            break
        out.append(script.revision)
    return out[::-1]
