"""Lost time (ETT-SPEC section 5): idle and failure seconds grouped by a key, in one SQL query.

Each ``segments`` row holds one component's share of one segment, so a row's seconds are
``(min(end, until) - max(start, since)) * share``; a GROUP BY on (key, category) sums them, in the
order of the key's partial covering index (see ``segments`` in ``_tables``).
"""

from __future__ import annotations

from sqlalchemy import Connection

from ett_collector.domain.model import Category
from ett_collector.schemas import GROUP_BYS, LostTimeJSON, largest_first, lost_time_json
from ett_collector.storage._tables import LOST_GROUP_COLUMNS, LOST_PREDICATE


def lost_time_query(
    group_by: str, since: float | None, until: float | None, placeholder: str = "?"
) -> tuple[str, list[float]]:
    """The SQL text and positional parameters of :func:`lost_time`.

    The SQL's rows are ``(key, category, seconds)``. CASE instead of MIN/MAX/LEAST/GREATEST, so
    the same text runs on SQLite and PostgreSQL.

    Raises:
        ValueError: when ``group_by`` is not one of ``ett_collector.schemas.GROUP_BYS``.
    """
    column = LOST_GROUP_COLUMNS.get(group_by)
    if column is None:
        raise ValueError(f"group_by must be one of {list(GROUP_BYS)}, not {group_by!r}")
    end, start = '"end"', "start"
    clip: list[float] = []
    where = [LOST_PREDICATE]
    window: list[float] = []
    if until is not None:
        end = 'CASE WHEN "end" > ? THEN ? ELSE "end" END'
        clip += [until, until]
    if since is not None:
        start = "CASE WHEN start < ? THEN ? ELSE start END"
        clip += [since, since]
        where.append('"end" > ?')
        window.append(since)
    if until is not None:
        where.append("start < ?")
        window.append(until)
    sql = (
        f"SELECT {column}, category, SUM((({end}) - ({start})) * share) FROM segments"
        f" WHERE {' AND '.join(where)} GROUP BY {column}, category"
    )
    if placeholder != "?":
        sql = sql.replace("?", placeholder)
    return sql, clip + window


def lost_time(
    conn: Connection, group_by: str, since: float | None, until: float | None, placeholder: str
) -> list[LostTimeJSON]:
    """Rows ``{key, idle_s, failure_s, lost_s}``, largest ``lost_s`` first (ties: by key).

    ``key`` is None for segments without a component, or jobs without a model or team.
    """
    sql, params = lost_time_query(group_by, since, until, placeholder)
    if since is not None and until is not None and since >= until:
        return []
    sums: dict[str | None, list[float]] = {}
    for key, category, seconds in conn.exec_driver_sql(sql, tuple(params)):
        pair = sums.setdefault(key, [0.0, 0.0])
        pair[0 if category == Category.IDLE.value else 1] += float(seconds or 0.0)
    return largest_first(
        lost_time_json(key, idle, failure) for key, (idle, failure) in sums.items()
    )
