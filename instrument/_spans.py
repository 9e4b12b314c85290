"""Span scopes: the objects returned by the session's ``with``-able methods.

A :class:`SpanBlock` is a context manager *and* a decorator. Entering starts the span; leaving
ends it. An exception raised by the user's code inside is recorded on the span (status ERROR,
an ``exception`` event) and then propagates unchanged: ``__exit__`` never swallows it and never
raises one of its own.

Scopes depend on two narrow protocols, not on the session: :class:`SpanSink` (start and end one
span; :class:`ett._emitter.SpanEmitter` implements it) and :class:`SaveTracker` (what a
checkpoint save reports; :class:`ett._persist.PersistTracker` implements it).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any, ParamSpec, Protocol, TypeVar

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._errors import log_once, never_raises, never_raises_making
from ._scope import Scope

_P = ParamSpec("_P")
_R = TypeVar("_R")
_B = TypeVar("_B")


class SpanSink(Protocol):
    """Starts and ends spans of one attempt; neither method raises."""

    def start(
        self, name: str, attributes: dict[str, AttributeValue], start_ns: int | None = None
    ) -> Span:
        """Start span ``name`` with ``attributes`` at ``start_ns`` (default: now)."""
        ...

    def end(
        self, span: Span | None, exc: BaseException | None = None, end_ns: int | None = None
    ) -> None:
        """End ``span`` at ``end_ns`` (default: now), recording ``exc`` on it when given."""
        ...


class SaveTracker(Protocol):
    """What a checkpoint save tells the session: when it started, and its persist future."""

    def save_started(self, step: int, start_ns: int) -> None:
        """The save of checkpoint ``step`` started at ``start_ns``."""
        ...

    def persist(self, step: int, future: Any, start_ns: int | None = None) -> None:
        """Time ``ett.checkpoint.persist`` of ``step`` until ``future`` completes."""
        ...


class _NoSink:
    """A sink that records nothing: what a span whose arguments were bad records into, so that
    the user's ``with`` block runs on (:func:`guarded_block`)."""

    def start(
        self, name: str, attributes: dict[str, AttributeValue], start_ns: int | None = None
    ) -> None:
        return None

    def end(self, span: Any, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        return None


class _NoSaves:
    """A save tracker that tracks nothing (the checkpoint save of :func:`guarded_block`)."""

    def save_started(self, step: int, start_ns: int) -> None:
        return None

    def persist(self, step: int, future: Any, start_ns: int | None = None) -> None:
        return None


NO_SINK: Any = _NoSink()
NO_SAVES: Any = _NoSaves()


def guarded_block(
    key: str, fallback: Callable[[], _B]
) -> Callable[[Callable[_P, _B]], Callable[_P, _B]]:
    """Decorate a method that builds a span block (``session.startup(...)``, ...): when building
    it raises (a bad argument: ``startup(None)``, ``checkpoint_save("x")``), log once and return
    ``fallback()``, a block that records nothing, so the user's ``with`` runs on."""
    return never_raises_making(key, fallback, "ignored: no span")


class SpanBlock(Scope):
    """A span around a block of code (``with``) or around every call of a function (decorator)."""

    def __init__(
        self,
        sink: SpanSink,
        name: str,
        attributes: dict[str, AttributeValue],
        *,
        step_key: str | None = None,
    ) -> None:
        self._sink = sink
        self._name = name
        self._attributes = attributes
        self._step_key = step_key
        self._spans: list[Span] = []
        self.start_ns = 0
        """Unix nanoseconds at which the (innermost) span started; 0 before ``__enter__``."""

    def __enter__(self) -> SpanBlock:
        self.start_ns = time.time_ns()
        self._spans.append(self._sink.start(self._name, self._attributes, self.start_ns))
        return self

    def _leave(self, exc: BaseException | None) -> None:
        span = self._spans.pop() if self._spans else None
        self._sink.end(span, exc)

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Use as a decorator: every call of ``func`` runs inside a new span."""

        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            with self._copy():
                return func(*args, **kwargs)

        return wrapper

    def _copy(self) -> SpanBlock:
        return SpanBlock(self._sink, self._name, dict(self._attributes), step_key=self._step_key)

    @never_raises("SpanBlock.set_attribute", None)
    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set an attribute on the open span (and on later spans of this block)."""
        self._attributes[key] = value
        if self._spans and self._spans[-1] is not None:
            self._spans[-1].set_attribute(key, value)

    @never_raises("SpanBlock.set_step", None)
    def set_step(self, step: int) -> None:
        """Set the step attribute of this block (e.g. the checkpoint step, once loaded)."""
        if self._step_key is None:
            log_once("SpanBlock.set_step", "set_step() on a span without a step attribute")
            return
        self.set_attribute(self._step_key, int(step))


_MODES = frozenset(m.value for m in semconv.CheckpointModeValues)


MAX_STEP = 2**62
"""The largest global step recorded as given: OTLP carries a step as a signed 64-bit integer,
and the windows count on from it (no run steps anywhere near this)."""


def checked_step(step: int, where: str) -> int:
    """``int(step)``, said once when negative (global steps count from 0: a negative one is a
    bug in the caller's arithmetic, which the collector would store as given). A step above
    :data:`MAX_STEP` is said once and recorded as 0: the exporter could not encode it (nor the
    windows counting on from it), and would log a traceback for every span that held it."""
    step = int(step)
    if step > MAX_STEP:
        log_once(
            "step_range." + where,
            "%s(step=%d): a global step above 2**62 cannot be sent; recorded as 0, check "
            "the caller",
            where,
            step,
        )
        return 0
    if step < 0:
        log_once(
            "step." + where,
            "%s(step=%d): global steps count from 0; recorded as given, check the caller",
            where,
            step,
        )
    return step


class CheckpointSave(SpanBlock):
    """``ett.checkpoint.save`` (the blocking part) with :meth:`persist` for the async part."""

    def __init__(
        self, sink: SpanSink, saves: SaveTracker, step: int, mode: str, nbytes: int | None
    ) -> None:
        step = checked_step(step, "checkpoint_save")
        if mode not in _MODES:
            log_once(
                "CheckpointSave.mode",
                "checkpoint_save(mode=%r): want 'sync' or 'async'; recorded as 'sync'",
                mode,
            )
            mode = semconv.CheckpointModeValues.SYNC.value
        attributes: dict[str, AttributeValue] = {
            semconv.CHECKPOINT_STEP: step,
            semconv.CHECKPOINT_MODE: str(mode),
        }
        if nbytes is not None and int(nbytes) >= 0:
            attributes[semconv.CHECKPOINT_BYTES] = int(nbytes)
        elif nbytes is not None:
            log_once("CheckpointSave.bytes", "checkpoint_save(nbytes=%r): left out", nbytes)
        super().__init__(
            sink, semconv.SPAN_CHECKPOINT_SAVE, attributes, step_key=semconv.CHECKPOINT_STEP
        )
        self._saves = saves
        self.step = int(step)

    def __enter__(self) -> CheckpointSave:
        super().__enter__()
        self._saves.save_started(self.step, self.start_ns)
        return self

    @never_raises("CheckpointSave.set_bytes", None)
    def set_bytes(self, nbytes: int) -> None:
        """Set ``ett.checkpoint.bytes`` once the size is known."""
        self.set_attribute(semconv.CHECKPOINT_BYTES, int(nbytes))

    def persist(self, future: Any) -> None:
        """Time the background part: ``ett.checkpoint.persist`` from this save's start until
        ``future`` completes (see :meth:`ett.Session.checkpoint_persist`)."""
        self._saves.persist(self.step, future, start_ns=self.start_ns or None)
