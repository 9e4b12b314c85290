"""The fleet over time: ETT, idle and failure per time bucket, lost GPU-hours by component, and
the worst jobs of a window, summed in the database (:mod:`ett_collector.storage._fleet_scan`).

Seconds are clipped to the window and to each bucket (a segment across midnight counts on both
days). GPU-seconds are seconds times the ranks of the segment's attempt (the ``ranks`` of that
attempt in the job's summary; at least 1), so a 64-rank job's idle minute weighs 64 times a
1-rank job's.
"""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import Engine, select

from ett_collector.domain.model import Category
from ett_collector.storage._fleet_cells import DAY, HOUR
from ett_collector.storage._fleet_cells import split as _split
from ett_collector.storage._fleet_scan import CellScan, FleetScan
from ett_collector.storage._tables import job_figures

FLEET_BY = ("fleet", "model", "team")
"""What the ETT series can be split by (``fleet``: one series for the whole fleet)."""


def bucket_seconds(since: float, until: float, bucket: str | None) -> int:
    """``hour`` or ``day`` (by default: hours for windows up to two days, else days)."""
    if bucket is None or bucket == "":
        return 3600 if until - since <= 2 * 86400 else 86400
    if bucket == "hour":
        return 3600
    if bucket == "day":
        return 86400
    raise ValueError(f"bucket must be hour or day; got {bucket!r}")


def _pcts(row: dict[str, Any]) -> dict[str, Any]:
    wall = row["productive_s"] + row["idle_s"] + row["failure_s"]
    row["wall_s"] = wall
    for cat in ("ett", "idle", "failure"):
        seconds = row["productive_s" if cat == "ett" else f"{cat}_s"]
        row[f"{cat}_pct"] = 100.0 * seconds / wall if wall > 0 else None
    return row


def fleet_overview(
    engine: Engine,
    since: float,
    until: float,
    by: str = "fleet",
    bucket: str | None = None,
    model: str | None = None,
    team: str | None = None,
    state: str | None = None,
    limit: int = 10,
) -> dict[str, Any]:
    """The Fleet page's data in one answer (sizes depend on buckets and keys, not on jobs):

    - ``series``: per bucket ``t`` and ``key`` (model, team, or None for the whole fleet):
      productive/idle/failure seconds, their percentages of the bucket's job seconds;
    - ``lost_by_component``: per bucket and component, idle and failure seconds and lost GPU-hours;
    - ``components``: the same summed over the window, largest lost GPU-hours first;
    - ``worst_jobs``: the ``limit`` jobs that lost the most GPU-hours in the window.

    Raises:
        ValueError: for an unknown ``by`` or ``bucket``.
    """
    if by not in FLEET_BY:
        raise ValueError(f"by must be one of {', '.join(FLEET_BY)}; got {by!r}")
    size = bucket_seconds(since, until, bucket)
    tally = _Tally(by)
    with engine.connect() as conn:
        cells = CellScan(conn, model, team, state)
        edges: list[FleetScan] = []
        for grain, a, b in pieces(since, until, size):
            if grain:  # whole hours or days: the rollup
                _add_rollup(tally, cells, grain, a, b, size)
            elif ids := cells.overlapping(a, b):  # a partial hour: the segments of its few jobs
                scan = FleetScan(conn, a, b, size, model, team, state, ids)
                _add_edge(tally, scan, size)
                edges.append(scan)
        worst = _worst(cells, edges, since, until, size, max(limit, 0))
    return {
        "since": since,
        "until": until,
        "bucket_s": size,
        "by": by,
        "series": tally.series_rows(),
        "lost_by_component": tally.lost_rows(),
        "components": tally.component_rows(),
        "worst_jobs": worst,
    }


class _Tally:
    """The window's sums, in the order the pieces are read: per ``(bucket, key)`` productive,
    idle and failure seconds; per ``(bucket, component)`` idle and failure seconds and lost
    GPU-seconds (``key``: the model or team ``by`` names, None for the whole fleet)."""

    def __init__(self, by: str) -> None:
        self.by = by
        self.series: dict[tuple[float, str | None], dict[str, Any]] = {}
        self.lost: dict[tuple[float, str], list[float]] = {}

    def add(
        self,
        t: float,
        mdl: str | None,
        tm: str | None,
        category: str,
        component: str | None,
        seconds: float,
        gpu_s: float,
    ) -> None:
        """``seconds`` of ``category`` in bucket ``t``; idle and failure ones also by component,
        with their ``gpu_s`` (component None: ``other``)."""
        key = mdl if self.by == "model" else tm if self.by == "team" else None
        row = self.series.setdefault(
            (t, key), {"t": t, "key": key, "productive_s": 0.0, "idle_s": 0.0, "failure_s": 0.0}
        )
        row[f"{category}_s"] += seconds
        if category == Category.PRODUCTIVE.value:
            return
        cell = self.lost.setdefault((t, component or "other"), [0.0, 0.0, 0.0])
        cell[0 if category == Category.IDLE.value else 1] += seconds
        cell[2] += gpu_s

    def series_rows(self) -> list[dict[str, Any]]:
        """The series by bucket, then key, with ``wall_s`` and the percentages."""
        keys = sorted(self.series, key=lambda k: (k[0], k[1] or ""))
        return [_pcts(self.series[k]) for k in keys]

    def lost_rows(self) -> list[dict[str, Any]]:
        """Lost time per bucket and component, in that order; GPU-hours = GPU-seconds / 3600."""
        return [
            {
                "t": t,
                "component": comp,
                "idle_s": v[0],
                "failure_s": v[1],
                "lost_gpu_h": v[2] / 3600.0,
            }
            for (t, comp), v in sorted(self.lost.items())
        ]

    def component_rows(self) -> list[dict[str, Any]]:
        """Lost time per component over the window, largest lost GPU-hours first."""
        by_component: dict[str, list[float]] = {}
        for (_, comp), (idle, failure, gpu) in self.lost.items():
            total = by_component.setdefault(comp, [0.0, 0.0, 0.0])
            total[0] += idle
            total[1] += failure
            total[2] += gpu
        return [
            {
                "component": comp,
                "idle_s": v[0],
                "failure_s": v[1],
                "lost_s": v[0] + v[1],
                "lost_gpu_h": v[2] / 3600.0,
            }
            for comp, v in sorted(by_component.items(), key=lambda kv: (-kv[1][2], kv[0]))
        ]


