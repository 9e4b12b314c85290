"""The session core: the attempt span, the step counters and windows, span plumbing, the end."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._config import Identity
from ._errors import log_once, never_raises
from ._failure import error_type as _error_type
from ._spans import attempt_parent
from ._watchdog import ERROR_TYPE as _EXIT_TIMEOUT
from ._watchdog import ExitWatchdog
from ._windows import STARTUP_POLL_S, PollThread, WindowClock, poll_interval

Flusher = Callable[[float], None]
"""Flushes (and, when the library owns it, shuts down) the span pipeline within a timeout."""

_PREEMPTED = semconv.EndReasonValues.PREEMPTED.value
_COMPLETED = semconv.EndReasonValues.COMPLETED.value


class SessionCore:
    """The part of :class:`instrument.Session` that owns the attempt: its span, the hot-loop
    counters and their windows, span plumbing, and the end. No method raises."""

    def __init__(
        self,
        identity: Identity,
        tracer: trace.Tracer,
        *,
        flusher: Flusher | None = None,
        dropped: Callable[[], int] | None = None,
        span_identity: bool = False,
        window_s: float = 10.0,
        flush_timeout_s: float = 5.0,
        enabled: bool = True,
        exit_timeout_s: float = 0.0,
    ) -> None:
        self.identity = identity
        """Who this session speaks for."""
        self.enabled = enabled
        """False when the session records nothing (``ETT_DISABLED``, ``init(enabled=False)``)."""
        self._steps = 0
        self._samples = 0
        self._tracer = tracer
        self._flusher = flusher
        self._dropped = dropped
        self._extra: dict[str, AttributeValue] = (
            dict(identity.attributes()) if span_identity else {}
        )
        self._flush_timeout_s = flush_timeout_s
        self._alloc_ns = int(identity.allocated_at * 1e9)
        self._pid = os.getpid()
        self._ended = False
        self._ending = False
        self._end_lock = threading.RLock()  # re-entrant: SIGTERM may arrive inside end()
        self._end_callbacks: list[Callable[[], None]] = []
        self._save_starts: dict[int, int] = {}
        self._first_batch_seen = False
        self._first_batch_lock = threading.Lock()
        self._poll_s = poll_interval(window_s)
        self._clock = WindowClock(self._counters, self._emit_window, window_s)
        self._window_thread: PollThread | None = None
        self._attempt_span: Span = INVALID_SPAN
        self._context: Context | None = None
        self.exit_watchdog = ExitWatchdog(
            exit_timeout_s if enabled else 0.0, self._record_hang, self.flush
        )
        """Ends the process when it does not exit after a failed :meth:`end` (``_watchdog``)."""
        if enabled:
            self._context = attempt_parent(identity)
            self._attempt_span = self._start_span(semconv.SPAN_ATTEMPT, {}, self._alloc_ns)
            self._context = trace.set_span_in_context(self._attempt_span, self._context)
            self._window_thread = PollThread(self._poll, self._poll_interval)
            self._window_thread.start()

    # --- the hot loop ----------------------------------------------------------------------------

    def step(self, samples: int = 1) -> None:
        """Count one completed training step of ``samples`` samples. Call it once per step from
        the training thread. Costs two integer additions: no span, no lock, no clock read.
        Without a :meth:`first_batch` call, the window thread marks the first batch (step 0)
        within 20 ms of the first ``step()``."""
        try:
            self._steps += 1
            self._samples += samples
        except Exception:
            log_once("Session.step", "step(samples=%r): samples must be an int", samples)

    def _poll(self) -> None:
        """The window thread's poll: mark a first batch nobody marked, then tick the windows."""
        if not self._first_batch_seen and self._steps:
            self._mark_first_batch(0, time.time_ns(), count_from_zero=True)
        self._clock.tick()

    def _poll_interval(self) -> float:
        return self._poll_s if self._first_batch_seen else STARTUP_POLL_S

    def _counters(self) -> tuple[int, int]:
        samples = self._samples
        return self._steps, samples if isinstance(samples, int) else int(samples)

    @property
    def steps(self) -> int:
        """Steps counted by :meth:`step` in this attempt."""
        return self._steps

    @property
    def current_step(self) -> int | None:
        """The global step in progress (resume step + steps done); None before the first batch."""
        started = self._first_batch_seen or self._steps
        return self._clock.resume_step + self._steps if started else None

    @property
    def dropped_spans(self) -> int:
        """Spans the export queue lost so far (0 when the library does not own the pipeline)."""
        try:
            return self._dropped() if self._dropped is not None else 0
        except Exception:
            return 0

    # --- spans -----------------------------------------------------------------------------------

    def _start_span(
        self, name: str, attributes: dict[str, AttributeValue], start_ns: int | None = None
    ) -> Span:
        if self._ended or self._context is None:
            return INVALID_SPAN
        try:
            attrs = {**self._extra, **attributes} if self._extra else attributes
            return self._tracer.start_span(
                name, context=self._context, attributes=attrs, start_time=start_ns
            )
        except Exception:
            log_once("Session.start_span", "could not start span %s", name, exc_info=True)
            return INVALID_SPAN

    @never_raises("Session.end_span", None)
    def _end_span(
        self, span: Span | None, exc: BaseException | None = None, end_ns: int | None = None
    ) -> None:
        if span is None:
            return
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, _error_type(exc)))
        span.end(end_time=end_ns)

    def _instant(
        self,
        name: str,
        attributes: dict[str, AttributeValue],
        start_ns: int | None = None,
        end_ns: int | None = None,
    ) -> None:
        end_ns = end_ns or time.time_ns()
        self._end_span(self._start_span(name, attributes, start_ns or end_ns), end_ns=end_ns)

    def _emit_window(self, start_ns: int, end_ns: int, first: int, last: int, n: int) -> None:
        attrs: dict[str, AttributeValue] = {
            semconv.STEP_FIRST: first,
            semconv.STEP_LAST: last,
            semconv.SAMPLES: n,
        }
        if self._dropped is not None:
            attrs[semconv.TELEMETRY_DROPPED_SPANS] = self.dropped_spans
        self._end_span(self._start_span(semconv.SPAN_TRAIN_WINDOW, attrs, start_ns), end_ns=end_ns)

    @never_raises("Session.first_batch", None)
    def first_batch(self, step: int = 0) -> None:
        """``ett.first_batch``: the rank consumed its first batch now, resuming at global ``step``.
        The span starts at allocation and ends now. Later calls are ignored."""
        self._mark_first_batch(int(step), time.time_ns())

    def _mark_first_batch(self, step: int, now: int, count_from_zero: bool = False) -> None:
        with self._first_batch_lock:
            if self._first_batch_seen:
                return
            self._first_batch_seen = True
        start = min(self._alloc_ns, now)
        self._instant(semconv.SPAN_FIRST_BATCH, {semconv.STEP: step}, start, now)
        self._clock.start(now, step, count_from_zero)

    # --- the end of the attempt ------------------------------------------------------------------

    def add_end_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, just before the attempt span ends (used by the torch hooks)."""
        self._end_callbacks.append(callback)

    @never_raises("Session.end", None)
    def end(self, reason: str = _COMPLETED, cause: str | None = None) -> None:
        """End the attempt: the last ``ett.train.window``, the ``ett.attempt`` span with its end
        reason (and cause when not completed: default ``preemption`` for ``preempted``, else
        ``unknown``), then flush within ``flush_timeout_s``. Only the first call counts."""
        with self._end_lock:
            if self._ending:
                return
            self._ending = True
        for callback in self._end_callbacks:
            try:
                callback()
            except Exception:
                log_once("Session.end_callback", "end callback failed", exc_info=True)
        if self._window_thread is not None:
            self._window_thread.stop()
        if not self._first_batch_seen and self._steps:
            self._mark_first_batch(0, time.time_ns(), count_from_zero=True)
        self._clock.flush()
        attrs: dict[str, AttributeValue] = {semconv.ATTEMPT_END_REASON: str(reason)}
        if reason != _COMPLETED:
            default = semconv.FailureCauseValues.PREEMPTION if reason == _PREEMPTED else None
            attrs[semconv.FAILURE_CAUSE] = str(
                cause or default or semconv.FailureCauseValues.UNKNOWN
            )
        if self._dropped is not None:
            attrs[semconv.TELEMETRY_DROPPED_SPANS] = self.dropped_spans
        self._attempt_span.set_attributes(attrs)
        self._attempt_span.end()
        self._ended = True
        if reason != _COMPLETED:  # the process should now exit: the watchdog sees that it does
            self.exit_watchdog.expect()
            self.flush()
            self.exit_watchdog.arm(str(attrs[semconv.FAILURE_CAUSE]))
        else:
            self.flush()

    def _record_hang(self, cause: str, phase: str, stack: str, waited_s: float) -> None:
        """The exit watchdog's ``ett.failure``: still alive ``waited_s`` after the failed end, in
        ``phase`` (emitted although the attempt has ended: the hang is part of it)."""
        if self._context is None:
            return
        attrs: dict[str, AttributeValue] = {
            **self._extra,
            semconv.FAILURE_CAUSE: cause,
            semconv.ERROR_TYPE: _EXIT_TIMEOUT,
            semconv.FAILURE_PHASE: phase,
            semconv.CODE_STACKTRACE: stack,
        }
        if self.current_step is not None:
            attrs[semconv.STEP] = self.current_step
        now = time.time_ns()
        span = self._tracer.start_span(
            semconv.SPAN_FAILURE, context=self._context, attributes=attrs, start_time=now
        )
        span.end(end_time=now)

    @property
    def ended(self) -> bool:
        """True once :meth:`end` ran."""
        return self._ended

    @never_raises("Session.flush", None)
    def flush(self, timeout_s: float | None = None) -> None:
        """Export what is queued, waiting at most ``timeout_s`` (default ``flush_timeout_s``).
        After :meth:`end` this also shuts down a pipeline the library created."""
        if self._flusher is not None:
            self._flusher(self._flush_timeout_s if timeout_s is None else timeout_s)
