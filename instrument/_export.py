"""The export pipeline: a bounded queue drained by a daemon thread into an OTLP/HTTP exporter.

Why not the SDK's ``BatchSpanProcessor``: its ``force_flush`` ignores its timeout (a dead
collector would hold an exiting trainer for the exporter's whole retry budget, per batch), it
drops a batch the collector did not take (a collector restarted in 20 s loses those spans), and
it does not say how many spans it lost. :class:`ExportQueue` is the same idea with what ETT needs:

- the training thread only appends to a bounded deque (``on_end``), never waits;
- with a spool (``backlog``, ``ett._backlog``; the library's own OTLP pipeline has one unless
  ``ETT_SPOOL_DIR=off``), a batch the collector did not take goes to disk, and so does the queue
  behind it while anything waits there; the spool is sent again with its own back-off, oldest
  first, before the queue (``_drain_backlog``);
- without one, a batch the exporter could not deliver goes back to the head of the queue and is
  retried with a back-off (1 s doubling to 30 s), so spans outlive a short collector outage and
  arrive in order afterwards; a batch still failing after ``retry_budget_s`` (default 5 min: a
  poisoned batch) is dropped so it cannot block the queue for ever;
- what cannot succeed is not retried: the OTLP specification retries only HTTP 429, 502, 503
  and 504 (and no answer at all); any other refusal (401/403: the token, 404: the path) drops
  the batch at once and says why in a one-time warning naming the collector and the setting;
- when the queue is full the *newest* span is dropped (the start-up spans that TTS needs are the
  oldest), except the once-per-attempt spans (``ett.attempt``, ``ett.failure``,
  ``ett.first_batch``, ``ett.startup.*``), which may use a small reserve beyond the bound; every
  lost span is counted in :attr:`ExportQueue.dropped` (queue full, given up, spool full, or
  still queued or in flight at shutdown without a spool to take them, or ended after it);
- ``force_flush`` and ``shutdown`` honour their timeouts; :attr:`ExportQueue.unreachable`
  says whether the last attempt found no collector (the exit then waits less). A collector
  that refused connections but accepts one again when a flush begins (it was restarted while
  an export slept in the exporter's own retry back-off) is waited for, within the timeout:
  giving up then would shut the exporter down just before its retry delivers the backlog.
"""

from __future__ import annotations

import collections
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from . import semconv
from ._answers import RETRYABLE_STATUS, HttpStatus, refusal
from ._backlog import FAILED, MORE, Backlog
from ._credentials import Credentials
from ._errors import log_once

DEFAULT_MAX_QUEUE_SIZE = 2048
DEFAULT_MAX_BATCH = 512
DEFAULT_SCHEDULE_DELAY_S = 1.0
DEFAULT_RETRY_BUDGET_S = 300.0
MAX_BACKOFF_S = 30.0
PRIORITY_RESERVE = 256
"""Extra queue room for the once-per-attempt spans when the queue is full."""
DEFAULT_UNREACHABLE_WAIT_S = 0.5
"""The most a flush waits while the collector is unreachable (``ExportQueue.unreachable``)."""
REPLAY_SLICE_S = 2.0
"""The most one turn of the export thread spends sending the spool's records."""
PROBE_TIMEOUT_S = 0.2
"""How long a flush tries to connect to a collector that refused connections before."""

_PRIORITY = frozenset({semconv.SPAN_ATTEMPT, semconv.SPAN_FAILURE, semconv.SPAN_FIRST_BATCH})


def is_priority(name: str) -> bool:
    """True for the once-per-attempt spans that may use :data:`PRIORITY_RESERVE`."""
    return name in _PRIORITY or name.startswith(semconv.SPAN_STARTUP_PREFIX)


