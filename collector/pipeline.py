"""Ingest and recompute: spans are stored, their jobs marked dirty, and figures re-derived.

A background worker recomputes dirty jobs promptly and live jobs periodically (their wall time
and state depend on the clock). Reads never recompute a list: they return the stored figures. A
read of one dirty job may wait, with a bound, for that job's recompute (:meth:`Pipeline.fresh`).
Recomputes are single-flight: a recompute asked for while the same job's is running joins it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from instrument import semconv

from .domain import SpanRecord, summarize
from .storage import Store

log = logging.getLogger("ett_collector")


class Pipeline:
    """Owns the store's write side: ingest, recompute, and the background worker."""

    def __init__(
        self,
        store: Store,
        window_s: float = semconv.DEFAULT_WINDOW_S,
        live_refresh_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        on_recompute: Callable[[str, float], None] | None = None,
        settle_s: float = 1.0,
        leader: Callable[[], bool] | None = None,
    ) -> None:
        self.store = store
        self.window_s = window_s
        self.live_refresh_s = live_refresh_s
        self.clock = clock
        self._on_recompute = on_recompute
        self.settle_s = settle_s
        self._leader = leader
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._flights: dict[str, Future[bool]] = {}
        self._flights_lock = threading.Lock()

    def ingest(self, records: Sequence[SpanRecord]) -> set[str]:
        """Store spans in one transaction (duplicates ignored); returns the jobs touched."""
        if not records:
            return set()
        jobs = self.store.ingest(records)
        self._wake.set()
        return jobs

    def recompute(self, job_id: str, seen_seq: int | None = None) -> bool:
        """Re-derive one job from its raw spans; False when it has none.

        Single-flight: when the job's recompute is already running (a reader's, or the
        worker's), this waits for that one and returns its answer instead of starting another.
        """
        flight, mine = self._claim(job_id)
        if not mine:
            return flight.result()
        return self._fly(job_id, seen_seq, flight)

    def fresh(self, job_id: str, wait_s: float) -> bool:
        """Wait up to ``wait_s`` seconds until the job's stored figures include every
        acknowledged span; True when they do (or the job is unknown), False when the bound
        passed or the recompute failed (the stored figures are then older).

        Joins the job's recompute in flight, or starts one in a thread of its own (so the wait
        stays bounded whatever the recompute takes): K readers of one dirty job cause one
        recompute, not K.
        """
        deadline = time.monotonic() + wait_s
        while self.store.is_dirty(job_id):
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            flight, mine = self._claim(job_id)
            if mine:
                threading.Thread(
                    target=self._fly_logged,
                    args=(job_id, flight),
                    name="ett-read-recompute",
                    daemon=True,
                ).start()
            try:
                flight.result(timeout=left)
            except FutureTimeout:
                return False
            except Exception:
                return False  # logged by the flight's thread; the stored figures stand
        return True

    def _claim(self, job_id: str) -> tuple[Future[bool], bool]:
        """The job's recompute in flight, or a new one; True when the caller must run it."""
        with self._flights_lock:
            flight = self._flights.get(job_id)
            if flight is not None:
                return flight, False
            flight = Future()
            self._flights[job_id] = flight
            return flight, True

    def _fly(self, job_id: str, seen_seq: int | None, flight: Future[bool]) -> bool:
        """Run the claimed recompute and settle ``flight`` with its answer (or its error)."""
        try:
            ok = self._recompute_now(job_id, seen_seq)
        except BaseException as exc:
            self._land(job_id)
            flight.set_exception(exc)
            raise
        self._land(job_id)
        flight.set_result(ok)
        return ok

    def _fly_logged(self, job_id: str, flight: Future[bool]) -> None:
        """A reader's flight: recompute unless a flight that just landed made the job clean."""
        try:
            dirty = self.store.is_dirty(job_id)
        except Exception as exc:
            self._land(job_id)
            flight.set_exception(exc)
            log.exception("recompute of job %r failed", job_id)
            return
        if not dirty:
            self._land(job_id)
            flight.set_result(True)
            return
        try:
            self._fly(job_id, None, flight)
        except Exception:
            log.exception("recompute of job %r failed", job_id)

    def _land(self, job_id: str) -> None:
        with self._flights_lock:
            del self._flights[job_id]

    def _recompute_now(self, job_id: str, seen_seq: int | None) -> bool:
        started = time.perf_counter()
        with self._lock:
            if seen_seq is None:
                seen_seq = self.store.dirty_seq(job_id)
            spans = self.store.load_spans(job_id)
            if not spans:
                return False
            now = self.clock()
            summary = summarize(spans, now, self.window_s)
            self.store.save_summary(summary, seen_seq, now)
        if self._on_recompute is not None:
            self._on_recompute(job_id, time.perf_counter() - started)
        return True

    def recompute_dirty(self, limit: int = 100) -> int:
        """Recompute up to ``limit`` dirty jobs; returns how many."""
        done = 0
        for job_id, seq in self.store.dirty_jobs(limit):
            if self.recompute(job_id, seq):
                done += 1
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
        """Recompute running and presumed-dead jobs (their figures move with the clock)."""
        ids = self.store.live_job_ids()
        for job_id in ids:
            self.recompute(job_id)
        return len(ids)

    def start(self) -> None:
        """Start the background worker (idempotent)."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ett-recompute", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background worker and wait for it."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        last_live = 0.0
        while not self._stop.is_set():
            self._wake.wait(timeout=self.live_refresh_s)
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._leader is not None and not self._leader():
                continue  # another worker process runs the background recompute
            try:
                # let a burst of requests land first: one recompute per job per burst, and the
                # ingest path keeps the CPU while requests are arriving
                self._stop.wait(self.settle_s)
                while self.recompute_dirty() > 0 and not self._stop.is_set():
                    pass
                if time.monotonic() - last_live >= self.live_refresh_s:
                    self.refresh_live()
                    last_live = time.monotonic()
            except Exception:  # keep serving; the next wake retries
                log.exception("recompute failed")
