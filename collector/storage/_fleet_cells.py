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

from sqlalchemy import Connection

from ett_collector.domain.model import Category

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


def _sql(ph: str) -> dict[str, str]:
    """The statements, with the driver's placeholder ``ph`` (plain SQL through the driver:
    a save runs them once per job, and SQLAlchemy's per-row parameter work cost more than the
    database's here)."""
    key = ", ".join(_KEY)
    marks = ", ".join([ph] * (len(_KEY) + 3))
    return {
        "identity": f"SELECT model, team, state FROM job_totals WHERE job_id = {ph}",
        "cells": f"SELECT grain, t, category, component, seconds, gpu_s FROM job_cells"
        f" WHERE job_id = {ph}",
        "move": f"INSERT INTO fleet_cells ({key}, seconds, gpu_s, jobs) VALUES ({marks})"
        f" ON CONFLICT ({key}) DO UPDATE SET seconds = fleet_cells.seconds + excluded.seconds,"
        " gpu_s = fleet_cells.gpu_s + excluded.gpu_s, jobs = fleet_cells.jobs + excluded.jobs",
        "drop": "DELETE FROM fleet_cells WHERE "
        + " AND ".join(f"{k} = {ph}" for k in _KEY)
        + " AND jobs <= 0",
        "delete_cells": f"DELETE FROM job_cells WHERE job_id = {ph}",
        "insert_cells": "INSERT INTO job_cells (job_id, grain, t, category, component, seconds,"
        f" gpu_s) VALUES ({', '.join([ph] * 7)})",
        "delete_totals": f"DELETE FROM job_totals WHERE job_id = {ph}",
        "insert_totals": 'INSERT INTO job_totals (job_id, model, team, state, "first", "last",'
        f" seconds, lost_s, lost_gpu_s) VALUES ({', '.join([ph] * 9)})",
    }


_KEY = ("grain", "t", "model", "team", "state", "category", "component")
_STATEMENTS = {"qmark": _sql("?"), "format": _sql("%s"), "pyformat": _sql("%s")}


def replace_job(
    conn: Connection,
    job_id: str,
    identity: tuple[str | None, str | None, str],
    rows: Iterable[SegmentRow],
    ranks: Mapping[int, int],
) -> None:
    """Store the cells of ``job_id`` (``identity``: model, team, state) in place of its old
    ones, and move the fleet cells by the difference."""
    sql = _STATEMENTS[conn.dialect.paramstyle]
    run = conn.exec_driver_sql
    cells, totals = job_cells_of(rows, ranks)
    found = run(sql["identity"], (job_id,)).first()
    old_identity = None if found is None else (found[0], found[1], found[2])
    old: dict[CellKey, tuple[float, float]] = {}
    if old_identity is not None:
        for g, t, cat, comp, sec, gpu in run(sql["cells"], (job_id,)):
            old[(g, t, cat, comp)] = (sec, gpu)
    new = {k: (v[0], v[1]) for k, v in cells.items()}
    if old_identity == identity and old == new:
        return  # nothing moved (a recompute that found the same figures)
    deltas: dict[tuple[Any, ...], list[float]] = {}
    if old_identity is not None:
        _add(deltas, old_identity, old, -1)
    _add(deltas, identity, new, +1)
    moves = [(k, d) for k, d in sorted(deltas.items()) if d[2] != 0 or d[0] != 0 or d[1] != 0]
    if moves:  # in key order: concurrent saves on PostgreSQL queue instead of deadlocking
        run(sql["move"], [(*k, d[0], d[1], int(d[2])) for k, d in moves])
        emptied = [k for k, d in moves if d[2] < 0]
        if emptied:
            run(sql["drop"], emptied)
    run(sql["delete_cells"], (job_id,))
    if new:
        run(sql["insert_cells"], [(job_id, *k, v[0], v[1]) for k, v in new.items()])
    run(sql["delete_totals"], (job_id,))
    if totals is not None:
        run(sql["insert_totals"], (job_id, *identity, *totals))


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
