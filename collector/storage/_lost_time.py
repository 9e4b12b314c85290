"""Lost time (ETT-SPEC section 5): idle and failure seconds grouped by a key, in one SQL query.

Each ``segments`` row holds one component's share of one segment, so a row's seconds are
``(min(end, until) - max(start, since)) * share``; a GROUP BY sums them per key.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from collector.domain.model import Category

GROUP_COLUMNS: dict[str, str] = {
    "component": "component",
    "job": "job_id",
    "model": "model",
    "team": "team",
}
"""The ``group_by`` values and the ``segments`` column each groups on."""


def _clipped_seconds(since: float | None, until: float | None) -> tuple[str, list[float]]:
    """SQL for a row's seconds inside ``[since, until]`` (CASE, so it runs on SQLite and PG)."""
    params: list[float] = []
    end = '"end"'
    start = "start"
    if until is not None:
        end = 'CASE WHEN "end" > ? THEN ? ELSE "end" END'
        params += [until, until]
    if since is not None:
        start = "CASE WHEN start < ? THEN ? ELSE start END"
        params += [since, since]
    return f"(({end}) - ({start})) * share", params


def lost_time_query(
    group_by: str, since: float | None, until: float | None, placeholder: str = "?"
) -> tuple[str, list[Any]]:
    """The SQL text and positional parameters of :func:`lost_time`.

    Raises:
        ValueError: when ``group_by`` is not one of :data:`GROUP_COLUMNS`.
    """
    column = GROUP_COLUMNS.get(group_by)
    if column is None:
        raise ValueError(f"group_by must be one of {sorted(GROUP_COLUMNS)}, not {group_by!r}")
    seconds, clip = _clipped_seconds(since, until)
    where = ["category IN (?, ?)"]
    where_params: list[Any] = [Category.IDLE.value, Category.FAILURE.value]
    if since is not None:
        where.append('"end" > ?')
        where_params.append(since)
    if until is not None:
        where.append("start < ?")
        where_params.append(until)
    sql = (
        f"SELECT {column} AS key,"
        f" SUM(CASE WHEN category = ? THEN {seconds} ELSE 0 END) AS idle_s,"
        f" SUM(CASE WHEN category = ? THEN {seconds} ELSE 0 END) AS failure_s"
        f" FROM segments WHERE {' AND '.join(where)} GROUP BY {column}"
    )
    # positional parameters in the order they appear in the text
    params: list[Any] = [Category.IDLE.value, *clip, Category.FAILURE.value, *clip, *where_params]
    if placeholder != "?":
        sql = sql.replace("?", placeholder)
    return sql, params


def lost_time(
    conn: Connection, group_by: str, since: float | None, until: float | None, placeholder: str
) -> list[dict[str, Any]]:
    """Rows ``{key, idle_s, failure_s, lost_s}``, largest ``lost_s`` first (ties: by key).

    ``key`` is None for segments without a component, or jobs without a model or team.
    """
    sql, params = lost_time_query(group_by, since, until, placeholder)
    if since is not None and until is not None and since >= until:
        return []
    out: list[dict[str, Any]] = []
    for key, idle, failure in conn.exec_driver_sql(sql, tuple(params)):
        idle_s = float(idle or 0.0)
        failure_s = float(failure or 0.0)
        out.append(
            {"key": key, "idle_s": idle_s, "failure_s": failure_s, "lost_s": idle_s + failure_s}
        )
    out.sort(key=lambda r: (-r["lost_s"], r["key"] is None, r["key"] or ""))
    return out
