"""A read-only database role for Grafana and other SQL readers (PostgreSQL).

The role may log in and read the ``ett_v1_*`` views (migration 0002, docs/grafana.md) and nothing
else: not the raw spans, not the tables behind the views (a PostgreSQL view reads its tables with
its owner's rights), and every transaction it opens is read-only.
"""

from __future__ import annotations

import re

from sqlalchemy import Engine

GRAFANA_VIEWS: tuple[str, ...] = (
    "ett_v1_jobs",
    "ett_v1_attempts",
    "ett_v1_segments",
    "ett_v1_time_hourly",
    "ett_v1_time_daily",
    "ett_v1_checkpoints",
    "ett_v1_compiles",
)
"""The views of SQL interface v1, in the order docs/grafana.md lists them."""

_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class RoleError(ValueError):
    """A role that cannot be granted here (bad name, or a database without roles)."""


def _literal(text: str) -> str:
    """A SQL string literal (standard_conforming_strings, PostgreSQL's default since 9.1)."""
    return "'" + text.replace("'", "''") + "'"


def readonly_statements(role: str, database: str, schema: str, password: str | None) -> list[str]:
    """The SQL that creates (or updates) ``role`` as a reader of the views; idempotent.

    Raises:
        RoleError: when ``role`` is not a plain lower-case SQL identifier.
    """
    if not _ROLE.match(role):
        raise RoleError(
            f"role name {role!r} is not a plain identifier: use lower-case letters, digits "
            "and _ (for example ett_grafana)"
        )
    login = "LOGIN" + (f" PASSWORD {_literal(password)}" if password else "")
    db = '"' + database.replace('"', '""') + '"'
    sch = '"' + schema.replace('"', '""') + '"'
    return [
        "DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = "
        f"{_literal(role)}) THEN CREATE ROLE {role}; END IF; END $$",
        f"ALTER ROLE {role} WITH {login} NOSUPERUSER NOCREATEDB NOCREATEROLE",
        f"ALTER ROLE {role} SET default_transaction_read_only = on",
        f"GRANT CONNECT ON DATABASE {db} TO {role}",
        f"GRANT USAGE ON SCHEMA {sch} TO {role}",
        f"GRANT SELECT ON {', '.join(GRAFANA_VIEWS)} TO {role}",
    ]


def grant_readonly(engine: Engine, role: str, password: str | None = None) -> list[str]:
    """Create or update ``role`` on the database of ``engine``; returns the views it may read.

    Raises:
        RoleError: on SQLite (no roles: give readers a read-only copy or ``mode=ro`` URI), or a
            bad role name.
    """
    if engine.dialect.name != "postgresql":
        raise RoleError(
            "SQLite has no roles: point read-only readers at the file with "
            "'file:PATH?mode=ro' (or a copy); `ett db grant-readonly` is for PostgreSQL"
        )
    with engine.begin() as conn:
        database = conn.exec_driver_sql("SELECT current_database()").scalar_one()
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        for sql in readonly_statements(role, str(database), str(schema), password):
            conn.exec_driver_sql(sql.replace("%", "%%"))
    return list(GRAFANA_VIEWS)
