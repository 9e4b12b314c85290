"""Raw heartbeat retention: raw ``ett.train.window`` rows older than a horizon become runs.

Ingest stores every span raw (its hot path is unchanged). After a batch commits, each job whose
newest window moved :data:`COMPACT_EVERY_S` past its compaction line is compacted in a
transaction of its own: its raw windows that ended more than ``retention_s`` before its newest
window are folded into ``window_runs`` (:func:`ett_collector.storage._runs.fold`) and deleted from
``spans``. The horizon is measured on the job's own span clock, not the collector's, so a job
keeps the last ``retention_s`` of its raw windows (for inspection) and a collector restarted
after days compacts nothing it should not.

Concurrency: the job's ``window_compaction`` row is advanced first, with a guard, so two
compactions of one job (threads, worker processes, collectors on one PostgreSQL) take turns and
the later one sees what the first wrote. A window inserted raw while a compaction runs stays raw
until the next one; reads fold raw windows and runs alike, so nothing is counted twice or lost.

The same transaction adds each folded window (never a replay) to the job's step-time series
(``window_series``, ``collector/storage/_series.py``): what a run does not keep of a window.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine

from ett_collector.domain.model import SpanRecord
from ett_collector.storage._arrays import column_update
from ett_collector.storage._outage import db_reason, is_transient_db_error
from ett_collector.storage._rows import SPAN_COLUMNS
from ett_collector.storage._runs import (
    CONTIGUOUS_EPS_S,
    RUN_COLUMNS,
    WINDOW,
    Run,
    fold_runs,
    runs_from_rows,
    runs_of_rows,
)
from ett_collector.storage._series import (
    SERIES_UPSERT,
    load_sql,
    not_replays,
    series_rows,
    upsert_sql,
)
from ett_collector.storage._sql import placeholders, quoted_columns

log = logging.getLogger("ett_collector")

DEFAULT_RETENTION_S = 600.0
"""Raw windows are kept for the newest 10 minutes of each job (``ETT_RAW_WINDOW_RETENTION_S``)."""

_LINES_AT_ONCE = 500
"""Jobs whose compaction lines one statement reads (SQLite allows 32,766 parameters)."""

_LOGGED_JOBS = 10_000
"""How many jobs' unfolded windows are remembered as logged (then the set starts again)."""

COMPACT_EVERY_S = 300.0
"""A job is compacted once its newest window is this much past its last compaction line: each
compaction rewrites one run per rank, so it folds 30 windows per rank at a time (raw windows
are kept between ``retention_s`` and ``retention_s + COMPACT_EVERY_S``)."""


def _fetch(conn: Connection, sql: str, params: tuple[Any, ...]) -> list[Any]:
    """Every row of ``sql`` as the driver's plain tuples (no SQLAlchemy Row objects)."""
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


@dataclass(frozen=True)
class CompactionSql:
    """The statements of compaction and of loading runs, for one placeholder style."""

    ph: str
    lines: str
    advance: str
    take_raw: str
    runs_from: str
    delete_run: str
    extend_run: str
    insert_run: str
    delete_raw: str
    uncount: str
    load_runs: str
    hold: str

    @classmethod
    def for_placeholder(cls, ph: str) -> CompactionSql:
        """The statements with ``ph`` (``?`` or ``%s``) as the placeholder."""
        return cls(
            ph=ph,
            lines="SELECT job_id, compacted_to FROM window_compaction WHERE job_id",
            advance=(
                f"INSERT INTO window_compaction (job_id, compacted_to) VALUES ({ph}, {ph})"
                " ON CONFLICT (job_id) DO UPDATE SET compacted_to = excluded.compacted_to"
                " WHERE window_compaction.compacted_to <= excluded.compacted_to"
            ),
            take_raw=(
                f"DELETE FROM spans WHERE job_id = {ph} AND start < {ph}"
                f' AND name = {ph} AND "end" < {ph} RETURNING {quoted_columns(SPAN_COLUMNS)}'
            ),
            runs_from=(
                f"SELECT {quoted_columns(RUN_COLUMNS)} FROM window_runs"
                f' WHERE job_id = {ph} AND "end" >= {ph}'
            ),
            delete_run=(
                f"DELETE FROM window_runs WHERE job_id = {ph} AND attempt = {ph} AND rank = {ph}"
                f" AND start = {ph} AND trace_id = {ph} AND span_id = {ph}"
            ),
            extend_run=(
                f'UPDATE window_runs SET "end" = {ph}, step_last = {ph}, samples = {ph},'
                f' "count" = {ph} WHERE job_id = {ph} AND attempt = {ph} AND rank = {ph}'
                f" AND start = {ph} AND trace_id = {ph} AND span_id = {ph}"
            ),
            insert_run=(
                f"INSERT INTO window_runs ({quoted_columns(RUN_COLUMNS)})"
                f" VALUES ({placeholders(ph, len(RUN_COLUMNS))})"
            ),
            delete_raw=(
                f"DELETE FROM spans WHERE job_id = {ph} AND start = {ph} AND trace_id = {ph}"
                f" AND span_id = {ph}"
            ),
            uncount=f"UPDATE jobs SET span_count = span_count - {ph} WHERE job_id = {ph}",
            load_runs=(
                f"SELECT {quoted_columns(RUN_COLUMNS)} FROM window_runs WHERE job_id = {ph}"
                " ORDER BY attempt, rank, start"
            ),
            hold=(  # always writes the row: folds of one job at ingest take turns on it
                f"INSERT INTO window_compaction (job_id, compacted_to) VALUES ({ph}, {ph})"
                " ON CONFLICT (job_id) DO UPDATE SET compacted_to = CASE"
                " WHEN excluded.compacted_to > window_compaction.compacted_to"
                " THEN excluded.compacted_to ELSE window_compaction.compacted_to END"
            ),
        )


