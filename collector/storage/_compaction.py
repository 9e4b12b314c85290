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
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

from ett_collector.domain.model import SpanRecord
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

log = logging.getLogger("ett_collector")

DEFAULT_RETENTION_S = 600.0
"""Raw windows are kept for the newest 10 minutes of each job (``ETT_RAW_WINDOW_RETENTION_S``)."""

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


def _cols(columns: Iterable[str]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


@dataclass(frozen=True)
class CompactionSql:
    """The statements of compaction and of loading runs, for one placeholder style."""

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

    @classmethod
    def for_placeholder(cls, ph: str) -> CompactionSql:
        """The statements with ``ph`` (``?`` or ``%s``) as the placeholder."""
        return cls(
            lines=f"SELECT job_id, compacted_to FROM window_compaction WHERE job_id = {ph}",
            advance=(
                f"INSERT INTO window_compaction (job_id, compacted_to) VALUES ({ph}, {ph})"
                " ON CONFLICT (job_id) DO UPDATE SET compacted_to = excluded.compacted_to"
                " WHERE window_compaction.compacted_to <= excluded.compacted_to"
            ),
            take_raw=(
                f"DELETE FROM spans WHERE job_id = {ph} AND start < {ph}"
                f' AND name = {ph} AND "end" < {ph} RETURNING {_cols(SPAN_COLUMNS)}'
            ),
            runs_from=(
                f"SELECT {_cols(RUN_COLUMNS)} FROM window_runs"
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
                f"INSERT INTO window_runs ({_cols(RUN_COLUMNS)})"
                f" VALUES ({', '.join([ph] * len(RUN_COLUMNS))})"
            ),
            delete_raw=(
                f"DELETE FROM spans WHERE job_id = {ph} AND start = {ph} AND trace_id = {ph}"
                f" AND span_id = {ph}"
            ),
            uncount=f"UPDATE jobs SET span_count = span_count - {ph} WHERE job_id = {ph}",
            load_runs=(
                f"SELECT {_cols(RUN_COLUMNS)} FROM window_runs WHERE job_id = {ph}"
                " ORDER BY attempt, rank, start"
            ),
        )


class Compactor:
    """Folds a store's old raw windows into runs (``retention_s`` None: never)."""

    def __init__(self, engine: Engine, ph: str, retention_s: float | None) -> None:
        if retention_s is not None and retention_s < 0:
            raise ValueError(f"raw window retention must be >= 0 seconds, got {retention_s}")
        self._engine = engine
        self.retention_s = retention_s
        self.sql = CompactionSql.for_placeholder(ph)

    def after_ingest(self, windows: Mapping[str, Sequence[SpanRecord]]) -> int:
        """Compact the jobs of a committed batch that are due; ``windows`` are the batch's
        windows by job. A job is due when its newest window is :data:`COMPACT_EVERY_S` past its
        line; a late window (ending before the line: a rank that sent late, a replay) is folded
        at once, alone. Returns the windows folded. Never raises: the batch is stored already,
        and what a failed compaction left raw, a later one folds."""
        if self.retention_s is None or not windows:
            return 0
        folded = 0
        try:
            with self._engine.connect() as conn:
                lines = {}
                for job_id in windows:
                    row = conn.exec_driver_sql(self.sql.lines, (job_id,)).first()
                    if row is not None:
                        lines[job_id] = float(row[1])
            for job_id, ws in sorted(windows.items()):
                cutoff = max(w.end for w in ws) - self.retention_s
                line = lines.get(job_id)
                if line is None or cutoff - line >= COMPACT_EVERY_S:
                    folded += self.compact(job_id, cutoff)
                elif late := [w for w in ws if w.end < line]:
                    folded += self.compact(job_id, line, late)
        except Exception:
            log.exception("compaction of raw windows failed; a later batch retries it")
        return folded

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
        """Fold ``fresh`` (``deleted`` raw rows, deleted already) into the stored runs."""
        sql = self.sql
        ranks = {(w.attempt, w.rank) for w in fresh}
        lo = min(w.start for w in fresh) - CONTIGUOUS_EPS_S
        stored = [
            Run.of(r)
            for r in runs_from_rows(_fetch(conn, sql.runs_from, (job_id, lo)))
            if (r.attempt, r.rank) in ranks
        ]
        before = {r.key(): (r.end, r.count) for r in stored}  # folding extends them in place
        stored_count = sum(r.count for r in stored)
        runs, _ = fold_runs(stored, fresh)
        # a stored run that kept its first window is updated in place (its attributes hold
        # only the first window's); one absorbed into an earlier run is deleted; others are new
        new, moved = [], []
        for r in runs:
            was = before.pop(r.key(), None)
            if was is None:
                new.append(r)
            elif was != (r.end, r.count):
                moved.append(r)
        if before:
            conn.exec_driver_sql(sql.delete_run, [(job_id, *key) for key in before])
        if moved:
            conn.exec_driver_sql(
                sql.extend_run,
                [(r.end, r.step_last, r.samples, r.count, job_id, *r.key()) for r in moved],
            )
        if new:
            conn.exec_driver_sql(sql.insert_run, [r.row() for r in new])
        gone = deleted + stored_count - sum(r.count for r in runs)
        if gone:  # replays of folded windows, counted when they arrived: not spans any more
            conn.exec_driver_sql(sql.uncount, (gone, job_id))
        return deleted

    def load_runs(self, conn: Connection, job_id: str) -> list[SpanRecord]:
        """The job's stored runs as window records, by (attempt, rank, start)."""
        return runs_from_rows(_fetch(conn, self.sql.load_runs, (job_id,)))