def _add_rollup(tally: _Tally, cells: CellScan, grain: int, a: float, b: float, size: int) -> None:
    """Whole hours or days ``[a, b]`` from the rollup's cells, each in its bucket (all of it in
    one bucket when the piece lies inside one)."""
    k = math.floor(a / size)
    one = k * size if grain < size and b <= (k + 1) * size else None  # one bucket
    for t, mdl, tm, category, component, seconds, gpu_s in cells.cells(grain, a, b, one):
        at = float(math.floor(float(t) / size) * size)
        tally.add(
            at, mdl or None, tm or None, category, component or None, float(seconds), float(gpu_s)
        )


def _add_edge(tally: _Tally, scan: FleetScan, size: int) -> None:
    """A partial hour from its segments: those inside one bucket as summed by the database,
    those across buckets split here (GPU-seconds = seconds x ranks)."""
    for t, mdl, tm, category, component, ranks, seconds in scan.in_buckets():
        tally.add(
            float(t), mdl, tm, category, component, float(seconds), float(seconds) * float(ranks)
        )
    for a, b, category, component, share, mdl, tm, ranks in scan.crossing_rows():
        for t, seconds in _split(a, b, size):
            part = seconds * share
            tally.add(t, mdl, tm, category, component, part, part * float(ranks))


def pieces(since: float, until: float, size: int) -> list[tuple[int, float, float]]:
    """``[since, until]`` as ``(grain, a, b)`` pieces in order: whole days (when ``size`` is a
    day) and whole hours read from the rollup, and the partial hours at the edges (grain 0) read
    from the segments."""
    return _pieces(since, until, [g for g in (DAY, HOUR) if g <= size])


def _pieces(lo: float, hi: float, grains: list[int]) -> list[tuple[int, float, float]]:
    if hi <= lo:
        return []
    for i, g in enumerate(grains):
        a, b = math.ceil(lo / g) * g, math.floor(hi / g) * g
        if a < b:
            rest = grains[i + 1 :]
            return [*_pieces(lo, a, rest), (g, float(a), float(b)), *_pieces(b, hi, rest)]
    return [(0, lo, hi)]


def _worst(
    cells: CellScan, edges: list[FleetScan], since: float, until: float, size: int, limit: int
) -> list[dict[str, Any]]:
    """The ``limit`` jobs that lost the most GPU-seconds in the window (ties: by job id; none
    that lost nothing there, which a probe found listed among the "worst"): the
    jobs wholly inside it from their totals, the few across its edges summed from their cells
    and the edges' segments."""
    sums: dict[str, list[float]] = {
        str(j): [float(w), float(lo), float(g)] for j, w, lo, g in cells.inside(since, until, limit)
    }
    across = cells.straddling(since, until)
    if across:
        part: dict[str, list[float]] = {j: [0.0, 0.0, 0.0] for j in across}
        rows: list[tuple[Any, ...]] = []
        for grain, a, b in pieces(since, until, size):
            if grain:
                rows += cells.job_sums(across, grain, a, b)
        for scan in edges:
            rows += [r for r in scan.per_job() if r[0] in part]
        for job_id, w, lo, g in rows:
            acc = part[str(job_id)]
            acc[0] += float(w)
            acc[1] += float(lo)
            acc[2] += float(g)
        sums |= part
    lost = (kv for kv in sums.items() if kv[1][2] > 0)  # a job that lost nothing is not worst
    top = sorted(lost, key=lambda kv: (-kv[1][2], kv[0]))[:limit]
    figures = cells.figures([j for j, _ in top], since, until) if top else {}
    out = []
    for job_id, (window_s, lost_s, gpu_s) in top:
        st, mdl, tm, ett = figures.get(job_id, (None, None, None, None))
        out.append(
            {
                "job_id": job_id,
                "state": st,
                "model": mdl,
                "team": tm,
                "ett_pct": ett,
                "window_s": window_s,
                "lost_s": lost_s,
                "lost_gpu_h": gpu_s / 3600.0,
            }
        )
    return out


def facets(engine: Engine) -> dict[str, list[str]]:
    """The models and teams that computed jobs name, sorted (for filters)."""
    fig = job_figures.c
    with engine.connect() as conn:
        models = conn.execute(select(fig.model).distinct().where(fig.model.is_not(None))).scalars()
        model_list = sorted(str(m) for m in models)
        teams = conn.execute(select(fig.team).distinct().where(fig.team.is_not(None))).scalars()
        team_list = sorted(str(t) for t in teams)
    return {"models": model_list, "teams": team_list}