_EXTEND_RUNS = column_update(
    "window_runs",
    ("end", "step_last", "samples", "count"),
    ("job_id", "attempt", "rank", "start", "trace_id", "span_id"),
    (float, int, int, int, str, int, int, float, str, str),
)
"""PostgreSQL's :attr:`CompactionSql.extend_run` of a batch of runs as one statement
(``_arrays.py``): with a body of one window of every rank (an OpenTelemetry Collector's),
every run of the batch moves, one row each."""


@dataclass(slots=True)
class _Writes:
    """The rows that folds change, written together (:meth:`write`): runs deleted (absorbed
    into an earlier one), moved (extended in place) and new, and series buckets added."""

    deleted: list[tuple[Any, ...]] = field(default_factory=list)
    moved: list[tuple[Any, ...]] = field(default_factory=list)
    new: list[tuple[Any, ...]] = field(default_factory=list)
    series: list[tuple[Any, ...]] = field(default_factory=list)

    def write(self, conn: Connection, sql: CompactionSql, series_upsert: str) -> None:
        if self.deleted:
            conn.exec_driver_sql(sql.delete_run, self.deleted)
        _EXTEND_RUNS.run(conn, self.moved, sql.extend_run)  # each run of a batch moves once
        if self.new:
            conn.exec_driver_sql(sql.insert_run, self.new)
        SERIES_UPSERT.run(conn, self.series, series_upsert)


