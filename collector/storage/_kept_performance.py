"""The performance figures of a job whose raw spans retention deletes, kept as they were.

A job's "Inside the loop" figures (``GET /api/v1/jobs/{id}/performance``, ``ett report``, the
per-model view) are computed on read from its raw spans and its ``window_series`` rows
(:func:`inputs`). Retention deletes the raw spans: the stalls (checkpoint saves, evals, ...)
that keep interrupted windows out of the ideal step and the slow time, and the raw windows
compaction had not folded yet (a job's last 10 to 15 minutes). Computed from what was left, the
figures changed (slow time 71 -> 260 s for one job after ``ETT_RETAIN_SPANS=3d ett db prune``).

So in the transaction that marks a job for the deletion of its raw spans (``jobs.pruned`` 1,
``collector/storage/_retention.py``), before any span goes, retention keeps in
``job_performance`` what the views would compute then, from the same rows and by the same
functions (:func:`computed`):

- ``figures``: ``domain._performance.performance`` of the job (JSON), and the job's stored
  productive seconds beside it (``productive_s``; the base of ``slow_pct`` in figures kept
  before 2026-12-06, whose ``slow_pct`` was a share of it, not of ``stepping_s``);
- ``rank_samples_per_s`` and ``rank_s``: the job's facts in the per-model view;
- ``windows``: the points of its raw windows, which the throughput series adds to the
  ``window_series`` rows (JSON arrays, in the views' order; the last two values, the first
  window's start and the last window's end, are missing from those kept before migration 0012);
  NULL once retention deletes the runs and series as well (the series goes with them).

A job pruned before migration 0011 has no row; its views serve the job object's stored
``performance`` block (kept with its figures at its last save), which lists no per-attempt
straggler scores (:func:`load`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection

from ett_collector.domain._performance import performance
from ett_collector.domain._points import Point
from ett_collector.domain._throughput import rank_rate, rank_seconds
from ett_collector.domain.model import SpanRecord
from ett_collector.storage._rows import spans_from_rows
from ett_collector.storage._series import job_points, load_sql
from ett_collector.storage._sql import Statements

log = logging.getLogger("ett_collector")

_LOOP_FACTS = "loop_facts"
"""The stored summary's key of the job's loop facts (``_store.LOOP_FACTS``)."""


@dataclass(frozen=True)
class KeptPerformance:
    """What a job's performance views read once its raw spans are pruned."""

    figures: dict[str, Any]
    """``domain._performance.performance`` of the job, as computed from its raw spans."""
    productive_s: float | None
    """The job's stored productive seconds (the base of ``figures["slow_pct"]`` in figures
    kept before 2026-12-06, which have no ``stepping_s``)."""
    rank_samples_per_s: float | None
    """``domain._throughput.rank_rate`` of the job's points."""
    rank_s: float
    """``domain._throughput.rank_seconds`` of the job's points."""
    windows: list[Point]
    """The points of the job's raw windows (``_series.job_points`` of them alone: those past the
    retention line as buckets), which its views add to its ``window_series`` points (empty once
    its runs and series are pruned)."""


def _fetch(conn: Connection, sql: str, job_id: str) -> list[Any]:
    cursor = conn.connection.cursor()
    try:
        cursor.execute(sql, (job_id,))
        return list(cursor.fetchall())
    finally:
        cursor.close()


def inputs(conn: Connection, job_id: str) -> tuple[list[SpanRecord], list[Any]]:
    """A job's raw stored spans (windows one by one) and its ``window_series`` rows: the
    input of its performance figures, read in ``conn``'s transaction, which must see one
    snapshot (``_engine.read_snapshot``): under READ COMMITTED a compaction committed between
    the two statements shows its windows raw and folded, and the figures count them twice."""
    statements = Statements.for_paramstyle(conn.dialect.paramstyle)
    rows = _fetch(conn, statements.load_spans, job_id)
    return spans_from_rows(rows), _fetch(conn, load_sql(statements.ph), job_id)


def computed(
    spans: Sequence[SpanRecord],
    rows: Sequence[Any],
    productive_s: float | None,
    retention_s: float | None,
) -> KeptPerformance:
    """The kept figures of a job from its :func:`inputs`, as the views compute them
    (``retention_s``: the raw window retention, ``_series.job_points``)."""
    points = job_points(spans, rows, retention_s)
    return KeptPerformance(
        figures=performance(points, spans),
        productive_s=productive_s,
        rank_samples_per_s=rank_rate(points),
        rank_s=rank_seconds(points),
        windows=job_points(spans, (), retention_s),  # what the series rows do not hold
    )


