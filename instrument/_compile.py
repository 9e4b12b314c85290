"""Dynamo compile callbacks to ``ett.compile`` spans (used by :mod:`ett.torch_hooks`).

Dynamo runs the start callbacks when the outermost compilation starts and the end callbacks when
it ends; it appends each frame's ``CompilationMetrics`` record just *after* the end callbacks. So
a span is ended (at the end-callback instant) a moment later: by a short timer, by the next
compilation's start, or by the session's end, whichever comes first. The timer waits for the
record: while none has appeared it looks again, with a growing delay, for up to
``_FINALIZE_PATIENCE_S`` (a loaded machine can take longer than the first delay to append it).
torch is imported lazily.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from opentelemetry.trace import Span
from opentelemetry.util.types import AttributeValue

from . import semconv
from ._errors import log_once
from ._spans import SpanSink

_CACHE_COUNTERS = ("inductor_fx_{}_cache_{}_count", "aotautograd_{}_cache_{}_count")
_TRIGGERS = frozenset(t.value for t in semconv.CompileTriggerValues)
_FINALIZE_DELAY_S = 0.25
_FINALIZE_PATIENCE_S = 10.0


def cache_status(hits: int, misses: int) -> str:
    """``ett.compile.cache`` from cache lookups: hit, miss, partial, or off (no lookup)."""
    values = semconv.CompileCacheValues
    if hits and misses:
        return values.PARTIAL.value
    if hits:
        return values.HIT.value
    return values.MISS.value if misses else values.OFF.value


def _metrics() -> list[Any] | None:
    try:
        from torch._dynamo.utils import get_compilation_metrics
    except ImportError:
        log_once("torch.metrics", "torch has no get_compilation_metrics: no frames/cache")
        return None
    return list(get_compilation_metrics())


def _since(marker: Any) -> list[Any] | None:
    records = _metrics()
    if records is None or marker is None:
        return records
    for index in range(len(records) - 1, -1, -1):
        if records[index] is marker:
            return records[index + 1 :]
    return records  # the marker left the bounded history: count what is there


class CompileTracker:
    """Turns dynamo's start/end callbacks into ``ett.compile`` spans, emitted through ``spans``."""

    def __init__(self, spans: SpanSink) -> None:
        self._spans = spans
        self._lock = threading.Lock()
        self._open: tuple[Span, Any] | None = None
        self._pending: tuple[Span, Any, int] | None = None

    def on_start(self, args: Any) -> None:
        try:
            self.finalize()
            trigger = getattr(getattr(args, "callback_trigger", None), "name", "")
            attrs: dict[str, AttributeValue] = {}
            if trigger.lower() in _TRIGGERS:
                attrs[semconv.COMPILE_TRIGGER] = trigger.lower()
            records = _metrics()
            marker = records[-1] if records else None
            span = self._spans.start(semconv.SPAN_COMPILE, attrs, time.time_ns())
            with self._lock:
                self._open = (span, marker)
        except Exception:
            log_once("torch.compile_start", "compile start callback failed", exc_info=True)

    def on_end(self, args: Any) -> None:
        now = time.time_ns()
        with self._lock:
            if self._open is None:
                return
            span, marker = self._open
            self._open = None
            self._pending = (span, marker, now)
        self._arm(span, _FINALIZE_DELAY_S, 0.0)

    def _arm(self, span: Span, delay_s: float, waited_s: float) -> None:
        try:
            timer = threading.Timer(delay_s, self._on_timer, (span, delay_s, waited_s + delay_s))
            timer.daemon = True
            timer.start()
        except Exception:  # no thread: the next compilation or the session's end finalizes
            log_once("torch.compile_end", "compile end timer failed", exc_info=True)

    def _on_timer(self, span: Span, delay_s: float, waited_s: float) -> None:
        """End ``span`` once dynamo has appended its record (or patience ran out); a span that
        the next compilation or the session already ended is left alone."""
        with self._lock:
            pending = self._pending
        if pending is None or pending[0] is not span:
            return
        if waited_s < _FINALIZE_PATIENCE_S:
            try:
                records = _since(pending[1])
            except Exception:
                records = None
            if records is not None and not records:  # not appended yet: look again later
                self._arm(span, min(delay_s * 2, _FINALIZE_PATIENCE_S - waited_s), waited_s)
                return
        self.finalize(span)

    def finalize(self, span: Span | None = None) -> None:
        """End the last compilation's span (only if it is ``span``, when given), with its frames
        and cache outcome."""
        with self._lock:
            pending = self._pending
            if pending is None or (span is not None and pending[0] is not span):
                return
            self._pending = None
        span, marker, end_ns = pending
        try:
            records = _since(marker)
            if records is not None:
                hits = misses = 0
                for record in records:
                    for pattern in _CACHE_COUNTERS:
                        for where in ("local", "remote"):
                            hits += getattr(record, pattern.format(where, "hit"), 0) or 0
                            misses += getattr(record, pattern.format(where, "miss"), 0) or 0
                frames = sum(1 for r in records if getattr(r, "frame_key", None) is not None)
                span.set_attribute(semconv.COMPILE_FRAMES, frames)
                span.set_attribute(semconv.COMPILE_CACHE, cache_status(hits, misses))
        except Exception:
            log_once("torch.compile_metrics", "reading compile metrics failed", exc_info=True)
        self._spans.end(span, end_ns=end_ns)
