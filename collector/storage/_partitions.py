"""PostgreSQL: ``spans`` partitioned by day of ``start`` (native declarative partitioning).

Migration 0009 turns ``spans`` into a table ``PARTITION BY RANGE (start)`` with one partition per
UTC day, ``spans_pYYYYMMDD`` covering ``[day, day + 86400)``, and a ``spans_default`` partition
for spans of a day that has none (a late or replayed span, a simulated history). The service
creates the partitions of today and the next :data:`AHEAD_DAYS` days (:func:`ensure_ahead`,
each pass of the retention loop); a partition made for a day that already has spans in the
default one takes them with it, in the same transaction.

Retention drops whole partitions (:func:`drop_before`): a day before the raw spans' cutoff
whose spans all belong to jobs already marked for pruning (``jobs.pruned`` > 0) is detached
and dropped, instead of deleting its rows one by one. A job not marked that may have spans in
it (its figures' ``alloc``, less a day of clock skew, falls before the partition's end; or it
has no figures yet) keeps the partition; its other jobs' rows there are deleted in batches as
on SQLite. SQLite keeps plain tables.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

DAY = 86400
AHEAD_DAYS = 3
"""Days after today whose partitions exist at any time."""

SKEW_S = DAY
"""How far before its figures' ``alloc`` a job's spans may start (clock skew between ranks)."""

DETACH_LOCK_TIMEOUT = "2s"
"""How long a partition's detach waits for its lock on ``spans`` (ingest holds it briefly)
before it gives up until the next pass, so ingest never queues behind it for longer."""

_NAME = re.compile(r"^spans_p(\d{8})$")


# kept alike: commands/_target.Target has the same shape (a two-field record), no shared rule
@dataclass(frozen=True)
class Partition:
    """One day's partition of ``spans``: ``[lo, lo + 86400)``."""

    name: str
    lo: float

    @property
    def hi(self) -> float:
        """The partition's exclusive upper bound."""
        return self.lo + DAY


def include_name(name: str | None, type_: str, _parents: object = None) -> bool:
    """Alembic's ``include_name``: leave the partitions of ``spans`` out of schema comparisons
    (``spans`` itself is compared; its partitions are made at run time)."""
    return not (type_ == "table" and name is not None and is_partition_table(name))


def is_partition_table(name: str) -> bool:
    """True for ``spans_pYYYYMMDD`` and ``spans_default``."""
    return name == "spans_default" or _NAME.match(name) is not None


def partition_name(day_start: float) -> str:
    """``spans_pYYYYMMDD`` of the UTC day starting at ``day_start``."""
    return "spans_p" + time.strftime("%Y%m%d", time.gmtime(day_start))


def day_of(t: float) -> float:
    """The start of the UTC day holding instant ``t``."""
    return float(int(t // DAY) * DAY)


def is_partitioned(conn: Connection) -> bool:
    """True on PostgreSQL when ``spans`` is a partitioned table."""
    if conn.dialect.name != "postgresql":
        return False
    kind = conn.exec_driver_sql(
        "SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass('spans')"
    ).scalar()
    return kind == "p"


def partitions(conn: Connection) -> list[Partition]:
    """The day partitions of ``spans``, oldest first (the default one is not listed)."""
    names = conn.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
        " WHERE i.inhparent = to_regclass('spans')"
    ).scalars()
    out = []
    for name in names:
        m = _NAME.match(str(name))
        if m:
            lo = calendar.timegm(time.strptime(m.group(1), "%Y%m%d"))
            out.append(Partition(str(name), float(lo)))
    return sorted(out, key=lambda p: p.lo)


def create_statements(day_start: float) -> list[str]:
    """SQL that makes the partition of one day, taking that day's spans out of the default
    partition first (an attach checks that the default holds none of its range)."""
    name, lo, hi = partition_name(day_start), day_start, day_start + DAY
    return [
        f"CREATE TABLE {name} (LIKE spans INCLUDING DEFAULTS)",
        f"WITH moved AS (DELETE FROM spans_default WHERE start >= {lo!r} AND start < {hi!r}"
        f" RETURNING *) INSERT INTO {name} SELECT * FROM moved",
        f"ALTER TABLE spans ATTACH PARTITION {name} FOR VALUES FROM ({lo!r}) TO ({hi!r})",
    ]


def ensure_days(conn: Connection, days: list[float]) -> list[str]:
    """Create the partitions of ``days`` (day starts) that are missing, in ``conn``'s
    transaction; returns the names created."""
    have = {p.lo for p in partitions(conn)}
    made = []
    for day in sorted(set(days) - have):
        for sql in create_statements(day):
            conn.exec_driver_sql(sql)
        made.append(partition_name(day))
    return made


def ensure_ahead(engine: Engine, now: float, ahead: int = AHEAD_DAYS) -> list[str]:
    """Create today's partition and those of the next ``ahead`` days where missing (a no-op on
    SQLite or an unpartitioned ``spans``); returns the names created."""
    with engine.begin() as conn:
        if not is_partitioned(conn):
            return []
        today = day_of(now)
        return ensure_days(conn, [today + i * DAY for i in range(ahead + 1)])


def droppable(conn: Connection, before: float) -> list[Partition]:
    """Day partitions ending at or before ``before`` that hold no span of a job not marked for
    pruning (see the module's docstring for how that is known without reading them)."""
    out = []
    for p in partitions(conn):
        if p.hi > before:
            break
        blocked = conn.exec_driver_sql(
            "SELECT EXISTS (SELECT 1 FROM jobs j JOIN job_figures f ON f.job_id = j.job_id"
            " WHERE j.pruned = 0 AND f.alloc - %s < %s)"
            " OR EXISTS (SELECT 1 FROM jobs j WHERE j.pruned = 0 AND NOT EXISTS"
            " (SELECT 1 FROM job_figures f WHERE f.job_id = j.job_id)"
            f" AND EXISTS (SELECT 1 FROM {p.name} s WHERE s.job_id = j.job_id))",
            (SKEW_S, p.hi),
        ).scalar()
        if not blocked:
            out.append(p)
    return out


def drop(engine: Engine, partition: Partition) -> int | None:
    """Detach and drop one partition in one transaction; returns about how many rows it held
    (the planner's estimate), or None when its lock did not come within
    :data:`DETACH_LOCK_TIMEOUT` (the next pass tries again)."""
    with engine.connect() as conn:
        conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{DETACH_LOCK_TIMEOUT}'")
        rows = conn.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)", (partition.name,)
        ).scalar()
        try:
            conn.exec_driver_sql(f"ALTER TABLE spans DETACH PARTITION {partition.name}")
        except Exception as exc:
            conn.rollback()
            if getattr(getattr(exc, "orig", None), "sqlstate", None) == "55P03":
                return None  # lock not available: leave it to the next pass
            raise
        conn.exec_driver_sql(f"DROP TABLE {partition.name}")
        conn.commit()
    return max(int(rows or 0), 0)


def drop_before(engine: Engine, cutoff: float) -> tuple[int, int]:
    """Drop every day partition that ends by ``cutoff`` and :func:`droppable` allows; returns
    ``(partitions dropped, about how many rows they held)``."""
    with engine.connect() as conn:
        if not is_partitioned(conn):
            return 0, 0
        due = droppable(conn, cutoff)
    dropped = rows = 0
    for p in due:
        held = drop(engine, p)
        if held is not None:
            dropped += 1
            rows += held
    return dropped, rows
