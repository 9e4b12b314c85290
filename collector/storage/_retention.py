"""Retention: old data deleted in small batches, a job's figures never derived from part of it.

What goes, per job that ended (its stored state is not ``running``, it has no spans awaiting a
recompute, and no span arrived for :attr:`Policy.quiet_s`), by the age of its figures' ``end``
(the job's own span clock):

1. after ``spans_s``: its raw spans (``spans``). The job's row is marked first (``pruned`` 1,
   ``spans_pruned_at``), in a transaction of its own that also keeps its performance figures as
   its raw spans give them (``job_performance``, ``_kept_performance.py``), so a recompute
   refuses from then on and its stored figures, segments, fleet cells and performance figures
   stay as they are; then its spans go, a batch of at most ``batch_rows`` per transaction; then
   ``pruned`` 2.
2. after ``runs_s``: its folded heartbeat runs and their step-time series (``window_runs``,
   ``window_series``, ``window_compaction``, and the kept raw windows of its series), the same
   way; then ``pruned`` 3.
3. after ``figures_s``: the job itself: its cells are taken out of the fleet cells
   (``_fleet_cells.replace_job`` with no segments), and its segments, figures, kept performance
   figures, cells and row go, in one transaction.

Spans that came for a job after its raw spans were pruned are refused at ingest
(``_pruned_ingest.py``); those an older collector stored (marking the job dirty, and its
recompute then failed with the reason) go at the next pass: their spans, and at ``pruned`` 3 the
windows folded from them, are deleted as the job's were, and its dirty mark and failure cleared
(:meth:`Retention._sweep`).

Resolved alerts go ``alerts_s`` after they resolved. A pass killed at any instant leaves every
figure pointing at what it was computed from (segments and figures go with the job's row, in
one transaction) and the next pass finishes what it began (``pruned`` says where it was).
Between batches a pass pauses (``pause_s``), so ingest and reads never wait behind it for more
than one batch. On PostgreSQL whole days of spans go first (``_partitions.drop_before``); on
SQLite the pages freed are given back to the disk in small steps (``_engine.give_back_pages``).

One pass at a time: on PostgreSQL a pass holds a session advisory lock (:data:`PASS_LOCK_KEY`)
for its whole length, and a second pass (another ``ett db prune``, a collector's retention loop)
that finds it taken deletes nothing and says so (``Tally.busy``) instead of waiting. Each step
also holds its job: ``pruned`` only grows, and a job's deletion locks its row and goes on only
while the row is there at ``pruned`` 3, so two passes at once (an older collector's, or SQLite's,
where every write transaction takes the database's write lock first) never take a job's cells
out of the fleet cells twice.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from sqlalchemy import Connection, Engine, inspect

from ett_collector.domain.model import JobState
from ett_collector.storage import _fleet_cells, _kept_performance, _partitions
from ett_collector.storage._compaction import DEFAULT_RETENTION_S
from ett_collector.storage._engine import SQLITE_BEGIN_OPTION, give_back_pages, read_snapshot
from ett_collector.storage._pruned_ingest import PRUNED_FAILURE
from ett_collector.storage._retention_policy import (
    _NEVER,
    DEFAULT_BATCH_ROWS,
    KEPT,
    RESOLVED_ALERTS,
    RUNS_GONE,
    SPANS_GOING,
    SPANS_GONE,
    Policy,
    Progress,
    Tally,
    pruned_jobs,
)

__all__ = [
    "KEPT",
    "PASS_LOCK_KEY",
    "RUNS_GONE",
    "SPANS_GOING",
    "SPANS_GONE",
    "Policy",
    "Retention",
    "Tally",
    "pruned_jobs",
]


PASS_LOCK_KEY = 0x4554_5450_5255_4E45  # "ETTPRUNE"
"""The PostgreSQL advisory lock a pass holds (session level): one pass per database at a time."""


_RECOUNT = ', span_count = (SELECT COALESCE(SUM("count"), 0) FROM window_runs WHERE job_id = {ph})'
"""The ``jobs`` update of a job whose raw spans are gone: its stored spans are its runs'."""


_FAILED_PRUNED = PRUNED_FAILURE + "%"
"""``LIKE`` pattern of the failure recorded for a pruned job that spans came for."""

MARKS_AT_ONCE = 100
"""Jobs whose performance figures a pass computes before it marks them, in one transaction."""


