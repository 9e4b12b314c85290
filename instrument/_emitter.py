"""The span emitter: starts and ends the spans of one attempt under its ``ett.attempt`` span.

It is the one object that talks to the OpenTelemetry tracer. The session, its span scopes
(:mod:`ett._spans`), the persist tracker and the compile hooks all go through it, typed by
the narrow :class:`ett._spans.SpanSink` protocol. No method raises.
"""

from __future__ import annotations

import hashlib
import time

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN, Span, SpanContext, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from ._config import Identity
from ._errors import log_once, never_raises
from ._failure import error_type


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


class SpanEmitter:
    """Spans of one attempt: every span is a child of the root (the ``ett.attempt`` span) once
    :meth:`open_root` ran, and of the attempt's derived trace before. A disabled emitter (or one
    that is :meth:`close`-d) starts only invalid spans, which record nothing."""

    def __init__(
        self,
        tracer: trace.Tracer,
        identity: Identity,
        *,
        span_identity: bool = False,
        enabled: bool = True,
    ) -> None:
        self._tracer = tracer
        self._extra: dict[str, AttributeValue] = (
            dict(identity.attributes()) if span_identity else {}
        )
        self._context: Context | None = attempt_parent(identity) if enabled else None
        self._closed = False

    @property
    def enabled(self) -> bool:
        """False when this emitter records nothing."""
        return self._context is not None

    def open_root(self, name: str, start_ns: int) -> Span:
        """Start the root span (``ett.attempt``); every later span is its child."""
        root = self.start(name, {}, start_ns)
        if self._context is not None and root is not INVALID_SPAN:
            self._context = trace.set_span_in_context(root, self._context)
        return root

    def close(self) -> None:
        """The attempt ended: later :meth:`start` calls return an invalid span."""
        self._closed = True

    def start(
        self, name: str, attributes: dict[str, AttributeValue], start_ns: int | None = None
    ) -> Span:
        """Start span ``name`` (identity attributes added when the provider's resource lacks
        them); an invalid span when disabled, closed, or the tracer fails."""
        if self._closed or self._context is None:
            return INVALID_SPAN
        return self._start(name, attributes, start_ns)

    def _start(
        self, name: str, attributes: dict[str, AttributeValue], start_ns: int | None
    ) -> Span:
        try:
            attrs = {**self._extra, **attributes} if self._extra else attributes
            return self._tracer.start_span(
                name, context=self._context, attributes=attrs, start_time=start_ns
            )
        except Exception:
            log_once("Session.start_span", "could not start span %s", name, exc_info=True)
            return INVALID_SPAN

    @never_raises("Session.end_span", None)
    def end(
        self, span: Span | None, exc: BaseException | None = None, end_ns: int | None = None
    ) -> None:
        """End ``span`` (at ``end_ns``, else now); with ``exc``: status ERROR and the exception
        recorded on it."""
        if span is None:
            return
        if exc is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, error_type(exc)))
        span.end(end_time=end_ns)

    def instant(
        self,
        name: str,
        attributes: dict[str, AttributeValue],
        start_ns: int | None = None,
        end_ns: int | None = None,
        *,
        after_close: bool = False,
    ) -> None:
        """A span from ``start_ns`` (default: ``end_ns``) to ``end_ns`` (default: now).
        ``after_close``: emitted even after :meth:`close` (a hang recorded on the way out)."""
        end_ns = end_ns or time.time_ns()
        if self._context is None or (self._closed and not after_close):
            return
        self.end(self._start(name, attributes, start_ns or end_ns), end_ns=end_ns)
