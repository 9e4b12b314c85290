"""Pruning past retention while the disk is short of space (``ETT_PRUNE_ON_LOW_DISK=1``).

Off by default. When on, the readiness check's low-disk state (``api/_readiness.DiskWatch``:
fewer than ``ETT_READY_MIN_FREE_BYTES`` free, or a write the disk refused as full) wakes a
pass, and the pass also looks by itself every :data:`CHECK_EVERY_S`. It prunes what retention
would prune later, sooner, in two rounds, one job at a time, the job whose figures ended first
first, giving the freed pages back to the disk after each job (SQLite's incremental vacuum):

1. the raw spans of ended jobs (what ``ETT_RETAIN_SPANS`` takes);
2. still short: their heartbeat runs and step-time series (what ``ETT_RETAIN_RUNS`` takes).

It stops as soon as the disk is no longer short. A job is taken exactly as retention takes it
(``storage/_retention.py``): never one still running (stored state ``running``, spans awaiting
a recompute, or a span in the last 3 windows); its figures, segments and fleet cells stay as
stored, and ``ett recompute`` says it cannot. Figures and alerts are never pruned for space.
When nothing is left to prune and the disk is still short, it says so once in the log and in
``/healthz`` (``disk_prune``), and readiness stays 503 until space returns.

SQLite only: the collector does not watch a PostgreSQL server's disk. A database file made
before incremental auto-vacuum keeps the pages it frees (they take new rows, but the disk does
not gain them): the pass says so and prunes nothing (a one-time ``VACUUM`` converts it).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

from sqlalchemy import Engine

from ..storage._retention import Policy, Retention, Tally
from .periodic import Periodic

log = logging.getLogger("ett_collector")

CHECK_EVERY_S = 10.0
"""How often the pass looks at the disk without being woken by a readiness probe."""

ROUNDS = (("raw spans", Policy(0.0, None, None, None)), ("runs", Policy(0.0, 0.0, None, None)))
"""What each round takes: every ended job's raw spans (cutoff now), then its runs too."""


class Disk(Protocol):
    """What the pass needs of ``api/_readiness.DiskWatch``."""

    min_free_bytes: int
    on_short: Callable[[], None] | None

    def free_bytes(self) -> int | None: ...

    def short_of_space(self) -> bool: ...


DISK_BATCH_ROWS = 50
"""Rows deleted per transaction for space (retention's are 2,000): each writes its pages to the
write-ahead log first, which must fit in what is left of the disk."""

STEP_PAGES = 32
"""Pages given back to the disk per step (128 KiB at SQLite's 4 KiB pages), for the same reason."""


class _OldestJob(Retention):
    """Retention's pass over one job at a time, the oldest due, in small batches, the
    write-ahead log emptied and truncated after each (its bytes are the disk's again)."""

    def take_oldest(self, stop: threading.Event) -> Tally | None:
        """Take the oldest due job as far as the policy says; None when none is due."""
        now = self.clock()
        with self.engine.connect() as conn:
            due = self.due(conn, now, 1)
        if not due:
            return None
        job_id, pruned, end = due[0]
        _, runs_c, _ = self._cutoffs(now)
        tally = Tally()
        self._job(job_id, pruned, end < runs_c, False, tally, stop, lambda _t: self.truncate())
        tally.vacuumed_pages = self.give_back(stop)
        return tally

    def truncate(self) -> None:
        """Checkpoint the write-ahead log and cut it to nothing."""
        raw = self.engine.raw_connection()
        try:
            raw.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[union-attr]
        finally:
            raw.close()

    def give_back(self, stop: threading.Event) -> int:
        """The file's free pages back to the disk, :data:`STEP_PAGES` at a time (the log
        truncated after each step); how many."""
        given = 0
        while not stop.is_set():
            raw = self.engine.raw_connection()
            try:
                driver: Any = raw.driver_connection  # sqlite3, in autocommit
                free = int(driver.execute("PRAGMA freelist_count").fetchone()[0])
                if free == 0:
                    return given
                # each step of the pragma frees one page: executescript steps it to the end
                driver.executescript(f"PRAGMA incremental_vacuum({STEP_PAGES})")
            finally:
                raw.close()
            given += min(free, STEP_PAGES)
            self.truncate()
        return given


