"""``ett.checkpoint.persist``: timing the background part of checkpoint saves.

:class:`PersistTracker` remembers when each recent save started and ends a persist span when the
save's future completes. It implements :class:`ett._spans.SaveTracker` and emits through a
:class:`ett._spans.SpanSink`.

At the end of an attempt, however it ends, :meth:`PersistTracker.finish` waits a bounded time
(``ETT_PERSIST_WAIT_S``, default 5 s) for the persists still in flight, so a checkpoint that
becomes durable just after a rank fails (an async save whose writes finish 0.1 s after an
exception) is reported with its real end instead of being lost with the process.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from . import semconv
from ._config import env_seconds, given_seconds
from ._errors import log_once, never_raises
from ._spans import SpanSink

_REMEMBERED_SAVES = 16
"""How many save starts are kept for a later ``checkpoint_persist(step, future)``."""

DEFAULT_PERSIST_WAIT_S = 5.0
"""Seconds an attempt's end waits for checkpoint persists in flight (``ETT_PERSIST_WAIT_S``)."""

_WAIT_POLL_S = 0.05
"""How often the end's wait looks at futures that complete without calling back yet."""


def resolve_persist_wait(
    wait_s: float | None = None, env: Mapping[str, str] | None = None
) -> float:
    """The end's bound on waiting for persists in flight: ``wait_s``, else
    ``ETT_PERSIST_WAIT_S``, else :data:`DEFAULT_PERSIST_WAIT_S`; 0 (or less) does not wait."""
    value = given_seconds(wait_s, "wait_s")
    if value is None:
        value = env_seconds("ETT_PERSIST_WAIT_S", env)
    return DEFAULT_PERSIST_WAIT_S if value is None else max(0.0, value)


def _is_done(future: Any) -> bool:
    """True when ``future`` says it completed (futures without ``done()`` never say so)."""
    try:
        is_done = getattr(future, "done", None)
        return bool(is_done()) if callable(is_done) else False
    except Exception:
        return False


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
        self._changed = threading.Condition()

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
            error = future_error(completed)
            if error is None:
                self._sink.end(span)
            else:
                log_once("persist.failed", "checkpoint %s did not persist: %r", step, error)
            with self._changed:
                self._in_flight.pop(key, None)
                self._changed.notify_all()

        self._in_flight[key] = (target, done)
        if not when_done(target, done):
            self._in_flight.pop(key, None)
            log_once("persist.future", "checkpoint_persist: %r is not a future", type(target))

    def finish(self, wait_s: float = 0.0) -> bool:
        """At the end of the attempt: wait at most ``wait_s`` for the persists in flight (each
        span ends when its future completes: its real end), then end those whose future
        completed but whose callback has not run yet (a ``concurrent.futures`` callback runs
        after the waiter wakes). True when a persist was still in flight when it was called."""
        deadline = time.monotonic() + max(0.0, wait_s)
        waited = False
        while True:
            with self._changed:
                pending = list(self._in_flight.values())
                if not pending or all(_is_done(target) for target, _ in pending):
                    break
                waited = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._changed.wait(min(remaining, _WAIT_POLL_S))
        for target, done in pending:
            if _is_done(target):
                done(target)
        return waited
