"""What a job's ranks did, as the read API answers it: the domain's :func:`job_activity` (pure:
spans in, records out, committed by the figures' rule) written as JSON-ready dicts.

``GET /api/v1/jobs/{id}/activity`` answers :func:`activity` of the job's stored spans.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from ..domain import SpanRecord, job_activity


def activity(spans: Iterable[SpanRecord]) -> dict[str, list[dict[str, Any]]]:
    """The job's start-up phases per rank, first batches, checkpoint saves (blocking, persist,
    committed), restores, compiles (cache hit or miss) and failures, each in time order: one
    JSON object per record of :class:`ett_collector.domain.Activity`, its fields in their order.
    """
    found = job_activity(spans)
    return {part.name: [_json(row) for row in getattr(found, part.name)] for part in fields(found)}


def _json(row: Any) -> dict[str, Any]:
    return {f.name: getattr(row, f.name) for f in fields(row)}
