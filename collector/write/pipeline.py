"""Ingest and recompute: spans are stored, their jobs marked dirty, and figures re-derived.

A background worker recomputes dirty jobs promptly and running jobs periodically (their wall
time and state depend on the clock; a presumed-dead job's figures do not, so it is recomputed
once when it is found dead and then only when a span for it arrives). Reads never wait on a
recompute: they return the stored figures, and a read of one dirty job makes sure its recompute
is under way (:meth:`Pipeline.schedule`). Only a job with spans but no figures yet is worth
waiting for, with a bound (:meth:`Pipeline.fresh`).

Concurrency: recomputes of different jobs never wait for each other. One job's recompute is
single-flight: in a process, a recompute asked for while the same job's is running joins it;
across processes (``--workers``, or several collectors on one PostgreSQL) the job's advisory
lock lets one run and the others skip it (``Store.locks``). Whatever the interleaving, a summary
is saved only over figures of an older ingest sequence, and clears ``dirty`` only when no span
came after the ones it read (``Store.save_summary``). A recompute that raises (not a database
outage) marks the job failed with the reason; a new span for the job retries it.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from math import inf

from ett import semconv

from ..domain import SpanRecord, summarize
from ..storage import Store, is_transient_db_error
from ..storage._pruned_ingest import PRUNED_FAILURE, Ingested, Refusal
from ._job_loop import job_loop_facts
from .periodic import Periodic

log = logging.getLogger("ett_collector")

BUSY_POLL_S = 0.05
"""How often a read polls a job that another process is recomputing."""

SAVES_REMEMBERED_MIN = 1024
"""Jobs whose last save a pipeline remembers before it forgets those too old to matter (see
``Pipeline._saved``): memory in proportion to the jobs saved within half a live refresh, not to
every job ever saved."""

READ_FLIGHTS = 2
"""Recomputes that reads may start at once, per process. Past it a read of a dirty job leaves it
to the background worker's dirty loop (woken), so however many readers come, they add at most
this many recomputes to the CPU, GIL time and pooled database connections that ingest shares."""


class Outcome(enum.Enum):
    """How one recompute ended."""

    SAVED = "saved"
    """Figures computed and stored (or figures of a newer sequence were there already)."""
    CLEAN = "clean"
    """Nothing to do: only dirty jobs were asked for, and this one was clean by then."""
    EMPTY = "empty"
    """The job has no spans."""
    BUSY = "busy"
    """Another process holds the job's recompute lock."""
    FAILED = "failed"
    """The recompute raised; the job is marked failed with the reason."""
    PRUNED = "pruned"
    """The job's raw spans were pruned (retention): its stored figures stay as they are. Spans
    for it are refused at ingest (``Store.accept``); those an older collector stored since make
    it failed with the reason (:func:`pruned_reason`) until the next retention pass deletes
    them."""


def _pruned_at(pruned_at: float) -> str:
    """``its raw spans were pruned at <when> (retention, ETT_RETAIN_SPANS)``."""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(pruned_at))
    return f"{PRUNED_FAILURE} at {when} (retention, ETT_RETAIN_SPANS)"


def pruned_reason(pruned_at: float) -> str:
    """Why a job whose raw spans were pruned at ``pruned_at`` is not recomputed."""
    return f"{_pruned_at(pruned_at)}; its stored figures are kept as they are"


PRUNED_JOBS_NAMED = 3
"""Jobs a refusal of spans of pruned jobs names (:func:`pruned_refusal`); the rest are counted."""


def pruned_refusal(refused: dict[str, Refusal]) -> str:
    """The OTLP partial-success message for spans refused because their job's raw spans were
    pruned (``Store.accept``): which job, when, and what to do."""
    parts = []
    for job_id, (pruned_at, n) in sorted(refused.items())[:PRUNED_JOBS_NAMED]:
        parts.append(
            f"{n} span(s) of job {job_id!r} refused: {_pruned_at(pruned_at)} and its kept "
            "figures cannot take new spans; send them under a new job id (ETT_JOB_ID)"
        )
    more = len(refused) - PRUNED_JOBS_NAMED
    if more > 0:
        parts.append(f"and the spans of {more} more pruned job(s)")
    return "; ".join(parts)


