"""``ett.checkpoint.persist``: timing the background part of checkpoint saves.

:class:`PersistTracker` remembers when each recent save started and ends a persist span when the
save's future completes. It implements :class:`instrument._spans.SaveTracker` and emits through a
:class:`instrument._spans.SpanSink`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from . import semconv
from ._errors import log_once, never_raises
from ._spans import SpanSink

_REMEMBERED_SAVES = 16
"""How many save starts are kept for a later ``checkpoint_persist(step, future)``."""


def completion_future(obj: Any) -> Any:
    """The future that says "durable": ``upload_completion`` of a DCP ``AsyncSaveResponse``,
    else ``obj`` itself."""
    upload = getattr(obj, "upload_completion", None)
    return upload if upload is not None else obj


def future_error(future: Any) -> BaseException | None:
    """The exception a completed future ended with, or None (``concurrent.futures`` or torch)."""
    try:
        exception = getattr(future, "exception", None)
        if callable(exception):
            error = exception(timeout=0)
            return error if isinstance(error, BaseException) else None
        value = getattr(future, "value", None) or getattr(future, "wait", None)
        if callable(value):
            value()
        return None
    except BaseException as error:  # CancelledError, or the torch future's stored error
        return error


def when_done(future: Any, callback: Callable[[Any], None]) -> bool:
    """Call ``callback(future)`` when ``future`` completes (``add_done_callback`` or ``then``).
    False when ``future`` offers neither."""
    add = getattr(future, "add_done_callback", None)
    if callable(add):
        add(callback)
        return True
    then = getattr(future, "then", None)
    if callable(then):
        then(callback)
        return True
    return False


class PersistTracker:
    """Save starts and the persist spans in flight, for one attempt."""

    def __init__(self, sink: SpanSink) -> None:
        self._sink = sink
        self._save_starts: dict[int, int] = {}
        self._in_flight: dict[int, tuple[Any, Callable[[Any], None]]] = {}

    def save_started(self, step: int, start_ns: int) -> None:
        """Remember that the save of ``step`` started at ``start_ns`` (the last few saves)."""
        self._save_starts[step] = start_ns
        while len(self._save_starts) > _REMEMBERED_SAVES:
            self._save_starts.pop(next(iter(self._save_starts)))

    @never_raises("Session.checkpoint_persist", None)
    def persist(self, step: int, future: Any, start_ns: int | None = None) -> None:
        """``ett.checkpoint.persist`` of ``step``: from ``start_ns`` (else its save's start, else
        now) until ``future`` completes; no span when the future fails (not durable)."""
        step = int(step)
        start = start_ns or self._save_starts.get(step) or time.time_ns()
        span = self._sink.start(
            semconv.SPAN_CHECKPOINT_PERSIST, {semconv.CHECKPOINT_STEP: step}, start
        )
        target = completion_future(future)
        key = id(span)
        once = threading.Lock()

        def done(completed: Any) -> None:
            if not once.acquire(blocking=False):
                return  # already ended (by the future's callback or by finish())
            self._in_flight.pop(key, None)
            error = future_error(completed)
            if error is None:
                self._sink.end(span)
            else:
                log_once("persist.failed", "checkpoint %s did not persist: %r", step, error)

        self._in_flight[key] = (target, done)
        if not when_done(target, done):
            self._in_flight.pop(key, None)
            log_once("persist.future", "checkpoint_persist: %r is not a future", type(target))

    def finish(self) -> None:
        """At the end: a future that completed but whose callback has not run yet (a
        ``concurrent.futures`` callback runs after the waiter wakes) still gets its span."""
        for target, done in list(self._in_flight.values()):
            is_done = getattr(target, "done", None)
            if callable(is_done) and is_done():
                done(target)
