"""PostgreSQL's batch writes as one statement of column arrays (``unnest``), not ``executemany``.

psycopg's ``executemany`` costs about 16 us of Python per row (each row's parameters dumped and
its statement queued in the pipeline), which made the raw span insert, not the fold, what held
ingest back on PostgreSQL (``tests/performance/bench_ingest_ceiling.py``). Here a batch of rows
becomes one list per column, sent as arrays in one statement
``INSERT INTO t (...) SELECT * FROM unnest(%b::type[], ...) ...``: the same rows, the same
``ON CONFLICT`` clause. The arrays go in binary (``%b``): in text form every value would be
escaped by a regular expression, which cost more than ``executemany`` itself. An array holds
values of one type, so each column's values are made that type first (an integer start time
becomes a float). On SQLite :meth:`ColumnWrite.run` keeps ``executemany`` of the caller's
one-row statement, which runs in C there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection

if TYPE_CHECKING:
    import psycopg

_PG_TYPES: dict[type, str] = {str: "text", int: "int8", float: "float8"}


def _typed(kind: type, values: Sequence[Any]) -> list[Any]:
    """``values`` made ``kind``, None kept (a NULL of a nullable column; ``str(None)`` would
    be the text "None")."""
    if None in values:
        return [None if v is None else kind(v) for v in values]
    return list(map(kind, values))


def _unnest(kinds: Sequence[type]) -> str:
    """``unnest(%b::type[], ...)``: one binary array per kind."""
    return "unnest(" + ", ".join(f"%b::{_PG_TYPES[k]}[]" for k in kinds) + ")"


Rows = Sequence[Sequence[Any]]


@dataclass(frozen=True)
class ColumnWrite:
    """One statement ``sql`` fed a batch of rows as column arrays; ``kinds``: each column's
    Python type, in the order of the rows' values; ``unique``: what makes a batch hold each
    key once, where rows of one key may come together (one statement does not write a row
    twice). Made by :func:`column_insert` and :func:`column_update`."""

    sql: str
    kinds: tuple[type, ...]
    unique: Callable[[Rows], Rows] | None = None

    def arrays(self, rows: Rows) -> tuple[list[Any], ...]:
        """``rows`` as one list per column, each value of its column's type (None kept)."""
        columns = zip(*rows, strict=True)
        return tuple(_typed(k, c) for k, c in zip(self.kinds, columns, strict=True))

    def run(self, conn: Connection, rows: Rows, each: str) -> int:
        """Write ``rows`` in ``conn``'s transaction; returns the rows written (0 for none). On
        SQLite ``each``, the same write of one row, runs once per row (``executemany``)."""
        if not rows:
            return 0
        if conn.dialect.name == "sqlite":
            return int(conn.exec_driver_sql(each, rows).rowcount)
        if self.unique is not None:
            rows = self.unique(rows)
        cursor = cast("psycopg.Cursor[Any]", conn.connection.cursor())
        try:
            cursor.execute(self.sql, self.arrays(rows), binary=True)
            return int(cursor.rowcount)
        finally:
            cursor.close()


def column_insert(
    table: str,
    columns: Sequence[str],
    kinds: tuple[type, ...],
    tail: str = "",
    unique: Callable[[Rows], Rows] | None = None,
) -> ColumnWrite:
    """``INSERT INTO table (columns) SELECT * FROM unnest(...) tail`` (``tail``: an
    ``ON CONFLICT`` clause; ``unique``: as :class:`ColumnWrite`'s)."""
    cols = ", ".join(f'"{c}"' for c in columns)
    sql = f"INSERT INTO {table} ({cols}) SELECT * FROM {_unnest(kinds)} {tail}"
    return ColumnWrite(sql, kinds, unique)


def column_update(
    table: str, columns: Sequence[str], keys: Sequence[str], kinds: tuple[type, ...]
) -> ColumnWrite:
    """``UPDATE table SET`` the ``columns`` of the rows found by the ``keys`` columns; each
    row holds the new values, then the key (``kinds`` in that order). A key must come once in
    a batch: one statement does not update a row twice."""
    names = ", ".join(f'"{c}"' for c in (*columns, *keys))
    sets = ", ".join(f'"{c}" = u."{c}"' for c in columns)
    match = " AND ".join(f'w."{k}" = u."{k}"' for k in keys)
    return ColumnWrite(
        f"UPDATE {table} AS w SET {sets} FROM {_unnest(kinds)} AS u({names}) WHERE {match}",
        kinds,
    )
