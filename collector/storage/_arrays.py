"""PostgreSQL's batch writes as one statement of column arrays (``unnest``), not ``executemany``.

psycopg's ``executemany`` costs about 16 us of Python per row (each row's parameters dumped and
its statement queued in the pipeline), which made the raw span insert, not the fold, what held
ingest back on PostgreSQL (``tests/performance/bench_ingest_ceiling.py``). Here a batch of rows
becomes one list per column, sent as arrays in one statement
``INSERT INTO t (...) SELECT * FROM unnest(%b::type[], ...) ...``: the same rows, the same
``ON CONFLICT`` clause. The arrays go in binary (``%b``): in text form every value would be
escaped by a regular expression, which cost more than ``executemany`` itself. An array holds
values of one type, so each column's values are made that type first (an integer start time
becomes a float). SQLite keeps ``executemany``, which runs in C there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Connection

if TYPE_CHECKING:
    import psycopg

_PG_TYPES: dict[type, str] = {str: "text", int: "int8", float: "float8"}


@dataclass(frozen=True)
class ColumnInsert:
    """One ``INSERT ... SELECT * FROM unnest(...)`` of ``columns`` into ``table``, ``tail``
    appended (an ``ON CONFLICT`` clause); ``kinds``: each column's Python type, in order."""

    table: str
    columns: tuple[str, ...]
    kinds: tuple[Callable[[Any], Any], ...]
    tail: str = ""

    @property
    def sql(self) -> str:
        arrays = ", ".join(f"%b::{_PG_TYPES[cast(type, k)]}[]" for k in self.kinds)
        cols = ", ".join(f'"{c}"' for c in self.columns)
        return f"INSERT INTO {self.table} ({cols}) SELECT * FROM unnest({arrays}) {self.tail}"

    def arrays(self, rows: Sequence[Sequence[Any]]) -> tuple[list[Any], ...]:
        """``rows`` (in :attr:`columns` order) as one list per column, each value of its
        column's type."""
        columns = zip(*rows, strict=True)
        return tuple(list(map(k, c)) for k, c in zip(self.kinds, columns, strict=True))

    def run(self, conn: Connection, rows: Sequence[Sequence[Any]]) -> int:
        """Write ``rows`` in ``conn``'s transaction; returns the rows written (0 for none)."""
        if not rows:
            return 0
        cursor = cast("psycopg.Cursor[Any]", conn.connection.cursor())
        try:
            cursor.execute(self.sql, self.arrays(rows), binary=True)
            return int(cursor.rowcount)
        finally:
            cursor.close()