def snapshot(conn: Connection, job_id: str, retention_s: float | None) -> KeptPerformance | None:
    """The job's kept figures now, read in ``conn``'s transaction (one snapshot, as for
    :func:`inputs`; None when they cannot be computed: logged, and the job's views then serve
    its stored block)."""
    ph = Statements.for_paramstyle(conn.dialect.paramstyle).ph
    summary = conn.exec_driver_sql(
        f"SELECT summary FROM job_figures WHERE job_id = {ph}", (job_id,)
    ).scalar()
    try:
        productive = _productive(json.loads(summary)) if summary is not None else None
        spans, rows = inputs(conn, job_id)
        return computed(spans, rows, productive, retention_s)
    except Exception:  # a bug here never keeps retention from its work
        log.exception("the performance figures of job %r could not be kept", job_id)
        return None


def _productive(summary: dict[str, Any]) -> float | None:
    """The job's stored productive seconds, read as the performance view reads them."""
    try:
        return float(summary["productive_s"])
    except (LookupError, TypeError, ValueError):
        return None


def _point_row(p: Point) -> list[Any]:
    return [
        p.attempt,
        p.rank,
        p.start,
        p.end,
        p.windows,
        p.steps,
        p.samples,
        p.seconds,
        p.timed_steps,
        p.timed_s,
        p.wait_s,
        p.first_start,
        p.last_end,
    ]


def keep(conn: Connection, job_id: str, kept: KeptPerformance, now: float) -> None:
    """Store ``kept`` for the job in ``conn``'s transaction (a row there already stays)."""
    ph = Statements.for_paramstyle(conn.dialect.paramstyle).ph
    conn.exec_driver_sql(
        "INSERT INTO job_performance (job_id, kept_at, productive_s, rank_samples_per_s,"
        f" rank_s, figures, windows) VALUES ({', '.join([ph] * 7)})"
        " ON CONFLICT (job_id) DO NOTHING",
        (
            job_id,
            now,
            kept.productive_s,
            kept.rank_samples_per_s,
            kept.rank_s,
            json.dumps(kept.figures, separators=(",", ":")),
            json.dumps([_point_row(p) for p in kept.windows], separators=(",", ":")),
        ),
    )


def forget_windows(conn: Connection, job_id: str) -> None:
    """Drop the job's kept raw windows (its runs and series are being deleted)."""
    ph = Statements.for_paramstyle(conn.dialect.paramstyle).ph
    conn.exec_driver_sql(
        f"UPDATE job_performance SET windows = NULL WHERE job_id = {ph}", (job_id,)
    )


def load(conn: Connection, job_id: str) -> KeptPerformance | None:
    """The job's kept figures; None while its raw spans are kept (or the job is unknown): its
    views compute from them. A job pruned without a row gets its stored block (module doc)."""
    ph = Statements.for_paramstyle(conn.dialect.paramstyle).ph
    row = conn.exec_driver_sql(
        "SELECT j.pruned, k.productive_s, k.rank_samples_per_s, k.rank_s, k.figures, k.windows"
        " FROM jobs j LEFT JOIN job_performance k ON k.job_id = j.job_id"
        f" WHERE j.job_id = {ph}",
        (job_id,),
    ).first()
    if row is None or not row[0]:
        return None
    _, productive, rate, rank_s, figures, windows = row
    if figures is not None:
        return KeptPerformance(
            figures=json.loads(figures),
            productive_s=productive,
            rank_samples_per_s=rate,
            rank_s=float(rank_s),
            windows=[Point(*p) for p in json.loads(windows)] if windows else [],
        )
    summary = conn.exec_driver_sql(
        f"SELECT summary FROM job_figures WHERE job_id = {ph}", (job_id,)
    ).scalar()
    return stored_block(json.loads(summary) if summary is not None else {})


def stored_block(summary: dict[str, Any]) -> KeptPerformance:
    """The kept figures of a job pruned before ``job_performance`` existed: the block its
    stored summary holds (``loop_facts.performance``: the figures less ``stragglers``), else
    the figures of no training window."""
    productive = _productive(summary)
    facts = summary.get(_LOOP_FACTS)
    block = facts.get("performance") if isinstance(facts, dict) else None
    figures = {**block, "stragglers": []} if isinstance(block, dict) else performance([], [])
    return KeptPerformance(figures, productive, None, 0.0, [])
