"""The session: one attempt of one rank, and one method per span of docs/metrics.md.

It owns the attempt span, the hot-loop counters and their windows, the end, and the exit
watchdog; spans go out through its :class:`~ett._emitter.SpanEmitter`, persist spans
through its :class:`~ett._persist.PersistTracker`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from opentelemetry import trace
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._config import Identity
from ._emitter import SpanEmitter
from ._errors import log_once, never_raises
from ._failure import Guard, classify
from ._failure import error_type as _error_type
from ._persist import PersistTracker, resolve_persist_wait
from ._spans import (
    NO_SAVES,
    NO_SINK,
    CheckpointSave,
    SpanBlock,
    SpanSink,
    checked_step,
    guarded_block,
)
from ._stalls import DATA_WAIT_MIN_S, DataWait, blocking_block, timed_batches
from ._startup import observed_startup
from ._torchrun import warn_restart_store
from ._watchdog import ERROR_TYPE as _EXIT_TIMEOUT
from ._watchdog import ExitWatchdog
from ._windows import STARTUP_POLL_S, PollThread, WindowClock, poll_interval

Flusher = Callable[[float], None]
"""Flushes (and, when the library owns it, shuts down) the span pipeline within a timeout."""

_PREEMPTED = semconv.EndReasonValues.PREEMPTED.value
_COMPLETED = semconv.EndReasonValues.COMPLETED.value
_FAILED = semconv.EndReasonValues.FAILED.value
_Item = TypeVar("_Item")


def _no_block() -> SpanBlock:
    """A span block that records nothing (a span method's arguments were bad)."""
    return SpanBlock(NO_SINK, "", {})


def _no_save() -> CheckpointSave:
    """A checkpoint save that records nothing (``checkpoint_save``'s arguments were bad)."""
    return CheckpointSave(NO_SINK, NO_SAVES, 0, "sync", None)


def _no_wait() -> DataWait:
    """A data wait that records nothing (``data_wait``'s arguments were bad)."""
    return DataWait(NO_SINK)


def _failure_step(step: object) -> int | None:
    """``failure(step=)`` as an integer; None (said once: the failure is recorded without a
    step) when it is not one. ``int(step)`` raised, and the failure was lost."""
    try:
        return int(step)  # type: ignore[call-overload, no-any-return]
    except (TypeError, ValueError, OverflowError):
        log_once(
            "Session.failure.step",
            "failure(step=%r): not an integer step; the failure is recorded without one",
            step,
        )
        return None


_END_REASONS = frozenset(r.value for r in semconv.EndReasonValues)
_MAX_INT64 = 2**63 - 1
"""The largest integer an OTLP attribute holds."""


class Session:
    """The instrumentation of one attempt on one rank. Create it with :func:`ett.init`.

    Methods that time a block return a :class:`SpanBlock` (a context manager and a decorator).
    No method raises because of telemetry; exceptions of the user's code propagate unchanged.
    """

    def __init__(
        self,
        identity: Identity,
        tracer: trace.Tracer,
        *,
        flusher: Flusher | None = None,
        dropped: Callable[[], int] | None = None,
        span_identity: bool = False,
        window_s: float = semconv.DEFAULT_WINDOW_S,
        flush_timeout_s: float = 5.0,
        enabled: bool = True,
        exit_timeout_s: float = 0.0,
        persist_wait_s: float | None = None,
    ) -> None:
        self.identity = identity
        """Who this session speaks for."""
        self.enabled = enabled
        """False when the session records nothing (``ETT_DISABLED``, ``init(enabled=False)``)."""
        self._steps = 0
        self._samples = 0
        self._last_step_ns = 0
        self._first_step_ns = 0
        self._wait_ns = 0
        """Nanoseconds the steps waited for their gradient collectives (``_ddp_waits``)."""
        self._wait_reported_ns = 0
        self._waits_timed = False
        self._flusher = flusher
        self._dropped = dropped
        self._flush_timeout_s = flush_timeout_s
        self._alloc_ns = int(identity.allocated_at * 1e9)
        self._spans = SpanEmitter(tracer, identity, span_identity=span_identity, enabled=enabled)
        self._persists = PersistTracker(self._spans)
        self._persist_wait_s = resolve_persist_wait(persist_wait_s)
        self._ended = False
        self._ending = False
        self._preempted = False
        """A SIGTERM the program handles came (:meth:`preempt`): the end is ``preempted``."""
        self._interrupted: KeyboardInterrupt | None = None
        """A Ctrl-C that cut one of the end's waits short (:meth:`_unless_interrupted`)."""
        self._end_lock = threading.RLock()  # re-entrant: SIGTERM may arrive inside end()
        self._end_thread: int | None = None
        """The thread running :meth:`end`, while it runs."""
        self._end_done = threading.Event()
        self._after_end: list[Callable[[], None]] = []
        self._end_callbacks: list[Callable[[], None]] = []
        self._first_batch_seen = False
        self._first_batch_lock = threading.Lock()
        self._poll_s = poll_interval(window_s)
        self._clock = WindowClock(
            self._counters, self._emit_window, window_s, lambda: self._last_step_ns
        )
        self._window_thread: PollThread | None = None
        self._attempt_span = self._spans.open_root(semconv.SPAN_ATTEMPT, self._alloc_ns)
        self.started_ns = time.time_ns()
        """When this session started (unix ns): the start-up phases the library names by
        itself (``ett._startup``) end here."""
        self.exit_watchdog = ExitWatchdog(
            exit_timeout_s if enabled else 0.0, self._record_hang, self.flush
        )
        """Ends the process when it does not exit after a failed :meth:`end` (``_watchdog``)."""
        if enabled:
            self._start_recording()

    def _start_recording(self) -> None:
        """Name the seconds before init() now (exported with the next batch, within a second:
        live figures count them, and they survive a later SIGKILL), then start the window
        thread."""
        observed_startup(self._spans, self._alloc_ns, self.started_ns)
        self._window_thread = PollThread(self._poll, self._poll_interval)
        self._window_thread.start()

    # --- the hot loop ----------------------------------------------------------------------------

    def step(self, samples: int = 1, _now: Callable[[], int] = time.time_ns) -> None:
        """Count one completed training step of ``samples`` samples. Call it once per step from
        the training thread. Costs one clock read and two integer additions: no span, no lock.
        The clock read is the step's instant, so the last window ends exactly at the last step.
        Without a :meth:`first_batch` call, the window thread marks the first batch (step 0) at
        the first ``step()``'s instant, within 20 ms."""
        try:
            self._last_step_ns = now = _now()
            if not self._steps:  # the first step's instant: the first batch when none is marked
                self._first_step_ns = now
            self._steps += 1
            self._samples += samples
        except Exception:
            log_once("Session.step", "step(samples=%r): samples must be an int", samples)

    def _poll(self) -> None:
        """The window thread's poll: mark a first batch nobody marked, then tick the windows."""
        self._mark_unmarked_first_batch()
        self._clock.tick()

    def _mark_unmarked_first_batch(self) -> None:
        """Steps came without a :meth:`first_batch`: mark it (step 0) at the first step's own
        instant. A mark taken when the poll saw them put a loop faster than the poll (a short
        job, a test) all before the first batch: one window of zero length, ETT 0 %."""
        if not self._first_batch_seen and self._steps:
            first = self._first_step_ns
            self._mark_first_batch(0, first or time.time_ns(), count_from_zero=True)

    def _poll_interval(self) -> float:
        return self._poll_s if self._first_batch_seen else STARTUP_POLL_S

    def _counters(self) -> tuple[int, int]:
        samples = self._samples
        return self._steps, samples if isinstance(samples, int) else int(samples)

    def _emit_window(self, start_ns: int, end_ns: int, first: int, last: int, n: int) -> None:
        attrs: dict[str, AttributeValue] = {semconv.STEP_FIRST: first, semconv.STEP_LAST: last}
        if 0 <= n <= _MAX_INT64:
            attrs[semconv.SAMPLES] = n
        else:  # step(samples=-5) or 10**30: this window's count is unknown, the next ones not
            log_once(
                "Session.samples",
                "a window of %d step(s) counted %d samples: step(samples=) must be a count "
                "from 0 to 2**63 - 1; that window is sent without one",
                last - first + 1,
                n,
            )
        if self._dropped is not None:
            attrs[semconv.TELEMETRY_DROPPED_SPANS] = self.dropped_spans
        if self._waits_timed:  # the waits up to now: those of the window's steps (and at
            # most the one step in flight), never more than the window lasted
            total = self._wait_ns  # one read: a backend thread may add to it meanwhile
            waited, self._wait_reported_ns = total - self._wait_reported_ns, total
            attrs[semconv.WINDOW_WAIT_S] = min(waited, max(0, end_ns - start_ns)) / 1e9
        self._spans.instant(semconv.SPAN_TRAIN_WINDOW, attrs, start_ns, end_ns)

    def _add_wait(self, wait_ns: int) -> None:
        """One step's wait for its gradient collectives (called from a backend's thread, one
        at a time: ``_ddp_waits.WaitTimer`` holds its lock)."""
        self._waits_timed = True
        self._wait_ns += wait_ns

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

    @never_raises("Session.first_batch", None)
    def first_batch(self, step: int = 0) -> None:
        """``ett.first_batch``: the rank consumed its first batch now, resuming at global ``step``.
        The span starts at allocation and ends now. Later calls are ignored."""
        self._mark_first_batch(checked_step(step, "first_batch"), time.time_ns())

    def _mark_first_batch(self, step: int, now: int, count_from_zero: bool = False) -> None:
        with self._first_batch_lock:
            if self._first_batch_seen:
                return
            self._first_batch_seen = True
        start = min(self._alloc_ns, now)
        self._spans.instant(semconv.SPAN_FIRST_BATCH, {semconv.STEP: step}, start, now)
        self._clock.start(now, step, count_from_zero)

    # --- one method per span ---------------------------------------------------------------------

    @guarded_block("Session.startup", _no_block)
    def startup(
        self, phase: str, component: str | None = None, *, barrier: bool = False
    ) -> SpanBlock:
        """``ett.startup.<phase>``: one start-up phase; ``component`` defaults by phase.
        ``barrier=True`` marks a phase no rank leaves before every rank has entered it (a
        warm-up collective, say: ``ett.barrier``), so the collector charges the others' wait to
        the rank that arrived last (``rendezvous`` and ``pg_init`` are barriers anyway)."""
        comp = component or semconv.default_component(phase)
        name = semconv.startup_span_name(phase)
        attrs: dict[str, AttributeValue] = {semconv.COMPONENT: str(comp)}
        if barrier:
            attrs[semconv.BARRIER] = True
        return SpanBlock(self._spans, name, attrs)

    @never_raises("Session.set_backend", None)
    def set_backend(self, backend: str) -> None:
        """Tell the session the process-group backend (``gloo``, ``nccl``, ...). On a torchrun
        restart with gloo and without ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` it logs a
        warning, once (``ett._torchrun``). :func:`ett.torch_hooks.init_process_group`
        calls it for you."""
        warn_restart_store(str(backend))

    @guarded_block("Session.shutdown", _no_block)
    def shutdown(self, step: str, component: str | None = None) -> SpanBlock:
        """``ett.shutdown.<step>``: what a completed attempt waits for on its way out, after
        its last training step (``pg_teardown``: destroying the process groups; the library
        itself emits ``persist_wait`` and ``exporter_flush`` from :meth:`end`). ``component``
        defaults by step (``persist_wait`` → checkpoint, ``pg_teardown`` → comms,
        ``exporter_flush`` → runtime; others ``other``)."""
        comp = component or semconv.shutdown_component(step)
        name = semconv.shutdown_span_name(step)
        return SpanBlock(self._spans, name, {semconv.COMPONENT: str(comp)})

    @guarded_block("Session.checkpoint_save", _no_save)
    def checkpoint_save(
        self, step: int, mode: str = "sync", nbytes: int | None = None
    ) -> CheckpointSave:
        """``ett.checkpoint.save``: the part of saving checkpoint ``step`` that blocks the loop;
        ``mode`` is ``sync`` or ``async``. Its :meth:`CheckpointSave.persist` times the rest."""
        return CheckpointSave(self._spans, self._persists, step, mode, nbytes)

    def checkpoint_persist(self, step: int, future: Any, start_ns: int | None = None) -> None:
        """``ett.checkpoint.persist`` for checkpoint ``step``: from its save's start (or
        ``start_ns``, or now) until ``future`` completes. ``future`` is a
        ``concurrent.futures.Future``, a ``torch.futures.Future``, anything with
        ``add_done_callback`` or ``then``, or a DCP ``AsyncSaveResponse`` (its
        ``upload_completion``). A future that fails emits no persist span (the checkpoint is not
        durable) and logs a warning."""
        self._persists.persist(step, future, start_ns)

    @guarded_block("Session.checkpoint_load", _no_block)
    def checkpoint_load(self, step: int | None = None) -> SpanBlock:
        """``ett.startup.checkpoint_load``: restoring checkpoint ``step`` (or ``set_step()``)."""
        phase = semconv.StartupPhaseValues.CHECKPOINT_LOAD
        attrs: dict[str, AttributeValue] = {semconv.COMPONENT: semconv.default_component(phase)}
        if step is not None:
            attrs[semconv.CHECKPOINT_STEP] = int(step)
        name = semconv.startup_span_name(phase)
        return SpanBlock(self._spans, name, attrs, step_key=semconv.CHECKPOINT_STEP)

    @guarded_block("Session.compile", _no_block)
    def compile(
        self, cache: str = "miss", frames: int | None = None, trigger: str | None = None
    ) -> SpanBlock:
        """``ett.compile``: PT2 compilation; ``cache``: ``hit``, ``miss``, ``partial``, ``off``."""
        attrs: dict[str, AttributeValue] = {semconv.COMPILE_CACHE: str(cache)}
        if frames is not None:
            attrs[semconv.COMPILE_FRAMES] = int(frames)
        if trigger is not None:
            attrs[semconv.COMPILE_TRIGGER] = str(trigger)
        return SpanBlock(self._spans, semconv.SPAN_COMPILE, attrs)

    @guarded_block("Session.eval", _no_block)
    def eval(self) -> SpanBlock:
        """``ett.eval``: evaluation inside the training loop."""
        return SpanBlock(self._spans, semconv.SPAN_EVAL, {})

    @guarded_block("Session.publish", _no_block)
    def publish(self, standalone: bool = False) -> SpanBlock:
        """``ett.publish``: publishing the model; ``standalone`` when it runs as its own job."""
        attrs: dict[str, AttributeValue] = {semconv.PUBLISH_STANDALONE: bool(standalone)}
        return SpanBlock(self._spans, semconv.SPAN_PUBLISH, attrs)

    # --- training stalls: data waits and user-named blocking events (issue 16, _stalls) -------

    @guarded_block("Session.data_wait", _no_wait)
    def data_wait(self, min_s: float = DATA_WAIT_MIN_S) -> DataWait:
        """``ett.data.wait``: ``with sess.data_wait(): batch = next(it)`` times the loop's wait
        for its next batch. A span is emitted only for a wait of ``min_s`` or more (default
        1 ms); the collector cuts it out of training as idle, component ``data``."""
        return DataWait(self._spans, min_s)

    def batches(self, loader: Iterable[_Item], min_s: float = DATA_WAIT_MIN_S) -> Iterator[_Item]:
        """The items of ``loader`` (``for batch in sess.batches(loader):``), each wait for one
        timed as by :meth:`data_wait`."""
        return timed_batches(self._spans, loader, min_s)

    @guarded_block("Session.blocking", _no_block)
    def blocking(self, name: str, component: str = "other") -> SpanBlock:
        """``ett.blocking``: a user-named event that blocks the training loop (``with
        sess.blocking("sdc_check", component="model"):``); the collector cuts it out of training
        as idle charged to ``component`` (one it does not know: ``other``; the name is kept)."""
        return blocking_block(self._spans, name, component)

    @never_raises("Session.failure", None)
    def failure(
        self,
        cause: str | BaseException,
        step: int | None = None,
        error_type: str | None = None,
    ) -> None:
        """``ett.failure`` (zero length, now). ``cause`` is a failure cause or an exception (then
        classified, and ``error.type`` taken from it). ``step`` defaults to the current step.
        This does not end the attempt; :meth:`end` (or an uncaught exception) does."""
        attrs: dict[str, AttributeValue] = {}
        if isinstance(cause, BaseException):
            error_type = error_type or _error_type(cause)
            cause = classify(cause)
        attrs[semconv.FAILURE_CAUSE] = str(cause)
        step = self.current_step if step is None else _failure_step(step)
        if step is not None:
            attrs[semconv.STEP] = step
        if error_type:
            attrs[semconv.ERROR_TYPE] = error_type
        self._spans.instant(semconv.SPAN_FAILURE, attrs)

    # --- the end of the attempt ------------------------------------------------------------------

    @never_raises("Session.preempt", None)
    def preempt(self) -> None:
        """A stop from outside (SIGTERM) that the program handles itself (its own handler, or
        ``except ett.Preempted``): an ``ett.failure`` (``preemption``) now, once; the session
        goes on recording (the checkpoint the program saves on its way out) and the attempt ends
        ``preempted`` at :meth:`end`, whichever reason that is given, unless it is a worse one
        (``failed``). The SIGTERM hook calls it; a program that learns of a preemption another
        way (a scheduler's notice) may too."""
        if self._preempted or self._ending:
            return
        self._preempted = True
        self.failure(semconv.FailureCauseValues.PREEMPTION)

    @never_raises("Session.fail", None)
    def fail(self, exc: BaseException) -> None:
        """The attempt dies of ``exc``: an ``ett.failure`` span, then :meth:`end` as ``failed``
        with the classified cause (``KeyboardInterrupt``: ``preempted``, cause ``preemption``,
        as for SIGTERM; after :meth:`preempt`, a ``SystemExit`` or ``KeyboardInterrupt`` is the
        preemption's own way out: ``preempted``, no second failure). Does not raise; the caller
        re-raises ``exc``."""
        if self._ending:
            return
        if self._preempted and isinstance(exc, (SystemExit, KeyboardInterrupt)):
            self.end(_PREEMPTED, semconv.FailureCauseValues.PREEMPTION)
            return
        if isinstance(exc, KeyboardInterrupt):  # Ctrl-C, or a scheduler's SIGINT: stopped from
            cause = semconv.FailureCauseValues.PREEMPTION  # outside, as by SIGTERM, not a fault
            self.failure(cause, error_type=_error_type(exc))
            self.end(_PREEMPTED, cause)
            return
        cause = classify(exc)
        self.failure(cause, error_type=_error_type(exc))
        self.end(_FAILED, cause)

    def guard(self) -> Guard:
        """A context manager: an exception escaping it fails the attempt (:meth:`fail`), then
        propagates unchanged. ``SystemExit(0)`` is not a failure."""
        return Guard(self)

    def add_end_callback(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once, just before the attempt span ends (used by the torch hooks)."""
        self._end_callbacks.append(callback)

    @never_raises("Session.end", None)
    def end(self, reason: str = _COMPLETED, cause: str | None = None) -> None:
        """End the attempt: wait (at most ``ETT_PERSIST_WAIT_S``) for checkpoint persists in
        flight, emitting each with its real end (and the wait as ``ett.shutdown.persist_wait``),
        the last ``ett.train.window`` (ending at the last ``step()``), when completed a flush
        timed as ``ett.shutdown.exporter_flush``, the ``ett.attempt`` span with its end reason
        (and cause when not completed: default ``preemption`` for ``preempted``, else
        ``unknown``), then flush within ``flush_timeout_s``. Only the first call counts. When
        not completed, the exit watchdog then gives the process its time to exit. After
        :meth:`preempt`, ``completed`` is recorded as ``preempted``."""
        with self._end_lock:
            if self._ending:
                return
            self._end_thread = threading.get_ident()
            self._ending = True
        try:
            if self._preempted and reason == _COMPLETED:
                reason, cause = _PREEMPTED, cause or semconv.FailureCauseValues.PREEMPTION
            if reason not in _END_REASONS:
                log_once(
                    "Session.end_reason",
                    "end(%r): the reason is one of %s; recorded as 'failed'",
                    reason,
                    ", ".join(sorted(_END_REASONS)),
                )
                reason = semconv.EndReasonValues.FAILED.value
            self._end(reason, cause)
        finally:
            self._end_thread = None
            self._end_done.set()
            deferred, self._after_end = self._after_end, []
            for action in deferred:  # a signal's action, held while the end was flushed
                action()

    def defer_while_ending(self, action: Callable[[], None], wait_s: float = 0.0) -> bool:
        """For a signal handler: hold ``action`` (the signal's own action: raise
        :class:`~ett.Preempted`, die by the signal) until :meth:`end` has returned, when
        the handler interrupted :meth:`end` in this thread; True then. Raising there would cut
        the end's flush short and lose the spans it records (the attempt span, the failure, the
        last window): a failing rank under torchrun gets its SIGTERM just as it records its own
        failure. When :meth:`end` runs in another thread, wait for it (at most ``wait_s``) and
        return False: the caller acts now. False when no end is running."""
        if self._end_thread is None:
            return False
        if self._end_thread == threading.get_ident():
            self._after_end.append(action)
            return True
        self._end_done.wait(wait_s)
        return False

    @property
    def end_bound_s(self) -> float:
        """The most :meth:`end` waits in all (persists in flight, then the flushes)."""
        return self._persist_wait_s + self._flush_timeout_s + 0.5

    def _unless_interrupted(self, wait: Callable[[], object]) -> None:
        """One of the end's waits (a flush); a ``KeyboardInterrupt`` (Ctrl-C, at the exit's
        flush say) cuts it short, and the end goes on without waiting again
        (:meth:`_leave_interrupted`)."""
        if self._interrupted is not None:
            return
        try:
            wait()
        except KeyboardInterrupt as exc:
            self._interrupted = exc

    def _leave_interrupted(self, exc: KeyboardInterrupt) -> None:
        """After a Ctrl-C during the end: shut the pipeline down at once (what was not sent goes
        to the spool, when there is one), say so in one line, and raise the interrupt again
        (marked as said, so the exit hook prints no traceback)."""
        before = self.dropped_spans
        try:
            self.flush(0.0)
        except KeyboardInterrupt:
            pass
        lost = self.dropped_spans - before
        log_once(
            "Session.interrupted",
            "ETT: the export at the attempt's end was interrupted (KeyboardInterrupt): %s",
            f"{lost} span(s) not sent were dropped (counted; no spool took them)"
            if lost > 0
            else "no span was lost (any not sent yet wait in the spool for the job's next "
            "process or `ett-instrument flush`)",
        )
        exc._ett_said = True  # type: ignore[attr-defined]
        raise exc

    def _end(self, reason: str, cause: str | None) -> None:
        wait_start = time.time_ns()
        try:
            waited = self._persists.finish(self._persist_wait_s)
        except KeyboardInterrupt as exc:
            self._interrupted, waited = exc, self._persists.finish(0.0)
        if waited:
            self._spans.instant(
                semconv.shutdown_span_name(semconv.ShutdownStepValues.PERSIST_WAIT),
                {semconv.COMPONENT: semconv.ComponentValues.CHECKPOINT.value},
                wait_start,
            )
        for callback in self._end_callbacks:
            try:
                callback()
            except Exception:
                log_once("Session.end_callback", "end callback failed", exc_info=True)
        if self._window_thread is not None:
            self._window_thread.stop()
        self._mark_unmarked_first_batch()
        self._clock.flush()
        # both flushes share one bound: a collector that takes connections and never answers
        # held the end for the bound, then again for the final flush's own wait
        deadline = time.monotonic() + self._flush_timeout_s
        if reason == _COMPLETED and self._flusher is not None:
            flush_start = time.time_ns()
            self._unless_interrupted(self.flush)
            self._spans.instant(
                semconv.shutdown_span_name(semconv.ShutdownStepValues.EXPORTER_FLUSH),
                {semconv.COMPONENT: semconv.ComponentValues.RUNTIME.value},
                flush_start,
            )
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
        self._spans.close()
        self._ended = True
        left = max(0.0, deadline - time.monotonic())
        if reason != _COMPLETED and self._interrupted is None:  # the process should now exit:
            self.exit_watchdog.expect()  # the watchdog sees that it does
            self._unless_interrupted(lambda: self.flush(left))
            if self._interrupted is None:
                self.exit_watchdog.arm(str(attrs[semconv.FAILURE_CAUSE]))
            else:  # stopped by hand: no watchdog, and the pipeline shuts down below
                self.exit_watchdog.disarm()
        else:
            self._unless_interrupted(lambda: self.flush(left))
        if self._interrupted is not None:
            self._leave_interrupted(self._interrupted)

    def _record_hang(self, cause: str, phase: str, stack: str, waited_s: float) -> None:
        """The exit watchdog's ``ett.failure``: still alive ``waited_s`` after the failed end, in
        ``phase`` (emitted although the attempt has ended: the hang is part of it)."""
        attrs: dict[str, AttributeValue] = {
            semconv.FAILURE_CAUSE: cause,
            semconv.ERROR_TYPE: _EXIT_TIMEOUT,
            semconv.FAILURE_PHASE: phase,
            semconv.CODE_STACKTRACE: stack,
        }
        if self.current_step is not None:
            attrs[semconv.STEP] = self.current_step
        self._spans.instant(semconv.SPAN_FAILURE, attrs, after_close=True)

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


def wait_sink(session: Session) -> Callable[[int], None]:
    """Where :mod:`ett.torch_hooks` adds each step's collective wait (nanoseconds): from the
    first one on, every window of ``session`` carries ``ett.window.wait_s``."""
    return session._add_wait


def span_sink(session: Session) -> SpanSink:
    """The spans of ``session``'s attempt, for the library's integrations
    (:mod:`ett.torch_hooks` times compilations through it)."""
    return session._spans
