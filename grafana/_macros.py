"""Grafana's SQL macros and template variables, expanded as Grafana does for PostgreSQL.

Grafana substitutes template variables in the browser, then its SQL data source expands the
``$__`` macros on the server. The tests use :func:`expand` to run every panel's query on a real
PostgreSQL exactly as Grafana would send it. Covered: ``$__time``, ``$__timeEpoch``,
``$__timeFilter``, ``$__timeFrom``, ``$__timeTo``, ``$__timeGroup``, ``$__timeGroupAlias``,
``$__unixEpochFilter``, ``$__unixEpochFrom``, ``$__unixEpochTo``, ``$__unixEpochGroup``,
``$__unixEpochGroupAlias``; variables as ``$name``, ``${name}`` and ``[[name]]``. A multi-value
variable (a list) becomes quoted, comma-separated strings, as Grafana's SQL data sources format it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

_MACRO = re.compile(r"\$__(\w+)\(([^()]*)\)")
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(?!__)(\w+)")
_DURATION = re.compile(r"^\s*'?(\d+)([smhdw])'?\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class MacroError(ValueError):
    """A macro or variable the expander does not know, or a bad argument."""


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def interval_seconds(text: str) -> int:
    """``5m`` -> 300: Grafana's interval notation (optionally quoted)."""
    m = _DURATION.match(text)
    if m is None:
        raise MacroError(f"cannot read interval {text!r}: write it as 30s, 5m, 1h or 1d")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def substitute(sql: str, variables: Mapping[str, str | Sequence[str]]) -> str:
    """Replace template variables (not macros) as Grafana's front end does."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        if name not in variables:
            raise MacroError(f"variable ${name} has no value")
        value = variables[name]
        if isinstance(value, str):
            return value
        return ",".join(_quote(v) for v in value)

    return _VARIABLE.sub(one, sql)


def expand_macros(sql: str, time_from: float, time_to: float) -> str:
    """Expand the ``$__`` macros for the time range ``[time_from, time_to]`` (unix seconds)."""

    def one(m: re.Match[str]) -> str:
        name, args = m.group(1), [a.strip() for a in m.group(2).split(",") if a.strip()]

        def col() -> str:
            if not args:
                raise MacroError(f"$__{name} needs a column argument")
            return args[0]

        def width() -> int:
            if len(args) < 2:
                raise MacroError(f"$__{name} needs an interval argument, as in (col, 1h)")
            return interval_seconds(args[1])

        if name == "time":
            return f'{col()} AS "time"'
        if name == "timeEpoch":
            return f'extract(epoch from {col()}) AS "time"'
        if name == "timeFilter":
            return f"{col()} BETWEEN '{_iso(time_from)}' AND '{_iso(time_to)}'"
        if name == "timeFrom":
            return f"'{_iso(time_from)}'"
        if name == "timeTo":
            return f"'{_iso(time_to)}'"
        if name in ("timeGroup", "timeGroupAlias"):
            w = width()
            out = f"floor(extract(epoch from {col()})/{w})*{w}"
            return out + (' AS "time"' if name.endswith("Alias") else "")
        if name == "unixEpochFilter":
            return f"{col()} >= {int(time_from)} AND {col()} <= {int(time_to)}"
        if name == "unixEpochFrom":
            return str(int(time_from))
        if name == "unixEpochTo":
            return str(int(time_to))
        if name in ("unixEpochGroup", "unixEpochGroupAlias"):
            w = width()
            out = f"floor({col()}/{w})*{w}"
            return out + (' AS "time"' if name.endswith("Alias") else "")
        raise MacroError(f"unknown macro $__{name}")

    return _MACRO.sub(one, sql)


def expand(
    sql: str,
    time_from: float,
    time_to: float,
    variables: Mapping[str, str | Sequence[str]] | None = None,
) -> str:
    """A panel's SQL as Grafana sends it to PostgreSQL: variables, then macros."""
    return expand_macros(substitute(sql, variables or {}), time_from, time_to)
