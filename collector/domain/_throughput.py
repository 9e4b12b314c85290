"""Throughput and step time over time, in a fixed number of buckets (issue 26).

Pure: the :class:`~ett_collector.domain._points.Point` values of a job in, ``buckets``
equal slices of ``[since, until]`` out (default: the points' first start to last end), so the
answer's size depends on the buckets asked for, not on the windows stored. A point's steps,
samples, seconds and compute time are shared among the buckets it overlaps in proportion to the
overlap, over the time its windows trained (``Point.trained``: a folded minute's first window's
start to its last window's end, not the whole minute, which smeared a loop that started at :15
over the 15 s before it and halved the rate of a minute it half filled). Per bucket:

- ``samples_per_s``: every rank's samples in it over its length (the job's throughput);
- ``step_s``: the median over the ranks present of their seconds over their steps;
- ``rank_samples_per_s``: ``min``/``median``/``max`` over the ranks present (the band a page
  draws for a large job), and ``ranks`` (each rank's) when the job has at most
  :data:`RANKS_LISTED` ranks;
- ``top_score``/``top_rank``: the highest rank score in it (compute time per step over the
  median of the other ranks', as the straggler's; None unless two ranks were timed).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from ._points import Point

RANKS_LISTED = 16
"""Per-rank throughput is listed per bucket for jobs of at most this many ranks."""

MAX_BUCKETS = 2000
"""The most buckets one answer holds."""

_Cell = list[float]  # samples, steps, seconds, compute seconds, timed steps


def _spread(points: Iterable[Point], since: float, width: float, n: int) -> list[dict[int, _Cell]]:
    cells: list[dict[int, _Cell]] = [{} for _ in range(n)]
    for p in points:
        start, end = p.trained
        length = end - start
        lo = max(0, int((start - since) // width))
        hi = min(n - 1, int((end - since) // width))
        for i in range(lo, hi + 1):
            b0 = since + i * width
            share = (min(end, b0 + width) - max(start, b0)) / length if length > 0 else 1.0
            if share <= 0:
                continue
            c = cells[i].setdefault(p.rank, [0.0, 0.0, 0.0, 0.0, 0.0])
            c[0] += p.samples * share
            c[1] += p.steps * share
            c[2] += p.seconds * share
            c[3] += (p.timed_s - p.wait_s) * share
            c[4] += p.timed_steps * share
    return cells


def _scores(cell: dict[int, _Cell]) -> tuple[float | None, int | None]:
    cps = {r: c[3] / c[4] for r, c in cell.items() if c[4] > 0}
    if len(cps) < 2:
        return None, None
    best: tuple[float, int] | None = None
    for r, v in sorted(cps.items()):
        others = statistics.median([x for q, x in cps.items() if q != r])
        score = v / others if others > 0 else 0.0
        if best is None or score > best[0]:
            best = (score, r)
    assert best is not None
    return round(best[0], 4), best[1]


def rank_rate(points: Iterable[Point]) -> float | None:
    """The median over ranks of ``sum(samples) / sum(seconds)`` of each rank's points (None
    without a rank that stepped): a job's throughput per rank."""
    per: dict[tuple[int, int], list[float]] = {}
    for p in points:
        acc = per.setdefault((p.attempt, p.rank), [0.0, 0.0])
        acc[0] += p.samples
        acc[1] += p.seconds
    rates = [s / t for s, t in per.values() if t > 0 and s > 0]
    return statistics.median(rates) if rates else None


def rank_seconds(points: Iterable[Point]) -> float:
    """The rank-seconds of the points: what a slower step costs in GPU time."""
    return sum(p.seconds for p in points)


def series(
    points: Sequence[Point],
    buckets: int,
    since: float | None = None,
    until: float | None = None,
) -> list[dict[str, object]]:
    """The job's throughput over time in ``buckets`` slices (1 to :data:`MAX_BUCKETS`)."""
    if not points:
        return []
    n = max(1, min(MAX_BUCKETS, int(buckets)))
    t0 = min(p.trained[0] for p in points) if since is None else since
    t1 = max(p.trained[1] for p in points) if until is None else until
    if t1 <= t0:
        return []
    width = (t1 - t0) / n
    listed = len({p.rank for p in points}) <= RANKS_LISTED
    out = []
    for i, cell in enumerate(_spread(points, t0, width, n)):
        rates = {r: c[0] / width for r, c in cell.items()}
        steps = [c[2] / c[1] for c in cell.values() if c[1] > 0]
        score, rank = _scores(cell)
        row: dict[str, object] = {
            "start": t0 + i * width,
            "end": t0 + (i + 1) * width,
            "samples_per_s": sum(rates.values()) if cell else None,
            "step_s": statistics.median(steps) if steps else None,
            "rank_samples_per_s": {
                "min": min(rates.values()),
                "median": statistics.median(rates.values()),
                "max": max(rates.values()),
            }
            if rates
            else None,
            "top_score": score,
            "top_rank": rank,
        }
        if listed:
            row["ranks"] = {str(r): v for r, v in sorted(rates.items())}
        out.append(row)
    return out
