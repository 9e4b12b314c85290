"""Test helpers: build spans of a job by hand (shared by the domain tests)."""

from __future__ import annotations

import itertools
from typing import Any

from collector.domain import SpanRecord
from instrument import semconv as sc

_ids = itertools.count(1)


def span(
    name: str,
    start: float,
    end: float,
    attempt: int = 0,
    rank: int = 0,
    job: str = "j",
    **attrs: Any,
) -> SpanRecord:
    """One span; keyword attributes use ``_`` for ``.`` after an ``ett_`` prefix is dropped:
    pass real keys through ``attrs`` as ``{"ett.x": v}`` with ``**{...}``."""
    merged: dict[str, Any] = {sc.JOB_ID: job, sc.ATTEMPT: attempt, sc.RANK: rank}
    merged.update(attrs)
    return SpanRecord(
        trace_id=f"{attempt:032x}",
        span_id=f"{next(_ids):016x}",
        name=name,
        start=float(start),
        end=float(end),
        job_id=job,
        attempt=attempt,
        rank=rank,
        attributes=merged,
    )


def phase(name: str, start: float, end: float, **kw: Any) -> SpanRecord:
    return span(sc.startup_span_name(name), start, end, **kw)


def first_batch(t: float, **kw: Any) -> SpanRecord:
    return span(sc.SPAN_FIRST_BATCH, t, t, **kw)


def window(start: float, end: float, **kw: Any) -> SpanRecord:
    return span(sc.SPAN_TRAIN_WINDOW, start, end, **kw)


def save(step: int, start: float, end: float, mode: str = "sync", **kw: Any) -> SpanRecord:
    return span(
        sc.SPAN_CHECKPOINT_SAVE,
        start,
        end,
        **{sc.CHECKPOINT_STEP: step, sc.CHECKPOINT_MODE: mode},
        **kw,
    )


def persist(step: int, start: float, end: float, **kw: Any) -> SpanRecord:
    return span(sc.SPAN_CHECKPOINT_PERSIST, start, end, **{sc.CHECKPOINT_STEP: step}, **kw)


def attempt_end(start: float, end: float, reason: str, cause: str | None = None, **kw: Any):
    attrs: dict[str, Any] = {sc.ATTEMPT_END_REASON: reason}
    if cause:
        attrs[sc.FAILURE_CAUSE] = cause
    return span(sc.SPAN_ATTEMPT, start, end, **attrs, **kw)


def per_component(segments, kind=None, attempt=None) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in segments:
        if kind is not None and s.kind != kind:
            continue
        if attempt is not None and s.attempt != attempt:
            continue
        for c, v in s.shares().items():
            out[c] = out.get(c, 0.0) + v
    return out
