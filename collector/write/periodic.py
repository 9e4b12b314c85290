"""The collector's background loops: one daemon thread that runs a tick every interval, sooner
when woken, only in the process that holds the leader lock, and survives a failing tick.

Used by the pipeline's recompute worker and the alert evaluator.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..storage._outage import db_reason, is_transient_db_error


class Periodic:
    """Calls ``tick`` in a thread named ``name``: ``interval_s`` after the previous tick started,
    or at once after :meth:`wake`. While ``leader()`` is False (another process runs this loop)
    the tick is skipped. An exception from ``tick`` is logged on ``log`` (an outage of the
    database once, not at every tick) and the next tick retries."""

    def __init__(
        self,
        name: str,
        tick: Callable[[], None],
        interval_s: float,
        log: logging.Logger,
        leader: Callable[[], bool] | None = None,
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self._tick = tick
        self._log = log
        self._leader = leader
        self._wake = threading.Event()
        self.stopping = threading.Event()
        """Set by :meth:`stop`: a long tick may wait on it to end early."""
        self._thread: threading.Thread | None = None
        self._outage = False
        """Whether the last tick failed for a database outage (logged once, when it began)."""

    def start(self) -> None:
        """Start the thread (idempotent)."""
        if self._thread is not None:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Run the next tick now (or as soon as the running one ends)."""
        self._wake.set()

    def stop(self, timeout: float = 30) -> None:
        """Stop the thread and wait for it (at most ``timeout`` seconds)."""
        self.stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout)
            self._thread = None

    def _run(self) -> None:
        started = -float("inf")
        while not self.stopping.is_set():
            self._wake.wait(timeout=max(0.0, self.interval_s - (time.monotonic() - started)))
            self._wake.clear()
            if self.stopping.is_set():
                break
            started = time.monotonic()
            if self._leader is not None and not self._leader():
                continue
            try:
                self._tick()
            except Exception as exc:  # keep running; the next tick retries
                self._failed(exc)
            else:
                if self._outage:
                    self._outage = False
                    self._log.warning("%s: the database answers again", self.name)

    def _failed(self, exc: Exception) -> None:
        """Log a failed tick: a bug with its traceback, each time; a database outage in one
        line when it begins (every tick of an outage fails alike, and the ingest and readiness
        answers already say it), and one when a tick passes again."""
        if not is_transient_db_error(exc):
            self._log.exception("%s failed", self.name)
            return
        if not self._outage:
            self._outage = True
            self._log.warning(
                "%s: the database is unavailable (%s); retrying every %g s",
                self.name,
                db_reason(exc),
                self.interval_s,
            )