class Compactor:
    """Folds a store's old raw windows into runs (``retention_s`` None: never)."""

    def __init__(self, engine: Engine, ph: str, retention_s: float | None) -> None:
        if retention_s is not None and retention_s < 0:
            raise ValueError(f"raw window retention must be >= 0 seconds, got {retention_s}")
        self._engine = engine
        self.retention_s = retention_s
        self.sql = CompactionSql.for_placeholder(ph)
        self._series_upsert = upsert_sql(ph)
        self._series_load = load_sql(ph)
        self.unfolded: dict[str, int] = {}
        """Windows that started where their rank's run ended yet could not be folded, by
        reason (``_runs.BREAK_REASONS``), since the process started."""
        self.on_unfolded: Callable[[str], None] | None = None
        """Called with the reason of each such window (the ``/metrics`` counter)."""
        self._logged: set[str] = set()
        self._outage = False
        """Whether the last compaction failed for a database outage (said once, when it began)."""
        self._outage_lock = threading.Lock()

    @property
    def folds_at_ingest(self) -> bool:
        """Whether a batch's windows are folded into runs in the ingest transaction, never
        written raw (``retention_s`` 0: :meth:`fold_batch`)."""
        return self.retention_s == 0

    def fold_batch(
        self, conn: Connection, windows: Mapping[str, Sequence[SpanRecord]]
    ) -> dict[str, int]:
        """Fold a batch's ``windows`` (by job) into the stored runs and series in ``conn``'s
        transaction (the ingest's), job by job in id order; returns the windows folded by job
        (a replay, lying inside a stored run, or a span id repeated in the batch is not).
        The job's ``window_compaction`` row is written first, so two folds of one job take
        turns; the job's span count is left to the caller."""
        fresh: dict[str, list[Run]] = {}
        for job_id, ws in sorted(windows.items()):
            unique = {(w.trace_id, w.span_id): w for w in ws}
            fresh[job_id] = [Run.of(w) for w in unique.values()]
        holds = [(job_id, max(w.end for w in runs)) for job_id, runs in fresh.items()]
        conn.exec_driver_sql(self.sql.hold, holds)  # in job order: one lock order
        lows = {j: min(w.start for w in runs) - CONTIGUOUS_EPS_S for j, runs in fresh.items()}
        stored = self._runs_from_many(conn, lows)
        writes = _Writes()
        folded = {
            job_id: len(runs) - self._plan(job_id, runs, len(runs), stored.get(job_id, []), writes)
            for job_id, runs in fresh.items()
        }
        writes.write(conn, self.sql, self._series_upsert)
        return folded

    def after_ingest(self, windows: Mapping[str, Sequence[SpanRecord]]) -> int:
        """Compact the jobs of a committed batch that are due; ``windows`` are the batch's
        windows by job. A job is due when its newest window is :data:`COMPACT_EVERY_S` past its
        line; a late window (ending before the line: a rank that sent late, a replay) is folded
        at once, alone. Returns the windows folded. Never raises: the batch is stored already,
        and what a failed compaction left raw, a later one folds. A failure is logged as the
        background loops log theirs (:meth:`_failed`)."""
        if self.retention_s is None or not windows:
            return 0
        folded = 0
        try:
            lines = self._lines(list(windows))
            for job_id, ws in sorted(windows.items()):
                cutoff = max(w.end for w in ws) - self.retention_s
                line = lines.get(job_id)
                if line is None or cutoff - line >= COMPACT_EVERY_S:
                    folded += self.compact(job_id, cutoff)
                elif late := [w for w in ws if w.end < line]:
                    folded += self.compact(job_id, line, late)
        except Exception as exc:
            self._failed(exc)
        else:
            with self._outage_lock:
                was_out, self._outage = self._outage, False
            if was_out:
                log.warning("compaction of raw windows: the database answers again")
        return folded

    def _failed(self, exc: Exception) -> None:
        """Log a failed compaction: a bug with its traceback, each time; a database outage in
        one line when it begins (every batch's compaction fails alike meanwhile, and the ingest
        answers and the loops say it already), and one when a compaction passes again."""
        if not is_transient_db_error(exc):
            log.exception("compaction of raw windows failed; a later batch retries it")
            return
        with self._outage_lock:
            was_out, self._outage = self._outage, True
        if not was_out:
            log.warning(
                "compaction of raw windows: the database is unavailable (%s); a later batch"
                " retries it",
                db_reason(exc),
            )

    def _lines(self, job_ids: Sequence[str]) -> dict[str, float]:
        """The compaction lines of those of ``job_ids`` that have one, read in one statement per
        :data:`_LINES_AT_ONCE` jobs (a batch of an OpenTelemetry Collector holds many jobs)."""
        lines: dict[str, float] = {}
        with self._engine.connect() as conn:
            for i in range(0, len(job_ids), _LINES_AT_ONCE):
                chunk = job_ids[i : i + _LINES_AT_ONCE]
                sql = self.sql.lines + f" IN ({placeholders(self.sql.ph, len(chunk))})"
                for job_id, line in _fetch(conn, sql, tuple(chunk)):
                    lines[job_id] = float(line)
        return lines

    def compact(
        self, job_id: str, cutoff: float, windows: Sequence[SpanRecord] | None = None
    ) -> int:
        """Fold the job's raw windows that ended before ``cutoff`` (or only ``windows``, stored
        raw and ending before it) into its runs, in one transaction; returns how many raw rows
        were folded (0 when another compaction had moved the line past ``cutoff``)."""
        with self._engine.begin() as conn:
            if conn.exec_driver_sql(self.sql.advance, (job_id, cutoff)).rowcount == 0:
                return 0
            if windows is None:  # the rows deleted are exactly the rows folded
                raw = _fetch(conn, self.sql.take_raw, (job_id, cutoff, WINDOW, cutoff))
                fresh, deleted = runs_of_rows(raw), len(raw)
            else:
                unique = {(w.trace_id, w.span_id): w for w in windows}
                fresh = [Run.of(w) for w in unique.values()]
                deleted = conn.exec_driver_sql(
                    self.sql.delete_raw, [(job_id, w.start, w.trace_id, w.span_id) for w in fresh]
                ).rowcount
            return self._fold(conn, job_id, fresh, int(deleted)) if fresh else 0

    def _fold(self, conn: Connection, job_id: str, fresh: list[Run], deleted: int) -> int:
        """Fold ``fresh`` (``deleted`` raw rows, deleted already) into the stored runs and
        uncount the replays; returns ``deleted``."""
        gone = self._fold_runs(conn, job_id, fresh, deleted)
        if gone:  # replays of folded windows, counted when they arrived: not spans any more
            conn.exec_driver_sql(self.sql.uncount, (gone, job_id))
        return deleted

    def _fold_runs(self, conn: Connection, job_id: str, fresh: list[Run], deleted: int) -> int:
        """Fold ``fresh`` (``deleted`` raw spans) into the stored runs and the series; returns
        how many of those spans are not in a run (replays)."""
        lo = min(w.start for w in fresh) - CONTIGUOUS_EPS_S
        writes = _Writes()
        gone = self._plan(
            job_id, fresh, deleted, _fetch(conn, self.sql.runs_from, (job_id, lo)), writes
        )
        writes.write(conn, self.sql, self._series_upsert)
        return gone

    def _runs_from_many(self, conn: Connection, lows: Mapping[str, float]) -> dict[str, list[Any]]:
        """The ``window_runs`` rows of each job of ``lows`` ending at or after its low, by job,
        in one statement (a join with the (job, low) pairs as ``VALUES``)."""
        ph = self.sql.ph
        cols = ", ".join(f'w."{c}"' for c in RUN_COLUMNS)
        pairs = ", ".join([f"({ph}, {ph})"] * len(lows))
        sql = (
            f"SELECT {cols} FROM window_runs AS w JOIN (VALUES {pairs}) AS q"
            ' ON w.job_id = q.column1 AND w."end" >= q.column2'
        )
        out: dict[str, list[Any]] = {}
        for row in _fetch(conn, sql, tuple(v for pair in lows.items() for v in pair)):
            out.setdefault(row[0], []).append(row)
        return out

    def _plan(
        self, job_id: str, fresh: list[Run], deleted: int, rows: Sequence[Any], writes: _Writes
    ) -> int:
        """Fold ``fresh`` into the job's stored runs (``rows``: ``window_runs`` rows that may
        take them), adding what changes to ``writes``; returns how many of the ``deleted`` raw
        spans are not in a run (replays)."""
        ranks = {(w.attempt, w.rank) for w in fresh}
        stored = [Run.of(r) for r in runs_from_rows(rows) if (r.attempt, r.rank) in ranks]
        before = {r.key(): (r.end, r.count) for r in stored}  # folding extends them in place
        stored_count = sum(r.count for r in stored)
        writes.series += series_rows(job_id, not_replays(stored, fresh))  # before the fold
        runs, _ = fold_runs(stored, fresh)
        self._count_breaks(job_id, runs, set(before))
        # a stored run that kept its first window is updated in place (its attributes hold
        # only the first window's); one absorbed into an earlier run is deleted; others are new
        for r in runs:
            was = before.pop(r.key(), None)
            if was is None:
                writes.new.append(r.row())
            elif was != (r.end, r.count):
                writes.moved.append((r.end, r.step_last, r.samples, r.count, job_id, *r.key()))
        writes.deleted += [(job_id, *key) for key in before]
        return deleted + stored_count - sum(r.count for r in runs)

    def _count_breaks(self, job_id: str, runs: Sequence[Run], stored: set[Any]) -> None:
        """Count the new runs that start where their rank's previous run ends
        (``Run.break_reason``: windows that could not be folded), and log the first per job."""
        for a, b in itertools.pairwise(runs):
            if (a.attempt, a.rank) != (b.attempt, b.rank) or b.key() in stored:
                continue
            reason = a.break_reason(b)
            if reason is None:
                continue
            self.unfolded[reason] = self.unfolded.get(reason, 0) + 1
            if self.on_unfolded is not None:
                self.on_unfolded(reason)
            if job_id not in self._logged:
                if len(self._logged) >= _LOGGED_JOBS:
                    self._logged.clear()
                self._logged.add(job_id)
                log.warning(
                    "job %(job)s: a window of rank %(rank)d (attempt %(attempt)d) at %(start).3f"
                    " starts where the previous one ends but cannot be folded into its run"
                    " (%(reason)s: steps %(first)s..%(last)s after %(before)s); such windows are"
                    " kept as runs of their own (ett_windows_unfolded_total)",
                    {
                        "job": job_id,
                        "rank": b.rank,
                        "attempt": b.attempt,
                        "start": b.start,
                        "reason": reason,
                        "first": b.step_first,
                        "last": b.step_last,
                        "before": a.step_last,
                    },
                )

    def load_series(self, conn: Connection, job_id: str) -> list[Any]:
        """The job's ``window_series`` rows (``_series.SERIES_COLUMNS`` order)."""
        return _fetch(conn, self._series_load, (job_id,))

    def load_runs(self, conn: Connection, job_id: str) -> list[SpanRecord]:
        """The job's stored runs as window records, by (attempt, rank, start)."""
        return runs_from_rows(_fetch(conn, self.sql.load_runs, (job_id,)))
