"""The store's reads across jobs: the fleet over time, the filter values, the checkpoint advice,
lost time and the stored summaries the alerts read. Part of :class:`ett_collector.storage.Store`
(its base class), kept apart from the per-job repository."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import ColumnElement, Engine, func, select

from ett_collector.schemas import LostTimeJSON
from ett_collector.storage import _advice, _lost_time, _timeseries
from ett_collector.storage._tables import job_figures, segments


def job_summaries(engine: Engine, since: float | None) -> list[dict[str, Any]]:
    """The stored summary (``JobSummary.to_dict()``) of every computed job whose end is after
    ``since`` (None: all), by end then job id."""
    fig = job_figures.c
    query = select(fig.summary).order_by(fig.end, fig.job_id)
    if since is not None:
        query = query.where(fig.end > since)
    with engine.connect() as conn:
        rows = list(conn.execute(query).scalars())
    if not rows:
        return []
    summaries: list[dict[str, Any]] = json.loads("[" + ",".join(rows) + "]")  # one parse
    return summaries


def _ended_after(since: float | None) -> ColumnElement[bool]:
    """Segments of the jobs whose stored end is after ``since`` (None: of every computed job).
    The jobs are found by ``ix_job_figures_end`` and their segments by the primary key, so a
    read of the last days costs those days, not every segment kept (a join let SQLite scan
    ``segments`` whole and filter by end afterwards)."""
    fig = job_figures.c
    jobs = select(fig.job_id) if since is None else select(fig.job_id).where(fig.end > since)
    return segments.c.job_id.in_(jobs)


def first_startups(engine: Engine, since: float | None) -> dict[str, dict[str, float]]:
    """Seconds of each component in the first attempt's start-up (attempt 0, ``startup``
    segments in the ``idle`` category: a start-up that failed is the failure's), by job, for
    every job whose stored end is after ``since`` (None: all). A start-up is whole once the
    attempt's first batch has come, while the job runs on: the alerts' earliest evidence of a
    slower start-up (``collector/alerts/_detect.py``)."""
    seg = segments.c
    seconds = func.sum((seg.end - seg.start) * seg.share)
    query = (
        select(seg.job_id, seg.component, seconds)
        .where(_ended_after(since), seg.attempt == 0, seg.kind == "startup", seg.category == "idle")
        .group_by(seg.job_id, seg.component)
    )
    out: dict[str, dict[str, float]] = {}
    with engine.connect() as conn:
        for job_id, component, total in conn.execute(query):
            if component is not None:
                out.setdefault(job_id, {})[component] = float(total or 0.0)
    return out


SAVE_GAP_S = 1e-6
"""Checkpoint cut-out pieces closer than this are one save (a save that an eval or a snapshot
split into pieces)."""


def checkpoint_saves(engine: Engine, since: float | None) -> dict[str, list[tuple[float, float]]]:
    """``(end, seconds)`` of every checkpoint save that blocked training (``cutout`` segments of
    component ``checkpoint``, touching pieces joined, their shares summed), by job and in
    order, for every job whose stored end is after ``since`` (None: all). A save is whole once
    it ended, while the job trains on: the alerts' earliest evidence of slower saves
    (``collector/alerts/_detect.py``)."""
    seg = segments.c
    query = (
        select(seg.job_id, seg.start, seg.end, seg.share)
        .where(_ended_after(since), seg.kind == "cutout", seg.component == "checkpoint")
        .order_by(seg.job_id, seg.seg, seg.part)
    )
    out: dict[str, list[tuple[float, float]]] = {}
    last: dict[str, float] = {}
    with engine.connect() as conn:
        for job_id, start, end, share in conn.execute(query):
            saves = out.setdefault(job_id, [])
            seconds = (float(end) - float(start)) * float(share)
            if saves and abs(float(start) - last[job_id]) <= SAVE_GAP_S:
                saves[-1] = (float(end), saves[-1][1] + seconds)
            else:
                saves.append((float(end), seconds))
            last[job_id] = float(end)
    return out


class FleetReads:
    """Reads over every job's stored figures (the Fleet page, the advice, lost time, alerts)."""

    _engine: Engine

    def fleet_overview(
        self,
        since: float,
        until: float,
        *,
        by: str,
        bucket: str | None,
        model: str | None,
        team: str | None,
        state: str | None,
        limit: int,
    ) -> dict[str, Any]:
        """The Fleet page's answer (:func:`ett_collector.storage._timeseries.fleet_overview`).

        Raises:
            ValueError: for an unknown ``by`` or ``bucket``.
        """
        return _timeseries.fleet_overview(
            self._engine, since, until, by, bucket, model, team, state, limit
        )

    def facets(self) -> dict[str, list[str]]:
        """``{"models": [...], "teams": [...]}`` that computed jobs name, sorted."""
        return _timeseries.facets(self._engine)

    def checkpoint_advice(
        self, since: float | None, model: str | None, team: str | None
    ) -> dict[str, Any]:
        """Checkpoint interval in use vs Young's optimum, per model (pooled) and per job
        (:func:`ett_collector.storage._advice.checkpoint_advice`)."""
        return _advice.checkpoint_advice(self._engine, since, model, team)

    def job_summaries(self, since: float | None = None) -> list[dict[str, Any]]:
        """:func:`job_summaries` of this store."""
        return job_summaries(self._engine, since)

    def lost_time(
        self, group_by: str, since: float | None = None, until: float | None = None
    ) -> list[LostTimeJSON]:
        """Idle and failure seconds by ``group_by`` (component, job, model or team), clipped to
        ``[since, until]``: rows ``{key, idle_s, failure_s, lost_s}``, largest ``lost_s`` first.

        Raises:
            ValueError: for another ``group_by``.
        """
        _lost_time.lost_time_statement(group_by, since, until)  # validate before connecting
        with self._engine.connect() as conn:
            return _lost_time.lost_time(conn, group_by, since, until)
