"""PostgreSQL: ``spans`` partitioned by day of ``start``; SQLite keeps its plain table.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

The existing table is renamed, a table of the same columns and key ``PARTITION BY RANGE
(start)`` takes its name, with a default partition and one partition per UTC day that has spans
and for today and the next days (``collector/storage/_partitions.py``); the spans are copied
over and the old table dropped. The Grafana views that read ``spans`` are dropped first and made
again on the new table with the same definitions and grants. All in the upgrade's one
transaction: an interrupted conversion leaves the old table as it was.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from alembic import op

from ett_collector.storage._partitions import AHEAD_DAYS, DAY, day_of, ensure_days

# revision identifiers, used by Alembic.
revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_DEPENDENT_VIEWS = (
    "SELECT DISTINCT c.relname, pg_get_viewdef(c.oid) FROM pg_depend d"
    " JOIN pg_rewrite r ON r.oid = d.objid JOIN pg_class c ON c.oid = r.ev_class"
    " WHERE d.refobjid = to_regclass('{table}') AND c.relname <> '{table}'"
)
_GRANTS = (
    "SELECT table_name, grantee, privilege_type FROM information_schema.role_table_grants"
    " WHERE table_schema = current_schema() AND table_name = ANY(%s)"
    " AND grantee <> current_user"
)


def _rebuild(table: str, convert: list[str], days_sql: str | None) -> None:
    """Drop the views on ``table``, run ``convert``, create the day partitions the spans need
    (``days_sql`` lists day starts), copy, and make the views and their grants again."""
    conn = op.get_bind()
    views = conn.exec_driver_sql(_DEPENDENT_VIEWS.format(table=table)).all()
    names = [v[0] for v in views]
    grants = conn.exec_driver_sql(_GRANTS, (names,)).all() if names else []
    for name in names:
        conn.exec_driver_sql(f"DROP VIEW {name}")
    for sql in convert:
        conn.exec_driver_sql(sql)
    if days_sql is not None:
        days = [float(d) for d in conn.exec_driver_sql(days_sql).scalars()]
        today = day_of(time.time())
        ensure_days(conn, days + [today + i * DAY for i in range(AHEAD_DAYS + 1)])
    conn.exec_driver_sql("INSERT INTO spans SELECT * FROM spans_unpartitioned")
    conn.exec_driver_sql("DROP TABLE spans_unpartitioned")
    for name, definition in views:
        conn.exec_driver_sql(f"CREATE VIEW {name} AS {definition}".replace("%", "%%"))
    for view, grantee, privilege in grants:
        conn.exec_driver_sql(f'GRANT {privilege} ON {view} TO "{grantee}"')


_RENAME = [
    "ALTER TABLE spans RENAME TO spans_unpartitioned",
    "ALTER TABLE spans_unpartitioned RENAME CONSTRAINT pk_spans TO pk_spans_unpartitioned",
]


def upgrade() -> None:
    """Partition ``spans`` by day (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    convert = [
        *_RENAME,
        "CREATE TABLE spans (LIKE spans_unpartitioned INCLUDING DEFAULTS)"
        " PARTITION BY RANGE (start)",
        "ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (job_id, start, trace_id, span_id)",
        "CREATE TABLE spans_default PARTITION OF spans DEFAULT",
    ]
    days = f"SELECT DISTINCT floor(start / {DAY}) * {DAY} FROM spans_unpartitioned"
    _rebuild("spans", convert, days)


def downgrade() -> None:
    """Back to one plain table (PostgreSQL only)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    convert = [
        *_RENAME,
        "CREATE TABLE spans (LIKE spans_unpartitioned INCLUDING DEFAULTS)",
        "ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (job_id, start, trace_id, span_id)",
    ]
    _rebuild("spans", convert, None)
