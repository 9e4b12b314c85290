"""Ingest and recompute: spans are stored, their jobs marked dirty, and figures re-derived.

A background worker recomputes dirty jobs promptly and live jobs periodically (their wall time
and state depend on the clock). Reads of a dirty job recompute it first, so an answer never lags
what has been acknowledged.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence

from .domain import SpanRecord, summarize
from .storage import Store

log = logging.getLogger("ett_collector")


class Pipeline:
    """Owns the store's write side: ingest, recompute, and the background worker."""

    def __init__(
        self,
        store: Store,
        window_s: float = 10.0,
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

    def ingest(self, records: Sequence[SpanRecord]) -> set[str]:
        """Store spans in one transaction (duplicates ignored); returns the jobs touched."""
        if not records:
            return set()
        jobs = self.store.ingest(records)
        self._wake.set()
        return jobs

    def recompute(self, job_id: str, seen_seq: int | None = None) -> bool:
        """Re-derive one job from its raw spans; False when it has none."""
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

    def fresh(self, job_id: str) -> None:
        """Make sure a job's stored figures include every acknowledged span."""
        if self.store.is_dirty(job_id):
            self.recompute(job_id)

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