class Pipeline:
    """Owns the store's write side: ingest, recompute, and the background worker."""

    def __init__(
        self,
        store: Store,
        window_s: float = semconv.DEFAULT_WINDOW_S,
        live_refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        on_recompute: Callable[[str, float], None] | None = None,
        settle_s: float = 0.25,
        leader: Callable[[], bool] | None = None,
        on_failure: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.window_s = window_s
        self.live_refresh_s = live_refresh_s
        self.clock = clock
        self._on_recompute = on_recompute
        self._on_failure = on_failure
        self.settle_s = settle_s
        self._worker = Periodic("ett-recompute", self._tick, live_refresh_s, log, leader)
        self.leader = leader
        """Whether this process runs the background loops (None: always)."""
        self.read_only = False
        """Set on a read-only collector (a hot standby): reads never start a recompute."""
        self._last_live = -float("inf")
        self._saved_at: dict[str, float] = {}
        """When (monotonic) this process last saved each job's figures: the live refresh skips
        a job saved less than half a ``live_refresh_s`` ago (the dirty loop just did it). Past
        twice the jobs it held after its last pruning (:data:`SAVES_REMEMBERED_MIN` at least),
        the saves too old to skip anything are forgotten (:meth:`_saved`)."""
        self._saved_lock = threading.Lock()
        self._prune_past = SAVES_REMEMBERED_MIN
        self._flights: dict[str, Future[Outcome]] = {}
        self._flights_lock = threading.Lock()
        self._read_slots = threading.BoundedSemaphore(READ_FLIGHTS)
        self._watchers: list[Callable[[Collection[str]], None]] = []

    def watch(self, changed: Callable[[Collection[str]], None]) -> None:
        """Call ``changed(job_ids)`` after this pipeline commits a change to those jobs' read
        answers (spans ingested, figures saved, a recompute marked failed): the kept read
        answers' hook (``JobAnswers.mark_unchecked``)."""
        self._watchers.append(changed)

    def _changed(self, job_ids: Collection[str]) -> None:
        for changed in self._watchers:
            changed(job_ids)

    def ingest(self, records: Sequence[SpanRecord]) -> set[str]:
        """Store spans in one transaction (duplicates ignored); returns the jobs touched."""
        return self.accept(records).touched

    def accept(self, records: Sequence[SpanRecord]) -> Ingested:
        """:meth:`ingest`, saying also which spans were refused: those of jobs whose raw spans
        were pruned (``Store.accept``; :func:`pruned_refusal` says why)."""
        if not records:
            return Ingested(set(), {})
        done = self.store.accept(records)
        if done.touched:
            self._changed(done.touched)
            self._worker.wake()
        return done

    def recompute(self, job_id: str) -> bool:
        """Re-derive one job from its raw spans; False when it has none, when another process
        is recomputing it, or when the recompute failed (the job is then marked failed).

        Single-flight: when the job's recompute is already running in this process (a
        reader's, or the worker's), this waits for that one and returns its answer.
        """
        return self.recompute_job(job_id) is Outcome.SAVED

    def recompute_job(self, job_id: str) -> Outcome:
        """:meth:`recompute`, saying how it ended."""
        return self._recompute(job_id, only_dirty=False)

    def _recompute(self, job_id: str, only_dirty: bool) -> Outcome:
        flight, mine = self._claim(job_id)
        if not mine:
            return flight.result()
        return self._run_claimed_recompute(job_id, only_dirty, flight)

    def schedule(self, job_id: str, dirty: bool | None = None) -> bool:
        """Without waiting: True when the job's stored figures include every acknowledged span
        (or the job is unknown); otherwise make sure its recompute is under way and return
        False: the one in flight in this process, or a new one in a thread of its own while
        fewer than :data:`READ_FLIGHTS` reads' recomputes run, else the background worker's
        (woken; it recomputes every dirty job). Across processes, the job's advisory lock lets
        one of them run it (the others' flights end at once as BUSY). ``dirty``: the caller's
        fresh reading of ``Store.is_dirty``."""
        if not (self.store.is_dirty(job_id) if dirty is None else dirty):
            return True
        if self.read_only:  # the primary's collector recomputes it; its figures replicate
            return False
        if not self._read_slots.acquire(blocking=False):
            self._worker.wake()
            return False
        flight, mine = self._claim(job_id)
        if not mine:
            self._read_slots.release()
            return False
        threading.Thread(
            target=self._recompute_for_reader_in_slot,
            args=(job_id, flight),
            name="ett-read-recompute",
            daemon=True,
        ).start()
        return False

    def fresh(self, job_id: str, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds until the job's stored figures include every
        acknowledged span; True when they do (or the job is unknown), False when the bound
        passed or its recompute failed (see ``Store.recompute_failure``).

        Joins the job's recompute in flight, or starts one in a thread of its own (so the wait
        stays bounded whatever the recompute takes): K readers of one dirty job cause one
        recompute, not K. While another process recomputes the job, this polls for its result.
        """
        deadline = time.monotonic() + wait_s
        while self.store.is_dirty(job_id):
            if self.read_only:
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            flight = self._launch(job_id)
            try:
                outcome = flight.result(timeout=left)
            except FutureTimeout:
                return False
            except Exception:
                return False  # logged by the flight's thread; the stored figures stand
            if outcome is Outcome.FAILED:
                return False  # marked failed with the reason; no retry before a new span
            if outcome is Outcome.BUSY or outcome is Outcome.EMPTY:
                time.sleep(min(BUSY_POLL_S, max(0.0, deadline - time.monotonic())))
        return True

    def _launch(self, job_id: str) -> Future[Outcome]:
        """The job's recompute in flight; started in a thread of its own when there is none."""
        flight, mine = self._claim(job_id)
        if mine:
            threading.Thread(
                target=self._recompute_for_reader,
                args=(job_id, flight),
                name="ett-read-recompute",
                daemon=True,
            ).start()
        return flight

    def _claim(self, job_id: str) -> tuple[Future[Outcome], bool]:
        """The job's recompute in flight, or a new one; True when the caller must run it."""
        with self._flights_lock:
            flight = self._flights.get(job_id)
            if flight is not None:
                return flight, False
            flight = Future()
            self._flights[job_id] = flight
            return flight, True

    def _run_claimed_recompute(
        self, job_id: str, only_dirty: bool, flight: Future[Outcome]
    ) -> Outcome:
        """Run the claimed recompute and settle ``flight`` with its answer (or its error)."""
        try:
            outcome = self._locked_recompute(job_id, only_dirty)
        except BaseException as exc:
            self._forget_flight(job_id)
            flight.set_exception(exc)
            raise
        self._forget_flight(job_id)
        flight.set_result(outcome)
        return outcome

    def _recompute_for_reader(self, job_id: str, flight: Future[Outcome]) -> None:
        """A reader's flight, in a thread of its own: recompute the job if it is still dirty
        (an error is logged, and raised to the flight's waiters)."""
        try:
            self._run_claimed_recompute(job_id, True, flight)
        except Exception:
            log.exception("recompute of job %r failed", job_id)

    def _recompute_for_reader_in_slot(self, job_id: str, flight: Future[Outcome]) -> None:
        """:meth:`_recompute_for_reader` in one of the reads' :data:`READ_FLIGHTS` slots."""
        try:
            self._recompute_for_reader(job_id, flight)
        finally:
            self._read_slots.release()

    def _forget_flight(self, job_id: str) -> None:
        """Drop the job's settled flight: the next recompute of it starts a new one."""
        with self._flights_lock:
            del self._flights[job_id]

    def _locked_recompute(self, job_id: str, only_dirty: bool) -> Outcome:
        """The recompute under the job's cross-process lock (BUSY when another holds it)."""
        if not self.store.locks.try_lock(job_id):
            return Outcome.BUSY
        try:
            return self._recompute_now(job_id, only_dirty)
        finally:
            self.store.locks.unlock(job_id)

    def _recompute_now(self, job_id: str, only_dirty: bool) -> Outcome:
        started = time.perf_counter()
        if only_dirty and not self.store.is_dirty(job_id):
            return Outcome.CLEAN  # another recompute got there first
        seen_seq = self.store.dirty_seq(job_id)  # read before the spans: see save_summary
        pruned_at = self.store.spans_pruned_at(job_id)
        if pruned_at is not None:  # never figures from part of a job's spans
            if self.store.is_dirty(job_id):
                self.store.mark_failed(job_id, seen_seq, pruned_reason(pruned_at))
                self._changed((job_id,))
            return Outcome.PRUNED
        try:
            spans = self.store.load_spans(job_id)
            if not spans:
                return Outcome.EMPTY
            now = self.clock()
            summary = summarize(spans, now, self.window_s)
            loop = job_loop_facts(self.store, summary)  # issue 26: the alerts' loop facts
            self.store.save_summary(summary, seen_seq, now, loop)
            self._changed((job_id,))
        except Exception as exc:
            if is_transient_db_error(exc):
                raise  # an outage: the job stays dirty and is retried, nothing is wrong with it
            self._failed(job_id, seen_seq, exc)
            return Outcome.FAILED
        self._saved(job_id)
        if self._on_recompute is not None:
            self._on_recompute(job_id, time.perf_counter() - started)
        return Outcome.SAVED

    def _saved(self, job_id: str) -> None:
        """Remember that the job's figures were saved now; forget, once the saves remembered
        pass their bound, those no live refresh skips any more: saved half a ``live_refresh_s``
        or more before the start of the refresh under way (or before now, when none ran
        here), since a refresh skips only a job saved less than that before its start, and
        each refresh starts later than the one before."""
        now = time.monotonic()
        with self._saved_lock:
            self._saved_at[job_id] = now
            if len(self._saved_at) <= self._prune_past:
                return
            start = self._last_live if self._last_live > -inf else now
            horizon = start - self.live_refresh_s / 2
            self._saved_at = {j: t for j, t in self._saved_at.items() if t > horizon}
            self._prune_past = max(SAVES_REMEMBERED_MIN, 2 * len(self._saved_at))

    def _failed(self, job_id: str, seen_seq: int, exc: Exception) -> None:
        lines = str(exc).strip().splitlines()
        reason = type(exc).__name__ + (f": {lines[0]}" if lines else "")
        reason = reason[:500]
        log.error("recompute of job %r failed: %s", job_id, reason, exc_info=exc)
        try:
            self.store.mark_failed(job_id, seen_seq, reason)
        except Exception:
            log.exception("could not mark job %r failed", job_id)
        self._changed((job_id,))
        if self._on_failure is not None:
            self._on_failure(job_id, reason)

    def recompute_dirty(self, limit: int = 100) -> int:
        """Recompute up to ``limit`` dirty jobs; returns how many are settled (computed, or
        found clean). A job another process is recomputing is left for it, and the worker looks
        again after ``settle_s``; a failed one is marked failed and not counted."""
        done = 0
        busy = False
        for job_id, _seq in self.store.dirty_jobs(limit):
            outcome = self._recompute(job_id, only_dirty=True)
            if outcome in (Outcome.SAVED, Outcome.CLEAN, Outcome.PRUNED):
                done += 1
            busy = busy or outcome is Outcome.BUSY
        if busy:
            self._worker.wake()
        return done

    def recompute_all(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Recompute every job (``ett recompute``); ``progress(done, total)`` after each."""
        ids = self.store.job_ids()
        for i, job_id in enumerate(ids, 1):
            self.recompute(job_id)
            if progress is not None:
                progress(i, len(ids))
        return len(ids)

    def refresh_live(self) -> int:
        """Recompute running jobs (their figures move with the clock); returns how many. A
        job found presumed dead here drops out of the next refresh."""
        ids = self.store.live_job_ids()
        for job_id in ids:
            self._recompute(job_id, only_dirty=False)
        return len(ids)

    def start(self) -> None:
        """Start the background worker (idempotent): it runs at once, then after each ingest
        (``settle_s`` later) and every ``live_refresh_s``."""
        self._worker.start()

    def stop(self) -> None:
        """Stop the background worker and wait for it."""
        self._worker.stop()

    def _tick(self) -> None:
        # let a burst of requests land first (one recompute per job per burst), but briefly:
        # the figures' freshness is this wait plus the queue of dirty jobs ahead
        stopping = self._worker.stopping
        if stopping.wait(self.settle_s):
            return
        self._drain()
        if time.monotonic() - self._last_live < self.live_refresh_s:
            return
        self._last_live = time.monotonic()
        for job_id in self.store.live_job_ids():
            if stopping.is_set():
                return
            if self._last_live - self._saved_at.get(job_id, -inf) < self.live_refresh_s / 2:
                continue  # just saved (the dirty loop): no older than 1.5 refreshes next time
            self._recompute(job_id, only_dirty=False)
            self._drain()  # a job with new spans goes before the next clock-only refresh

    def _drain(self) -> None:
        """Recompute dirty jobs, oldest dirty mark first, until none is left."""
        while self.recompute_dirty() > 0 and not self._worker.stopping.is_set():
            pass
