"""A job's performance figures and throughput series, beside its ETT figures (issue 26).

Read on demand (``GET /api/v1/jobs/{id}/performance?buckets=N``, ``ett report``): the job's raw
windows and its compacted ``window_series`` buckets become
:class:`~ett_collector.domain._points.Point` values, and the pure domain functions do the
rest. The block also carries the job's stored ETT productive seconds (``productive_s``), when it
has figures: what the loop figures' coverage is judged against.

A job whose raw spans retention pruned serves the figures kept when they went
(``collector/storage/_kept_performance.py``), the same as before; its series adds the kept
raw windows to its ``window_series`` buckets (none once those are pruned too).
"""

from __future__ import annotations

from typing import Any

from ..domain._performance import performance
from ..domain._throughput import MAX_BUCKETS, series
from ..storage._kept_performance import KeptPerformance
from ..storage._series import job_points, points_of_rows
from .query import NotFound, Query, QueryError

DEFAULT_BUCKETS = 60
"""Buckets of the throughput series unless asked for."""


def parse_buckets(text: str | None) -> int:
    """``?buckets=``: an integer from 1 to :data:`MAX_BUCKETS` (default :data:`DEFAULT_BUCKETS`)."""
    if text is None or text == "":
        return DEFAULT_BUCKETS
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_BUCKETS:
        raise QueryError(f"buckets must be an integer from 1 to {MAX_BUCKETS}, got {text!r}")
    return n


def job_performance(query: Query, job_id: str, buckets: int = DEFAULT_BUCKETS) -> dict[str, Any]:
    """The ``performance`` block of ``job_id`` with its ``series`` of ``buckets`` slices."""
    kept = query.store.kept_performance(job_id)
    if kept is not None:
        return _kept_block(query, job_id, kept, buckets)
    spans, rows = query.store.load_performance(job_id)
    if not spans and not rows:
        raise NotFound(f"no job {job_id!r}")
    points = job_points(spans, rows, query.store.compactor.retention_s)
    productive = None
    try:
        productive = float(query.job(job_id)["productive_s"])
    except (LookupError, RuntimeError, TypeError, ValueError):
        productive = None  # no figures yet
    block: dict[str, Any] = {"job_id": job_id, **performance(points, spans)}
    block["productive_s"] = productive
    block["series"] = series(points, buckets)
    return block


def _kept_block(query: Query, job_id: str, kept: KeptPerformance, buckets: int) -> dict[str, Any]:
    """The block of a job whose raw spans were pruned, from its kept figures."""
    block: dict[str, Any] = {"job_id": job_id, **kept.figures}
    block["productive_s"] = kept.productive_s
    points = points_of_rows(query.store.load_series(job_id)) + kept.windows  # job_points' order
    block["series"] = series(points, buckets)
    return block


def with_performance(query: Query, job: Any) -> Any:
    """``job`` (a job's figures) with its ``performance`` block (no series), for ``ett report``;
    unchanged when the job has no training window or the block cannot be computed."""
    try:
        block = job_performance(query, str(job["job_id"]), buckets=1)
    except (LookupError, ValueError):
        return job
    if not block.get("points"):
        return job  # no training window: nothing to say inside the loop
    block.pop("series", None)
    return {**job, "performance": block}
