"""Span scopes: the objects returned by the session's ``with``-able methods.

A :class:`SpanBlock` is a context manager *and* a decorator. Entering starts the span; leaving
ends it. An exception raised by the user's code inside is recorded on the span (status ERROR,
an ``exception`` event) and then propagates unchanged: ``__exit__`` never swallows it and never
raises one of its own.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._errors import log_once, never_raises

if TYPE_CHECKING:
    from ._config import Identity
    from ._session import Session

_P = ParamSpec("_P")
_R = TypeVar("_R")


class SpanBlock:
    """A span around a block of code (``with``) or around every call of a function (decorator)."""

    def __init__(
        self,
        session: Session,
        name: str,
        attributes: dict[str, AttributeValue],
        *,
        step_key: str | None = None,
    ) -> None:
        self._session = session
        self._name = name
        self._attributes = attributes
        self._step_key = step_key
        self._spans: list[Span] = []
        self.start_ns = 0
        """Unix nanoseconds at which the (innermost) span started; 0 before ``__enter__``."""

    def __enter__(self) -> SpanBlock:
        self.start_ns = time.time_ns()
        self._spans.append(self._session._start_span(self._name, self._attributes, self.start_ns))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        span = self._spans.pop() if self._spans else None
        self._session._end_span(span, exc)

    def __call__(self, func: Callable[_P, _R]) -> Callable[_P, _R]:
        """Use as a decorator: every call of ``func`` runs inside a new span."""

        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            block = SpanBlock(
                self._session, self._name, dict(self._attributes), step_key=self._step_key
            )
            with block:
                return func(*args, **kwargs)

        return wrapper

    @never_raises("SpanBlock.set_attribute", None)
    def set_attribute(self, key: str, value: AttributeValue) -> None:
        """Set an attribute on the open span (and on later spans of this block)."""
        self._attributes[key] = value
        if self._spans:
            self._spans[-1].set_attribute(key, value)

    def set_step(self, step: int) -> None:
        """Set the step attribute of this block (e.g. the checkpoint step, once loaded)."""
        if self._step_key is None:
            log_once("SpanBlock.set_step", "set_step() on a span without a step attribute")
            return
        self.set_attribute(self._step_key, int(step))


class CheckpointSave(SpanBlock):
    """``ett.checkpoint.save`` (the blocking part) with :meth:`persist` for the async part."""

    def __init__(self, session: Session, step: int, mode: str, nbytes: int | None) -> None:
        attributes: dict[str, AttributeValue] = {
            semconv.CHECKPOINT_STEP: int(step),
            semconv.CHECKPOINT_MODE: str(mode),
        }
        if nbytes is not None:
            attributes[semconv.CHECKPOINT_BYTES] = int(nbytes)
        super().__init__(
            session, semconv.SPAN_CHECKPOINT_SAVE, attributes, step_key=semconv.CHECKPOINT_STEP
        )
        self.step = int(step)

    def __enter__(self) -> CheckpointSave:
        super().__enter__()
        self._session._note_save_start(self.step, self.start_ns)
        return self

    def set_bytes(self, nbytes: int) -> None:
        """Set ``ett.checkpoint.bytes`` once the size is known."""
        self.set_attribute(semconv.CHECKPOINT_BYTES, int(nbytes))

    def persist(self, future: Any) -> None:
        """Time the background part: ``ett.checkpoint.persist`` from this save's start until
        ``future`` completes (see :meth:`instrument.Session.checkpoint_persist`)."""
        self._session.checkpoint_persist(self.step, future, start_ns=self.start_ns or None)


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


def attempt_parent(identity: Identity) -> Context:
    """A remote parent whose trace id is derived from (job, attempt): every rank of one attempt
    shares one trace. It is marked sampled so parent-based samplers keep the spans."""
    digest = hashlib.sha256(f"{identity.job_id}\0{identity.attempt}".encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    parent = SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    return trace.set_span_in_context(trace.NonRecordingSpan(parent))
