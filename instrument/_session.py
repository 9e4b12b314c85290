"""The session: one attempt of one rank, and one method per span of ETT-SPEC section 2."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.util.types import AttributeValue

from . import semconv
from ._core import SessionCore
from ._errors import log_once, never_raises
from ._failure import Guard, classify
from ._failure import error_type as _error_type
from ._spans import CheckpointSave, SpanBlock, completion_future, future_error, when_done

_FAILED = semconv.EndReasonValues.FAILED.value


class Session(SessionCore):
    """The instrumentation of one attempt on one rank. Create it with :func:`instrument.init`.

    Methods that time a block return a :class:`SpanBlock` (a context manager and a decorator).
    No method raises because of telemetry; exceptions of the user's code propagate unchanged.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._persists: dict[int, tuple[Any, Callable[[Any], None]]] = {}
        self.add_end_callback(self._finish_persists)

    def startup(self, phase: str, component: str | None = None) -> SpanBlock:
        """``ett.startup.<phase>``: one start-up phase; ``component`` defaults by phase."""
        comp = component or semconv.default_component(phase)
        name = semconv.startup_span_name(phase)
        return SpanBlock(self, name, {semconv.COMPONENT: str(comp)})

    def checkpoint_save(
        self, step: int, mode: str = "sync", nbytes: int | None = None
    ) -> CheckpointSave:
        """``ett.checkpoint.save``: the part of saving checkpoint ``step`` that blocks the loop;
        ``mode`` is ``sync`` or ``async``. Its :meth:`CheckpointSave.persist` times the rest."""
        return CheckpointSave(self, step, mode, nbytes)

    def _note_save_start(self, step: int, start_ns: int) -> None:
        self._save_starts[step] = start_ns
        while len(self._save_starts) > 16:
            self._save_starts.pop(next(iter(self._save_starts)))

    @never_raises("Session.checkpoint_persist", None)
    def checkpoint_persist(self, step: int, future: Any, start_ns: int | None = None) -> None:
        """``ett.checkpoint.persist`` for checkpoint ``step``: from its save's start (or
        ``start_ns``, or now) until ``future`` completes. ``future`` is a
        ``concurrent.futures.Future``, a ``torch.futures.Future``, anything with
        ``add_done_callback`` or ``then``, or a DCP ``AsyncSaveResponse`` (its
        ``upload_completion``). A future that fails emits no persist span (the checkpoint is not
        durable) and logs a warning."""
        step = int(step)
        start = start_ns or self._save_starts.get(step) or time.time_ns()
        span = self._start_span(
            semconv.SPAN_CHECKPOINT_PERSIST, {semconv.CHECKPOINT_STEP: step}, start
        )
        target = completion_future(future)
        key = id(span)
        once = threading.Lock()

        def done(completed: Any) -> None:
            if not once.acquire(blocking=False):
                return  # already ended (by the future's callback or by end())
            self._persists.pop(key, None)
            error = future_error(completed)
            if error is None:
                self._end_span(span)
            else:
                log_once("persist.failed", "checkpoint %s did not persist: %r", step, error)

        self._persists[key] = (target, done)
        if not when_done(target, done):
            self._persists.pop(key, None)
            log_once("persist.future", "checkpoint_persist: %r is not a future", type(target))

    def _finish_persists(self) -> None:
        """At the end: a future that completed but whose callback has not run yet (a
        ``concurrent.futures`` callback runs after the waiter wakes) still gets its span."""
        for target, done in list(self._persists.values()):
            is_done = getattr(target, "done", None)
            if callable(is_done) and is_done():
                done(target)

    def checkpoint_load(self, step: int | None = None) -> SpanBlock:
        """``ett.startup.checkpoint_load``: restoring checkpoint ``step`` (or ``set_step()``)."""
        phase = semconv.StartupPhaseValues.CHECKPOINT_LOAD
        attrs: dict[str, AttributeValue] = {semconv.COMPONENT: semconv.default_component(phase)}
        if step is not None:
            attrs[semconv.CHECKPOINT_STEP] = int(step)
        name = semconv.startup_span_name(phase)
        return SpanBlock(self, name, attrs, step_key=semconv.CHECKPOINT_STEP)

    def compile(
        self, cache: str = "miss", frames: int | None = None, trigger: str | None = None
    ) -> SpanBlock:
        """``ett.compile``: PT2 compilation; ``cache``: ``hit``, ``miss``, ``partial``, ``off``."""
        attrs: dict[str, AttributeValue] = {semconv.COMPILE_CACHE: str(cache)}
        if frames is not None:
            attrs[semconv.COMPILE_FRAMES] = int(frames)
        if trigger is not None:
            attrs[semconv.COMPILE_TRIGGER] = str(trigger)
        return SpanBlock(self, semconv.SPAN_COMPILE, attrs)

    def eval(self) -> SpanBlock:
        """``ett.eval``: evaluation inside the training loop."""
        return SpanBlock(self, semconv.SPAN_EVAL, {})

    def publish(self, standalone: bool = False) -> SpanBlock:
        """``ett.publish``: publishing the model; ``standalone`` when it runs as its own job."""
        return SpanBlock(self, semconv.SPAN_PUBLISH, {semconv.PUBLISH_STANDALONE: bool(standalone)})

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
        step = self.current_step if step is None else step
        if step is not None:
            attrs[semconv.STEP] = int(step)
        if error_type:
            attrs[semconv.ERROR_TYPE] = error_type
        self._instant(semconv.SPAN_FAILURE, attrs)

    @never_raises("Session.fail", None)
    def fail(self, exc: BaseException) -> None:
        """The attempt dies of ``exc``: an ``ett.failure`` span, then :meth:`end` as ``failed``
        with the classified cause. Does not raise; the caller re-raises ``exc``."""
        if self._ending:
            return
        cause = classify(exc)
        self.failure(cause, error_type=_error_type(exc))
        self.end(_FAILED, cause)

    def guard(self) -> Guard:
        """A context manager: an exception escaping it fails the attempt (:meth:`fail`), then
        propagates unchanged. ``SystemExit(0)`` is not a failure."""
        return Guard(self)