class DiskPrune:
    """The low-disk prune of one SQLite database: :meth:`tick` prunes while ``disk`` is short;
    :meth:`state` is its ``/healthz`` entry."""

    def __init__(self, engine: Engine, disk: Disk, quiet_s: float, pause_s: float = 0.005):
        self.engine, self.disk = engine, disk
        self._passes = [
            (
                what,
                _OldestJob(
                    engine,
                    Policy(p.spans_s, p.runs_s, None, None, quiet_s),
                    batch_rows=DISK_BATCH_ROWS,
                    pause_s=pause_s,
                ),
            )
            for what, p in ROUNDS
        ]
        self.prunes = 0
        """Jobs pruned for space since the service started (of spans, then of runs: twice)."""
        self.status = "idle"
        """``idle``, ``pruning``, ``freed``, ``nothing left to prune``, ``cannot give space
        back``."""
        self.message = ""
        """The last thing the pass said (also logged)."""

    def state(self) -> dict[str, object]:
        """``/healthz``'s ``disk_prune``: the status, prunes for space, the last message."""
        return {"status": self.status, "prunes": self.prunes, "message": self.message}

    def _say(self, status: str, message: str, level: int = logging.WARNING) -> None:
        """Set the status; logged once per change of status."""
        if status != self.status:
            log.log(level, "low disk (ETT_PRUNE_ON_LOW_DISK): %s", message)
        self.status, self.message = status, message

    def tick(self, stop: threading.Event) -> None:
        """Prune, a job at a time, while the disk is short of space (see the module)."""
        if not self.disk.short_of_space():
            if self.status in ("pruning", "nothing left to prune"):
                self._say(
                    "idle", f"space is back: {self.disk.free_bytes()} bytes free", logging.INFO
                )
            return
        if not self._incremental():
            self._say(
                "cannot give space back",
                "the database file keeps the pages it frees "
                "(made before incremental auto-vacuum): run VACUUM once; nothing pruned",
            )
            return
        jobs = 0
        self._passes[0][1].truncate()  # the log's bytes first: they may be enough
        for what, retention in self._passes:
            while self.disk.short_of_space() and not stop.is_set():
                self.status = "pruning"
                done = retention.take_oldest(stop)
                if done is None:
                    break  # nothing of this round left
                jobs += 1
                self.prunes += 1
                log.info(
                    "low disk: pruned %s; %s bytes free", done.describe(), self.disk.free_bytes()
                )
            if not self.disk.short_of_space() or stop.is_set():
                break
            log.info("low disk: no ended job's %s left to prune", what)
        free, floor = self.disk.free_bytes(), self.disk.min_free_bytes
        if self.disk.short_of_space():
            self._say(
                "nothing left to prune",
                f"pruned {jobs} job(s); nothing left to prune "
                f"(figures are kept), {free} bytes free, ETT_READY_MIN_FREE_BYTES={floor}",
            )
        elif jobs:
            self._say("freed", f"pruned {jobs} job(s) past retention; {free} bytes free now")

    def _incremental(self) -> bool:
        with self.engine.connect() as conn:
            return conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2


class DiskPruneLoop:
    """:class:`DiskPrune` in a thread of its own, woken by the readiness probe
    (``disk.on_short``) and every :data:`CHECK_EVERY_S`, in the leader process only."""

    def __init__(
        self,
        engine: Engine,
        disk: Disk,
        quiet_s: float,
        leader: Callable[[], bool] | None = None,
        every_s: float = CHECK_EVERY_S,
    ) -> None:
        self.prune = DiskPrune(engine, disk, quiet_s)
        self._loop = Periodic("ett-disk-prune", self._tick, every_s, log, leader)
        disk.on_short = self._loop.wake

    def _tick(self) -> None:
        self.prune.tick(self._loop.stopping)

    def start(self) -> None:
        self._loop.start()

    def stop(self) -> None:
        self._loop.stop()