class Retention:
    """Runs :class:`Policy` over one database (:meth:`run`), or says what it would do
    (:meth:`plan`)."""

    def __init__(
        self,
        engine: Engine,
        policy: Policy,
        *,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        pause_s: float = 0.005,
        clock: Callable[[], float] = time.time,
        raw_window_retention_s: float | None = DEFAULT_RETENTION_S,
    ) -> None:
        self.engine = engine
        self.policy = policy
        self.raw_window_retention_s = raw_window_retention_s
        """The collector's raw window retention: kept loop figures read a job's windows as its
        views do (``_series.job_points``)."""
        self.batch_rows = batch_rows
        self.pause_s = pause_s
        self.clock = clock
        self._ph = "?" if engine.dialect.paramstyle == "qmark" else "%s"
        self._series: bool | None = None
        self._writes = engine
        """The engine for write transactions: on SQLite they take the write lock at once
        (``BEGIN IMMEDIATE``): one that read first would fail at once, not wait, when another
        writer committed since its read."""
        if engine.dialect.name == "sqlite":
            self._writes = engine.execution_options(**{SQLITE_BEGIN_OPTION: "BEGIN IMMEDIATE"})

    # --- what is due ------------------------------------------------------------------------

    def _cutoffs(self, now: float) -> tuple[float, float, float]:
        p = self.policy
        return tuple(  # type: ignore[return-value]
            _NEVER if s is None else now - s for s in (p.spans_s, p.runs_s, p.figures_s)
        )

    def due(self, conn: Connection, now: float, limit: int) -> list[tuple[str, int, float]]:
        """``(job_id, pruned, end)`` of up to ``limit`` jobs with something due, oldest first.

        A job not begun (``pruned`` 0) must have ended and been quiet; one begun is finished
        whatever came since (spans that arrive for it go too: one whose raw spans are gone is
        due again while it is dirty or failed for being pruned, what an older collector's
        ingest of spans for it leaves; :meth:`_sweep`)."""
        ph = self._ph
        spans_c, runs_c, figures_c = self._cutoffs(now)
        sql = (
            'SELECT j.job_id, j.pruned, f."end" FROM jobs j'
            " JOIN job_figures f ON f.job_id = j.job_id"
            f' WHERE f."end" < {ph}'
            f' AND (j.pruned < {SPANS_GONE} OR (j.pruned < {RUNS_GONE} AND f."end" < {ph})'
            f' OR f."end" < {ph} OR j.dirty = {ph} OR j.failure LIKE {ph})'
            f" AND (j.pruned > {KEPT} OR (f.state <> {ph} AND j.dirty = {ph}"
            f" AND j.last_seen < {ph}))"
            f' ORDER BY f."end", j.job_id LIMIT {int(limit)}'
        )
        quiet = now - self.policy.quiet_s
        args = (
            *(spans_c, runs_c, figures_c, True, _FAILED_PRUNED),
            *(JobState.RUNNING.value, False, quiet),
        )
        return [(r[0], int(r[1]), float(r[2])) for r in conn.exec_driver_sql(sql, args)]

    def plan(self) -> Tally:
        """What :meth:`run` would delete now (counts; nothing changes)."""
        now = self.clock()
        _, runs_c, figures_c = self._cutoffs(now)
        tally = Tally()
        with self.engine.connect() as conn:
            for job_id, pruned, end in self.due(conn, now, 10**9):
                if pruned < SPANS_GONE:
                    tally.span_jobs += 1
                    tally.spans += self._count(conn, "spans", job_id)
                elif stored_since := self._count(conn, "spans", job_id):  # see _sweep
                    tally.span_jobs += 1
                    tally.spans += stored_since
                if pruned < RUNS_GONE and (end < runs_c or end < figures_c):
                    tally.run_jobs += 1
                    tally.runs += self._count(conn, "window_runs", job_id)
                    if self._has_series():
                        tally.series += self._count(conn, "window_series", job_id)
                if end < figures_c:
                    tally.jobs += 1
                    tally.segments += self._count(conn, "segments", job_id)
            tally.alerts = int(
                conn.exec_driver_sql(
                    self._alerts_sql("count(*)"), (self._alerts_cutoff(now),)
                ).scalar_one()
            )
        return tally

    def _has_series(self) -> bool:
        """Whether the database has ``window_series`` (migration 0008)."""
        if self._series is None:
            self._series = inspect(self.engine).has_table("window_series")
        return self._series

    def _count(self, conn: Connection, table: str, job_id: str) -> int:
        sql = f"SELECT count(*) FROM {table} WHERE job_id = {self._ph}"
        return int(conn.exec_driver_sql(sql, (job_id,)).scalar_one())

    # --- the pass ---------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None, progress: Progress | None = None) -> Tally:
        """Delete what is due, in batches; ``progress(tally so far)`` after each batch. Returns
        what was deleted; ends early (the rest left for the next pass) once ``stop`` is set.
        While another pass runs on the same PostgreSQL database, deletes nothing and returns
        at once, ``busy`` set."""
        with self._one_pass() as alone:
            if not alone:
                return Tally(busy=True)
            return self._pass(stop or threading.Event(), progress)

    @contextlib.contextmanager
    def _one_pass(self) -> Iterator[bool]:
        """Hold the pass lock (:data:`PASS_LOCK_KEY`) while the block runs; yields False when
        another session holds it. On its own connection, in autocommit (it holds no transaction
        open); a connection whose unlock failed is closed, not pooled, so the lock goes with it.
        SQLite: always True (its write lock orders the passes' transactions)."""
        if self.engine.dialect.name != "postgresql":
            yield True
            return
        conn = self.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            taken = bool(
                conn.exec_driver_sql("SELECT pg_try_advisory_lock(%s)", (PASS_LOCK_KEY,)).scalar()
            )
            yield taken
            if taken:
                conn.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (PASS_LOCK_KEY,))
        except BaseException:
            conn.invalidate()  # the session ends, and its lock with it
            raise
        finally:
            conn.close()

    def _pass(self, stop: threading.Event, progress: Progress | None) -> Tally:
        tally = Tally()
        now = self.clock()
        spans_c, runs_c, figures_c = self._cutoffs(now)
        if self.engine.dialect.name == "postgresql" and self.policy.spans_s is not None:
            self._mark_due(now, stop)  # then whole days of spans of marked jobs only can go
            tally.partitions, tally.partition_rows = _partitions.drop_before(self.engine, spans_c)
        seen: set[str] = set()
        while not stop.is_set():
            with self.engine.connect() as conn:
                jobs = self.due(conn, now, 100)
            jobs = [job for job in jobs if job[0] not in seen]  # each job once a pass
            if not jobs:
                break
            seen.update(job_id for job_id, _, _ in jobs)
            fresh = [job_id for job_id, pruned, _ in jobs if pruned == KEPT]
            marked = self._begin(fresh, stop) if fresh else set()
            for job_id, pruned, end in jobs:
                if stop.is_set():
                    break
                if pruned == KEPT:
                    if job_id not in marked:
                        continue  # a span came since: not due any more
                    pruned = SPANS_GOING
                self._job(job_id, pruned, end < runs_c, end < figures_c, tally, stop, progress)
        if not stop.is_set():
            self._alerts(now, tally, stop, progress)
        if not stop.is_set() and self.engine.dialect.name == "sqlite":
            tally.vacuumed_pages = give_back_pages(self.engine, stop, self.pause_s)
        return tally

    def _job(
        self,
        job_id: str,
        pruned: int,
        runs_due: bool,
        figures_due: bool,
        tally: Tally,
        stop: threading.Event,
        progress: Progress | None,
    ) -> None:
        """Take one job as far as it is due (stops between batches when ``stop`` is set)."""
        ph = self._ph
        if pruned < SPANS_GONE:
            if pruned == KEPT and job_id not in self._begin([job_id], stop):
                return  # a span came since: not due any more
            tally.span_jobs += 1
            if not self._drain("spans", job_id, tally, "spans", stop, progress):
                return
            self._mark(job_id, SPANS_GONE, _RECOUNT.format(ph=ph), (job_id,))
            pruned = SPANS_GONE
        elif not self._sweep(job_id, pruned, tally, stop, progress):
            return
        if pruned < RUNS_GONE and (runs_due or figures_due):
            tally.run_jobs += 1
            if not self._drain_runs(job_id, tally, stop, progress):
                return
            self._mark(job_id, RUNS_GONE, ", span_count = 0", ())
            pruned = RUNS_GONE
        if figures_due and pruned == RUNS_GONE:
            self._forget(job_id, tally)
            if progress is not None:
                progress(tally)

    def _drain_runs(
        self, job_id: str, tally: Tally, stop: threading.Event, progress: Progress | None
    ) -> bool:
        """Delete the job's folded runs and step-time series; False when stopped first."""
        if not self._drain("window_runs", job_id, tally, "runs", stop, progress):
            return False
        series = self._has_series()
        if series and not self._drain(
            "window_series", job_id, tally, "series", stop, progress, "bucket"
        ):
            return False
        with self._writes.begin() as conn:
            conn.exec_driver_sql(
                f"DELETE FROM window_compaction WHERE job_id = {self._ph}", (job_id,)
            )
            _kept_performance.forget_windows(conn, job_id)  # the series' share of them
        return True

    def _sweep(
        self,
        job_id: str,
        pruned: int,
        tally: Tally,
        stop: threading.Event,
        progress: Progress | None,
    ) -> bool:
        """A job whose raw spans are gone (``pruned`` 2 or 3) that is dirty or failed: spans
        came for it since, stored by a collector older than the refusal at ingest (which marked
        it dirty; a recompute then marked it failed, ``pruned_reason``). Deletes them as its raw
        spans were (at ``pruned`` 3 also the runs and series folded from their windows), then
        clears the dirty mark and the failure, unless a span came meanwhile (``dirty_seq``
        moved: the next pass sweeps again). Nothing when the job is neither dirty nor failed.
        False when stopped first."""
        ph = self._ph
        with self.engine.connect() as conn:
            row = conn.exec_driver_sql(
                f"SELECT dirty_seq, dirty, failure FROM jobs WHERE job_id = {ph}", (job_id,)
            ).first()
        if row is None or not (row[1] or (row[2] or "").startswith(PRUNED_FAILURE)):
            return True
        tally.span_jobs += 1
        if not self._drain("spans", job_id, tally, "spans", stop, progress):
            return False
        args: tuple[object, ...] = ()
        if pruned >= RUNS_GONE:
            if not self._drain_runs(job_id, tally, stop, progress):
                return False
            recount = ", span_count = 0"
        else:
            recount, args = _RECOUNT.format(ph=ph), (job_id,)
        with self._writes.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE jobs SET dirty = {ph}{recount}, failed_seq = CASE WHEN failure LIKE {ph}"
                f" THEN NULL ELSE failed_seq END, failure = CASE WHEN failure LIKE {ph}"
                f" THEN NULL ELSE failure END WHERE job_id = {ph} AND dirty_seq = {ph}",
                (False, *args, _FAILED_PRUNED, _FAILED_PRUNED, job_id, int(row[0])),
            )
        return True

    def _mark_due(self, now: float, stop: threading.Event) -> None:
        """Mark every job whose raw spans are due (``pruned`` 1), as :meth:`_begin` does."""
        with self.engine.connect() as conn:
            due = [job for job, pruned, _ in self.due(conn, now, 10**9) if pruned == KEPT]
        for i in range(0, len(due), MARKS_AT_ONCE):
            if stop.is_set():
                return
            self._begin(due[i : i + MARKS_AT_ONCE], stop)

    def _begin(self, job_ids: list[str], stop: threading.Event) -> set[str]:
        """Keep each job's performance figures as its raw spans give them now
        (``_kept_performance``), then mark the jobs for the deletion of those spans
        (``pruned`` 1, ``spans_pruned_at``) and store their figures in one transaction, each
        only while nothing came for it since it was found due. Returns the jobs marked (by this
        pass or another one); a job left out had a span come (it waits for a later pass).

        The figures are computed first, outside the write transaction, and the jobs marked
        together: on SQLite a writer that pauses between its transactions waits behind a busy
        ingest for each of them (a pass under steady ingest that marked each job after
        computing its figures took 84-169 s instead of 5 s)."""
        kept: dict[str, _kept_performance.KeptPerformance | None] = {}
        for job_id in job_ids:
            if stop.is_set():
                break
            with read_snapshot(self.engine) as conn:  # its rows at one instant
                kept[job_id] = _kept_performance.snapshot(conn, job_id, self.raw_window_retention_s)
        if not kept:
            return set()
        ph = self._ph
        now = self.clock()
        mark = (
            f"UPDATE jobs SET pruned = {SPANS_GOING}, spans_pruned_at = {ph}"
            f" WHERE job_id = {ph} AND pruned = {KEPT} AND dirty = {ph} AND last_seen < {ph}"
        )
        level = f"SELECT pruned FROM jobs WHERE job_id = {ph}"
        out = set()
        with self._writes.begin() as conn:
            for job_id, figures in kept.items():
                args = (now, job_id, False, now - self.policy.quiet_s)
                if conn.exec_driver_sql(mark, args).rowcount == 1:
                    if figures is not None:
                        _kept_performance.keep(conn, job_id, figures, now)
                    out.add(job_id)
                elif (conn.exec_driver_sql(level, (job_id,)).scalar() or KEPT) > KEPT:
                    out.add(job_id)  # another pass marked it
        return out

    def _mark(self, job_id: str, level: int, more: str, args: tuple[object, ...]) -> None:
        """Move the job to ``level`` (never back: another pass may be further on)."""
        ph = self._ph
        with self._writes.begin() as conn:
            conn.exec_driver_sql(
                f"UPDATE jobs SET pruned = {ph}{more} WHERE job_id = {ph} AND pruned < {ph}",
                (level, *args, job_id, level),
            )

    def _drain(
        self,
        table: str,
        job_id: str,
        tally: Tally,
        counter: str,
        stop: threading.Event,
        progress: Progress | None,
        order: str = "start",
    ) -> bool:
        """Delete the job's rows of ``table`` (``spans``, ``window_runs``, ``window_series``),
        at most about ``batch_rows`` per transaction, lowest ``order`` first; False when stopped
        first."""
        ph = self._ph
        boundary = (
            f"SELECT {order} FROM {table} WHERE job_id = {ph}"
            f" ORDER BY {order} LIMIT 1 OFFSET {self.batch_rows - 1}"
        )
        while True:
            if stop.is_set():
                return False
            with self._writes.begin() as conn:
                edge = conn.exec_driver_sql(boundary, (job_id,)).scalar()
                if edge is None:  # fewer rows than a batch left: the last batch
                    n = conn.exec_driver_sql(
                        f"DELETE FROM {table} WHERE job_id = {ph}", (job_id,)
                    ).rowcount
                else:
                    n = conn.exec_driver_sql(
                        f"DELETE FROM {table} WHERE job_id = {ph} AND {order} <= {ph}",
                        (job_id, edge),
                    ).rowcount
            setattr(tally, counter, getattr(tally, counter) + max(0, n))
            if progress is not None:
                progress(tally)
            if edge is None:
                return True
            stop.wait(self.pause_s)

    def _forget(self, job_id: str, tally: Tally) -> None:
        """Delete the job: its cells out of the fleet cells, then its segments, figures, cells
        and row, in one transaction; nothing when another pass deleted it first. Its row is
        locked first (PostgreSQL: ``FOR UPDATE``; SQLite: the transaction holds the write
        lock), so a second deletion of the job waits for the first and then finds no row,
        instead of reading the cells the first is taking out and taking them out again."""
        ph = self._ph
        lock = " FOR UPDATE" if self.engine.dialect.name == "postgresql" else ""
        with self._writes.begin() as conn:
            level = conn.exec_driver_sql(
                f"SELECT pruned FROM jobs WHERE job_id = {ph}{lock}", (job_id,)
            ).scalar()
            if level != RUNS_GONE:
                return  # gone already (another pass), or not this far
            _fleet_cells.replace_job(conn, job_id, (None, None, ""), (), {})
            n = conn.exec_driver_sql(f"DELETE FROM segments WHERE job_id = {ph}", (job_id,))
            tally.segments += max(0, n.rowcount)
            for table in ("job_performance", "job_figures", "jobs"):
                conn.exec_driver_sql(f"DELETE FROM {table} WHERE job_id = {ph}", (job_id,))
        tally.jobs += 1

    def _alerts_cutoff(self, now: float) -> float:
        return _NEVER if self.policy.alerts_s is None else now - self.policy.alerts_s

    def _alerts_sql(self, what: str) -> str:
        return RESOLVED_ALERTS.format(what=what, ph=self._ph)

    def _alerts(
        self, now: float, tally: Tally, stop: threading.Event, progress: Progress | None
    ) -> None:
        """Delete alerts resolved before the cutoff, a batch per transaction."""
        pick = self._alerts_sql("id") + f" ORDER BY id LIMIT {self.batch_rows}"
        while not stop.is_set():
            with self._writes.begin() as conn:
                n = conn.exec_driver_sql(
                    f"DELETE FROM alerts WHERE id IN ({pick})", (self._alerts_cutoff(now),)
                ).rowcount
            tally.alerts += max(0, n)
            if progress is not None:
                progress(tally)
            if n < self.batch_rows:
                return
            stop.wait(self.pause_s)