class ExportQueue(SpanProcessor):
    """A span processor with a bounded queue, a daemon export thread and a drop counter."""

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
        max_batch: int = DEFAULT_MAX_BATCH,
        schedule_delay_s: float = DEFAULT_SCHEDULE_DELAY_S,
        retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
        min_backoff_s: float = 1.0,
        status: HttpStatus | None = None,
        endpoint: str = "",
        unreachable_wait_s: float = DEFAULT_UNREACHABLE_WAIT_S,
        backlog: Backlog | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self._exporter = exporter
        self._credentials = credentials
        """Where the token came from, for the refusal's warning."""
        self._backlog = backlog
        self._try_now = False
        self._flight: Sequence[ReadableSpan] = ()
        self._status = status
        self._endpoint = endpoint or "(exporter)"
        self._unreachable = False
        self._stalled = False
        self._unreachable_spent = 0.0
        self._exports_done = 0
        self._unreachable_wait_s = unreachable_wait_s
        self._max_queue_size = max(1, max_queue_size)
        self._max_batch = max(1, max_batch)
        self._delay = schedule_delay_s
        self._queue: collections.deque[ReadableSpan] = collections.deque()
        self._wake = threading.Event()
        self._waiters: list[threading.Event] = []
        self._lock = threading.Lock()
        self._dropped = 0
        self._in_flight = 0
        self._failing_since: float | None = None
        self._delivered = True
        self._backoff = threading.Event()
        self._retry_budget_s = retry_budget_s
        self._min_backoff_s = min_backoff_s
        self._stopping = False
        self._closed = False
        self._pid = os.getpid()
        self._thread = self._start_thread()
        ref = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _disable_in_child(ref))

    @property
    def dropped(self) -> int:
        """Spans lost so far (see the module docstring for when a span is lost)."""
        spooled = 0 if self._backlog is None else self._backlog.dropped
        rejected = 0 if self._status is None else self._status.rejected
        return self._dropped + spooled + rejected

    @property
    def backlog(self) -> Backlog | None:
        """The spool link (``ett._backlog``), when spooling is on."""
        return self._backlog

    def _spooling(self) -> Backlog | None:
        backlog = self._backlog
        return backlog if backlog is not None and backlog.usable else None

    @property
    def unreachable(self) -> bool:
        """True when the last export attempt (or the latest request of the one in progress)
        failed for want of a collector (no answer, or a retryable 429/502/503/504), or the last
        flush timed out (a collector that does not answer). A flush then waits at most
        ``unreachable_wait_s``."""
        failing = self._status is not None and self._status.failing
        return self._unreachable or self._stalled or failing

    def _answers(self) -> int:
        """How many exports ended, and requests were answered (or failed), so far."""
        return self._exports_done + (0 if self._status is None else self._status.count)

    def _wait(self, done: Callable[[float], bool], timeout_s: float) -> bool:
        """Wait for ``done(slice_s)`` up to ``timeout_s``. While the collector is unreachable
        the flushes wait ``unreachable_wait_s`` in all (until an export succeeds again); when
        the flush starts an export (the thread was idle), only once that one fails too."""
        start = time.monotonic()
        spent = self._unreachable_spent
        fresh, answers = self._in_flight == 0, self._answers()
        back: bool | None = None
        while True:
            waited = time.monotonic() - start
            left = timeout_s - waited
            if self.unreachable and (not fresh or self._answers() > answers):
                if back is None:
                    back = self._collector_back()
                if not back:
                    self._unreachable_spent = spent + waited
                    left = min(left, self._unreachable_wait_s - spent - waited)
            if left <= 0:
                return False
            if done(min(left, 0.05)):
                return True

    def _collector_back(self) -> bool:
        """True when the collector, which gave no answer (connection refused, unreachable),
        accepts a TCP connection now: an export in flight may be sleeping in the exporter's own
        retry back-off and will deliver when it wakes. False after an answer (a retryable
        status: up but refusing), after a flush timed out (a collector that accepts and never
        answers), after a TLS failure (it takes connections, the handshake fails), or for an
        exporter without an HTTP endpoint."""
        status = self._status
        if self._stalled or (status is not None and (status.last is not None or status.problem)):
            return False  # an answer, or a TLS failure: it takes connections and will not do
        try:
            parts = urlsplit(self._endpoint)
            host, port = parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        if not host or parts.scheme not in ("http", "https"):
            return False
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
                return True
        except OSError:
            return False

    def _start_thread(self) -> threading.Thread:
        thread = threading.Thread(target=self._run, name="ett-export", daemon=True)
        thread.start()
        return thread

    def _count_drop(self, n: int) -> None:
        with self._lock:
            self._dropped += n

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue an ended span (runs on the thread that ended it: append only, never wait)."""
        if self._closed or self._pid != os.getpid():
            self._count_drop(1)
            return
        size = len(self._queue)
        if size >= self._max_queue_size and (
            size >= self._max_queue_size + PRIORITY_RESERVE or not is_priority(span.name)
        ):
            self._count_drop(1)
            log_once("export.queue_full", "ETT span queue full: dropping spans (counted)")
            return
        self._queue.append(span)
        if len(self._queue) >= self._max_batch:
            self._wake.set()

    def _run(self) -> None:
        backoff = 0.0
        while True:
            if backoff and self._spooling() is None:  # a flush cuts it short (and shutdown)
                self._backoff.wait(backoff)
                if not self._stopping:
                    self._backoff.clear()
            else:
                self._wake.wait(self._delay)
            self._wake.clear()
            with self._lock:
                waiters, self._waiters = self._waiters, []
            try:
                self._delivered = self._drain()
            except Exception:  # the thread must outlive any one batch: a dead export thread
                self._delivered = False  # would leave every later span queued and lost
                log_once("export.drain", "ETT span export failed (it goes on)", exc_info=True)
            for waiter in waiters:
                waiter.set()
            if self._stopping:
                return
            if self._delivered or self._spooling() is not None:  # the spool backs off itself
                backoff = 0.0
            else:
                backoff = min(max(2 * backoff, self._min_backoff_s), MAX_BACKOFF_S)

    def _drain(self) -> bool:
        """Deliver the spool's backlog first (``_drain_backlog``), then the queue."""
        backlog = self._spooling()
        if backlog is not None and backlog.active and not self._drain_backlog(backlog):
            return False
        return self._drain_queue()

    def _drain_backlog(self, backlog: Backlog) -> bool:
        """While records wait on disk, the queue goes there too, behind them (in order, and so
        that a killed rank loses at most the last ``schedule_delay_s``); they are sent when the
        back-off is over or a flush asks. True once nothing waits on disk."""
        if backlog.writer.pending:
            self._spool_queue(backlog)
        if not (self._try_now or self._stopping or backlog.due()):
            self._spool_queue(backlog)  # backing off: the collector is away, the queue on disk
            return False
        self._try_now = False
        result = backlog.deliver(REPLAY_SLICE_S)
        with self._lock:
            self._unreachable = result == FAILED
            if result != FAILED:
                self._stalled = False
                self._unreachable_spent = 0.0
        if result == MORE:
            self._wake.set()  # go on at once
        elif result == FAILED:
            self._spool_queue(backlog)
            why = self._why(None if self._status is None else self._status.last)
            log_once(
                "export.spooling" + (".tls" if why.startswith("TLS") else ""),
                "ETT collector %s is not taking spans (%s): keeping them in the spool %s and "
                "retrying with back-off",
                self._endpoint,
                why,
                backlog.writer.path,
            )
        return not backlog.active

    def _spool_queue(self, backlog: Backlog) -> bool:
        """Move the queue to the spool, batch by batch; False (the rest left queued) when the
        spool cannot be written."""
        while self._queue:
            batch: list[ReadableSpan] = []
            while self._queue and len(batch) < self._max_batch:
                batch.append(self._queue.popleft())
            if not backlog.store(batch):
                self._queue.extendleft(reversed(batch))
                return False
        return True

    def _to_spool(self, batch: list[ReadableSpan], status: int | None) -> bool:
        """A batch the collector did not take (no answer, or a retryable status) goes to the
        spool, and the queue behind it; False when there is no usable spool."""
        backlog = self._spooling()
        if backlog is None or (status is not None and status not in RETRYABLE_STATUS):
            return False
        if not backlog.store(batch):
            return False
        with self._lock:
            self._in_flight = 0
            self._unreachable = True
        self._spool_queue(backlog)
        why = self._why(status)
        log_once(
            "export.failed" + (".tls" if why.startswith("TLS") else ""),
            "ETT span export to %s failed (%s): keeping the spans in the spool %s and retrying "
            "with back-off",
            self._endpoint,
            why,
            backlog.writer.path,
        )
        return True

    def _why(self, status: int | None) -> str:
        """What an export that failed for want of a collector met, for the log."""
        if status is not None:
            return f"HTTP {status}"
        problem = "" if self._status is None else self._status.problem
        return problem or "no answer: collector unreachable?"

    def _drain_queue(self) -> bool:
        """Export the queue batch by batch; False at the first batch requeued for a retry (or
        spooled), or when a batch was refused for good (dropped)."""
        delivered = True
        while self._queue:
            batch: list[ReadableSpan] = []
            while self._queue and len(batch) < self._max_batch:
                batch.append(self._queue.popleft())
            ok, status = self._export(batch)
            if not ok and self._to_spool(batch, status):
                return False
            if not ok and status is not None and status not in RETRYABLE_STATUS:
                self._refused(batch, status)
                delivered = False
                continue
            if not self._retry_or_drop(batch, ok, status):
                return False
        return delivered

    def _export(self, batch: Sequence[ReadableSpan]) -> tuple[bool, int | None]:
        """One export: (delivered, the HTTP status of the collector's last answer or None)."""
        with self._lock:
            self._in_flight = len(batch)
            self._flight = batch
        if self._status is not None:
            self._status.last = None  # not .failing: an exit may be waiting on it
        try:
            ok = self._exporter.export(batch) == SpanExportResult.SUCCESS
            self._exports_done += 1
        except Exception:
            self._exports_done += 1
            if self._status is None or self._status.last is not None or not self._status.failing:
                # an older exporter raises on no answer: that is said below, without a traceback
                log_once("export.exception", "ETT span export raised", exc_info=True)
            ok = False
        return ok, (None if self._status is None else self._status.last)

    def _refused(self, batch: list[ReadableSpan], status: int) -> None:
        """A final refusal (not retryable): the batch is dropped and counted, and said once."""
        with self._lock:
            counted = self._in_flight == 0
            self._in_flight = 0
            self._dropped += 0 if counted else len(batch)
            self._failing_since = None
            self._unreachable = False
        origin = None if self._credentials is None else self._credentials.origin
        reason = "" if self._status is None else self._status.reason
        said = refusal(self._endpoint, status, origin=origin, reason=reason)
        log_once(f"export.refused.{status}", said)

    def _retry_or_drop(self, batch: list[ReadableSpan], ok: bool, status: int | None) -> bool:
        """After one export: True to go on draining; False when the batch went back to the head
        of the queue, to be retried after a back-off."""
        now = time.monotonic()
        with self._lock:
            counted = self._in_flight == 0  # shutdown already counted this batch as lost
            self._in_flight = 0
            self._unreachable = not ok
            if ok:
                self._failing_since = None
                self._stalled = False
                self._unreachable_spent = 0.0
                return True
            if self._failing_since is None:
                self._failing_since = now
            if self._stopping or now - self._failing_since > self._retry_budget_s:
                self._dropped += 0 if counted else len(batch)
                self._failing_since = None  # the next batch gets its own budget
                return True
            self._queue.extendleft(reversed(batch))
        why = self._why(status)
        log_once(
            "export.failed" + (".tls" if why.startswith("TLS") else ""),
            "ETT span export to %s failed (%s): retrying with back-off",
            self._endpoint,
            why,
        )
        return False

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Try to export everything queued so far, waiting at most ``timeout_millis``. True when
        it was all delivered."""
        if self._closed or not self._thread.is_alive():
            return False
        done = threading.Event()
        with self._lock:
            self._waiters.append(done)
        self._try_now = True
        self._wake.set()
        self._backoff.set()  # try now, not after the back-off
        finished = self._wait(done.wait, max(0, timeout_millis) / 1000)
        self._stalled = not finished and timeout_millis > 0
        return finished and self._delivered

    def shutdown(self, timeout_millis: int = 5000) -> None:
        """Flush for at most ``timeout_millis``, then stop the exporter (and wait up to 0.5 s
        more, 0.1 s when the collector is unreachable); spans still queued or in a stuck export
        count as dropped."""
        if self._closed:
            return
        self._stopping = True
        self._wake.set()
        self._backoff.set()

        def joined(slice_s: float) -> bool:
            self._thread.join(slice_s)
            return not self._thread.is_alive()

        try:  # a Ctrl-C in these waits still leaves what is left in the spool (below)
            self._wait(joined, max(0, timeout_millis) / 1000)
            self._closed = True
            try:
                self._exporter.shutdown()  # aborts the exporter's retry back-off, if any
            except Exception:
                log_once("export.shutdown", "ETT exporter shutdown raised", exc_info=True)
            self._thread.join(0.1 if self.unreachable else 0.5)
        finally:
            self._closed = True
            self._keep_the_rest()

    def _keep_the_rest(self) -> None:
        """At shutdown: a batch still stuck in export, and what is queued, go to the spool; what
        cannot is counted as lost."""
        backlog = self._spooling()
        if backlog is not None:  # a batch still stuck in export, and what is queued: on disk
            if self._in_flight and backlog.store(self._flight):
                self._in_flight = 0
            self._spool_queue(backlog)
            backlog.close()
        with self._lock:  # what could not be spooled is lost
            self._dropped += self._in_flight + len(self._queue)
            self._in_flight = 0
            self._queue.clear()


def _disable_in_child(ref: weakref.ref[ExportQueue]) -> None:
    """After ``fork``: the child (a dataloader worker, say) exports nothing in the parent's name."""
    queue = ref()
    if queue is not None:
        queue._closed = True
        queue._queue.clear()
        if queue._backlog is not None:
            queue._backlog.writer.forget_in_child()
