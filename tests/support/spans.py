"""Build a job's spans by hand: one ``span`` maker and one helper per span of the vocabulary.

Identity (``ett.job.id``, ``ett.attempt``, ``ett.rank``) goes into the attributes, as the OTLP
decoder would merge it from the resource. Span ids are unique within the test session unless given.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from ett import semconv as sc
from ett_collector.domain import Segment, SpanRecord

_ids = itertools.count(1)


def span(
    name: str,
    start: float,
    end: float,
    attempt: int = 0,
    rank: int = 0,
    job: str = "j",
    *,
    span_id: int | None = None,
    trace_id: str | None = None,
    **attrs: Any,
) -> SpanRecord:
    """One span. Keyword attributes are passed with their real keys: ``**{sc.STEP: 3}``."""
    merged: dict[str, Any] = {sc.JOB_ID: job, sc.ATTEMPT: attempt, sc.RANK: rank}
    merged.update(attrs)
    return SpanRecord(
        trace_id=trace_id or f"{attempt:032x}",
        span_id=f"{span_id if span_id is not None else next(_ids):016x}",
        name=name,
        start=float(start),
        end=float(end),
        job_id=job,
        attempt=attempt,
        rank=rank,
        attributes=merged,
    )


def phase(name: str, start: float, end: float, **kw: Any) -> SpanRecord:
    """A start-up phase span (``ett.startup.<name>``)."""
    return span(sc.startup_span_name(name), start, end, **kw)


def first_batch(t: float, **kw: Any) -> SpanRecord:
    """The rank's first batch, at instant ``t``."""
    return span(sc.SPAN_FIRST_BATCH, t, t, **kw)


def window(start: float, end: float, **kw: Any) -> SpanRecord:
    """One training window (the heartbeat)."""
    return span(sc.SPAN_TRAIN_WINDOW, start, end, **kw)


def save(step: int, start: float, end: float, mode: str = "sync", **kw: Any) -> SpanRecord:
    """The blocking part of a checkpoint save."""
    attrs = {sc.CHECKPOINT_STEP: step, sc.CHECKPOINT_MODE: mode}
    return span(sc.SPAN_CHECKPOINT_SAVE, start, end, **attrs, **kw)


def persist(step: int, start: float, end: float, **kw: Any) -> SpanRecord:
    """The background part of an async save, ending when it is committed."""
    return span(sc.SPAN_CHECKPOINT_PERSIST, start, end, **{sc.CHECKPOINT_STEP: step}, **kw)


def failure(t: float, cause: str, **kw: Any) -> SpanRecord:
    """A failure event (``ett.failure``) at instant ``t`` with its cause."""
    attrs: dict[str, Any] = {sc.FAILURE_CAUSE: cause}
    return span(sc.SPAN_FAILURE, t, t, **attrs, **kw)


def data_wait(start: float, end: float, **kw: Any) -> SpanRecord:
    """A training loop's wait for its next batch (a data stall)."""
    return span(sc.SPAN_DATA_WAIT, start, end, **kw)


def blocking(
    name: str, start: float, end: float, component: str | None = None, **kw: Any
) -> SpanRecord:
    """A user-named blocking event, charged to ``component`` when given."""
    attrs: dict[str, Any] = {sc.BLOCKING_NAME: name}
    if component:
        attrs[sc.COMPONENT] = component
    return span(sc.SPAN_BLOCKING, start, end, **attrs, **kw)


def shutdown(step: str, start: float, end: float, **kw: Any) -> SpanRecord:
    """One step of an attempt's shutdown (``ett.shutdown.<step>``)."""
    return span(sc.shutdown_span_name(step), start, end, **kw)


def attempt_end(
    start: float, end: float, reason: str, cause: str | None = None, **kw: Any
) -> SpanRecord:
    """The ``ett.attempt`` span with its end reason (and failure cause)."""
    attrs: dict[str, Any] = {sc.ATTEMPT_END_REASON: reason}
    if cause:
        attrs[sc.FAILURE_CAUSE] = cause
    return span(sc.SPAN_ATTEMPT, start, end, **attrs, **kw)


def per_component(
    segments: Iterable[Segment], kind: str | None = None, attempt: int | None = None
) -> dict[str, float]:
    """Seconds per component over ``segments`` (optionally of one kind and attempt)."""
    out: dict[str, float] = {}
    for s in segments:
        if kind is not None and s.kind != kind:
            continue
        if attempt is not None and s.attempt != attempt:
            continue
        for c, v in s.shares().items():
            out[c] = out.get(c, 0.0) + v
    return out
