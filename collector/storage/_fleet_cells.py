"""The Fleet page's rollup, kept with each job's segments: per job its totals and its seconds per
hour and per day (``job_totals``, ``job_cells``), and the same summed over the fleet per model,
team and state (``fleet_cells``), so a fleet answer reads a few thousand cells instead of every
segment of the window (``collector/storage/_fleet_scan.py``).

A segment row ``[start, end]`` weighs ``(end - start) * share`` seconds, cut at bucket edges as
the fleet answer cuts it, and ``seconds * ranks`` GPU-seconds (``ranks``: the attempt's ranks in
the job's summary, at least 1). A job's save replaces its own cells and adds the difference to
the fleet cells (only the cells that changed: a live job's recompute touches its last hour and
day), in the save's transaction; fleet cells are updated in key order, so concurrent saves of
different jobs on PostgreSQL wait for each other instead of deadlocking.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from collector.domain.model import Category
from collector.storage._tables import fleet_cells, job_cells, job_totals

HOUR, DAY = 3600, 86400
GRAINS = (HOUR, DAY)
"""The cell sizes kept (seconds); a day is 24 whole hours, so hour cells fill partial days."""

_PRODUCTIVE = Category.PRODUCTIVE.value

CellKey = tuple[int, float, str, str]
"""``(grain, t, category, component)`` of one job's cell."""

SegmentRow = tuple[int, float, float, str, str | None, float]
"""``(attempt, start, end, category, component, share)`` of one segment row."""


def split(start: float, end: float, size: int) -> Iterable[tuple[float, float]]:
    """``(bucket start, seconds)`` of ``[start, end]`` in each bucket of ``size`` seconds."""
    k = math.floor(start / size)
    while k * size < end:
        lo, hi = max(start, k * size), min(end, (k + 1) * size)
        if hi > lo:
            yield float(k * size), hi - lo
        k += 1


def component_key(category: str, component: str | None) -> str:
    """The cell's component: ``''`` for productive time, ``other`` for lost time naming none."""
    return "" if category == _PRODUCTIVE else component or "other"


def job_cells_of(
    rows: Iterable[SegmentRow], ranks: Mapping[int, int]
) -> tuple[dict[CellKey, list[float]], tuple[float, float, float, float, float] | None]:
    """A job's cells ``key -> [seconds, GPU-seconds]`` and its totals ``(first, last, seconds,
    lost seconds, lost GPU-seconds)`` (None without segments)."""
    cells: dict[CellKey, list[float]] = {}
    first, last, seconds, lost, lost_gpu = math.inf, -math.inf, 0.0, 0.0, 0.0
    for attempt, start, end, category, component, share in rows:
        first, last = min(first, start), max(last, end)
        r = max(1, ranks.get(attempt, 1))
        comp = component_key(category, component)
        weight = (end - start) * share
        seconds += weight
        if category != _PRODUCTIVE:
            lost += weight
            lost_gpu += weight * r
        for grain in GRAINS:
            for t, part in split(start, end, grain):
                cell = cells.setdefault((grain, t, category, comp), [0.0, 0.0])
                cell[0] += part * share
                cell[1] += part * share * r
    if first > last:
        return cells, None
    return cells, (first, last, seconds, lost, lost_gpu)


def replace_job(
    conn: Connection,
    job_id: str,
    identity: tuple[str | None, str | None, str],
    rows: Iterable[SegmentRow],
    ranks: Mapping[int, int],
) -> None:
    """Store the cells of ``job_id`` (``identity``: model, team, state) in place of its old
    ones, and move the fleet cells by the difference."""
    cells, totals = job_cells_of(rows, ranks)
    jc = job_cells.c
    old_identity = conn.execute(
        select(job_totals.c.model, job_totals.c.team, job_totals.c.state).where(
            job_totals.c.job_id == job_id
        )
    ).first()
    old: dict[CellKey, tuple[float, float]] = {}
    if old_identity is not None:
        for g, t, cat, comp, sec, gpu in conn.execute(
            select(jc.grain, jc.t, jc.category, jc.component, jc.seconds, jc.gpu_s).where(
                jc.job_id == job_id
            )
        ):
            old[(g, t, cat, comp)] = (sec, gpu)
    new = {k: (v[0], v[1]) for k, v in cells.items()}
    if old_identity is not None and tuple(old_identity) == identity and old == new:
        return  # nothing moved (a recompute that found the same figures)
    deltas: dict[tuple[Any, ...], list[float]] = {}
    if old_identity is not None:
        _add(deltas, tuple(old_identity), old, -1)
    _add(deltas, identity, new, +1)
    _move_fleet(conn, deltas)
    conn.execute(delete(job_cells).where(jc.job_id == job_id))
    if new:
        conn.execute(
            job_cells.insert(),
            [
                {
                    "job_id": job_id,
                    "grain": g,
                    "t": t,
                    "category": cat,
                    "component": comp,
                    "seconds": v[0],
                    "gpu_s": v[1],
                }
                for (g, t, cat, comp), v in new.items()
            ],
        )
    conn.execute(delete(job_totals).where(job_totals.c.job_id == job_id))
    if totals is not None:
        first, last, seconds, lost, lost_gpu = totals
        model, team, state = identity
        conn.execute(
            job_totals.insert(),
            {
                "job_id": job_id,
                "model": model,
                "team": team,
                "state": state,
                "first": first,
                "last": last,
                "seconds": seconds,
                "lost_s": lost,
                "lost_gpu_s": lost_gpu,
            },
        )


def _add(
    deltas: dict[tuple[Any, ...], list[float]],
    identity: Sequence[Any],
    cells: Mapping[CellKey, tuple[float, float]],
    sign: int,
) -> None:
    model, team, state = identity
    for (g, t, cat, comp), (sec, gpu) in cells.items():
        d = deltas.setdefault((g, t, model or "", team or "", state, cat, comp), [0.0, 0.0, 0])
        d[0] += sign * sec
        d[1] += sign * gpu
        d[2] += sign


_KEY = ("grain", "t", "model", "team", "state", "category", "component")


def _move_fleet(conn: Connection, deltas: Mapping[tuple[Any, ...], list[float]]) -> None:
    """Add each delta to its fleet cell (created at need), in key order; drop cells left with no
    job."""
    moves = [(k, d) for k, d in sorted(deltas.items()) if d[2] != 0 or d[0] != 0 or d[1] != 0]
    if not moves:
        return
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = dialect.insert(fleet_cells)
    stmt = stmt.on_conflict_do_update(
        index_elements=list(_KEY),
        set_={
            "seconds": fleet_cells.c.seconds + stmt.excluded.seconds,
            "gpu_s": fleet_cells.c.gpu_s + stmt.excluded.gpu_s,
            "jobs": fleet_cells.c.jobs + stmt.excluded.jobs,
        },
    )
    conn.execute(
        stmt,
        [
            dict(zip(_KEY, k, strict=True)) | {"seconds": d[0], "gpu_s": d[1], "jobs": int(d[2])}
            for k, d in moves
        ],
    )
    emptied = [k for k, d in moves if d[2] < 0]
    if emptied:
        c = fleet_cells.c
        conn.execute(
            delete(fleet_cells).where(
                and_(*(c[name] == bindparam(f"k_{name}") for name in _KEY), c.jobs <= 0)
            ),
            [{f"k_{name}": v for name, v in zip(_KEY, k, strict=True)} for k in emptied],
        )
