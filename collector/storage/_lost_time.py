"""Lost time (docs/metrics.md): idle and failure seconds grouped by a key, in one SQL query.

Each ``segments`` row holds one component's share of one segment, so a row's seconds are
``(min(end, until) - max(start, since)) * share``; a GROUP BY on (key, category) sums them, in the
order of the key's partial covering index (see ``segments`` in ``_tables``).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, TextClause, text
from sqlalchemy.dialects import sqlite

from ett_collector.domain.model import Category
from ett_collector.schemas import GROUP_BYS, LostTimeJSON, largest_first, lost_time_json
from ett_collector.storage._tables import LOST_GROUP_COLUMNS, LOST_PREDICATE


def lost_time_statement(group_by: str, since: float | None, until: float | None) -> TextClause:
    """The query of :func:`lost_time`, with named binds ``:since`` and ``:until``.

    Its rows are ``(key, category, seconds)``. CASE instead of MIN/MAX/LEAST/GREATEST, so the
    same text runs on SQLite and PostgreSQL.

    Raises:
        ValueError: when ``group_by`` is not one of ``ett_collector.schemas.GROUP_BYS``.
    """
    column = LOST_GROUP_COLUMNS.get(group_by)
    if column is None:
        raise ValueError(f"group_by must be one of {list(GROUP_BYS)}, not {group_by!r}")
    end, start = '"end"', "start"
    where = [LOST_PREDICATE]
    binds: dict[str, Any] = {}
    if until is not None:
        end = 'CASE WHEN "end" > :until THEN :until ELSE "end" END'
        binds["until"] = until
    if since is not None:
        start = "CASE WHEN start < :since THEN :since ELSE start END"
        where.append('"end" > :since')
        binds["since"] = since
    if until is not None:
        where.append("start < :until")
    sql = (
        f"SELECT {column}, category, SUM((({end}) - ({start})) * share) FROM segments"
        f" WHERE {' AND '.join(where)} GROUP BY {column}, category"
    )
    return text(sql).bindparams(**binds)


def lost_time_query(
    group_by: str, since: float | None, until: float | None
) -> tuple[str, list[float]]:
    """:func:`lost_time_statement` as SQLite runs it: the text with ``?`` placeholders and its
    positional parameters (for ``EXPLAIN QUERY PLAN``)."""
    compiled = lost_time_statement(group_by, since, until).compile(dialect=sqlite.dialect())
    return str(compiled), [compiled.params[name] for name in compiled.positiontup or ()]


def lost_time(
    conn: Connection, group_by: str, since: float | None, until: float | None
) -> list[LostTimeJSON]:
    """Rows ``{key, idle_s, failure_s, lost_s}``, largest ``lost_s`` first (ties: by key).

    ``key`` is None for segments without a component, or jobs without a model or team.
    """
    statement = lost_time_statement(group_by, since, until)
    if since is not None and until is not None and since >= until:
        return []
    sums: dict[str | None, list[float]] = {}
    for key, category, seconds in conn.execute(statement):
        pair = sums.setdefault(key, [0.0, 0.0])
        pair[0 if category == Category.IDLE.value else 1] += float(seconds or 0.0)
    return largest_first(
        lost_time_json(key, idle, failure) for key, (idle, failure) in sums.items()
    )
