"""The facts of a job's loop that the alerts read (issue 26), kept with its figures at save time.

Pure: the job's points (:class:`~ett_collector.domain._points.Point`) and spans in, a small
JSON-ready dict out (a few hundred bytes, whatever the job's length):

- ``samples_per_rank_s``: the job's throughput per rank, ``sum(samples) / sum(busy)`` over every
  rank's points after its warm-up, where a point's *busy* seconds are its seconds less those under
  a stall span (``_performance.STALL_SPANS``: checkpoint saves, evals, recompiles, data waits
  are ETT's to charge, not the loop's); None without such points;
- ``loop_rank_s``: ``sum(busy)`` over those points, the rank-seconds spent stepping (what a slower
  step costs in GPU-seconds);
- ``stragglers``: per attempt with two or more timed ranks that count the same steps
  (``_step_counts``: an attempt whose ranks count steps at rates more than 10 % apart has none,
  as in ``_performance.stragglers``), its top rank by score (the rank's
  compute per step over the other ranks' median, scored as ``_performance.stragglers`` does),
  the score, and ``ratios``: ``[ratio, windows]`` pairs of its steady timed points, ``ratio`` =
  the point's
  compute per step over the median of the other ranks' steady points holding its midpoint (the
  same time: a step time that changes in the attempt moves every rank alike), rounded to 3
  decimals, highest first, pairs of equal ratio merged, at most :data:`MAX_RATIOS` kept. How
  many windows were at or above a threshold ``x`` is then the sum of ``windows`` over the pairs
  with ``ratio >= x`` (exact for any ``x`` at or above the last ratio kept).
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from ._performance import STALL_SPANS, Intervals, Point
from ._points import interrupted
from ._step_counts import mismatches
from .model import SpanRecord

MAX_RATIOS = 64
"""The most ``[ratio, windows]`` pairs kept per attempt."""

MAX_ATTEMPTS = 8
"""Attempts whose straggler facts are kept (the latest)."""


def _ranks(points: Iterable[Point]) -> dict[tuple[int, int], list[Point]]:
    out: dict[tuple[int, int], list[Point]] = {}
    for p in sorted(points, key=lambda p: (p.attempt, p.rank, p.start)):
        out.setdefault((p.attempt, p.rank), []).append(p)
    return out


def _stalled(spans: Iterable[SpanRecord], attempts: Iterable[int]) -> dict[int, Intervals]:
    by: dict[int, list[tuple[float, float]]] = {a: [] for a in attempts}
    for s in spans:
        if s.name in STALL_SPANS and s.end > s.start and s.attempt in by:
            by[s.attempt].append((s.start, s.end))
    return {a: Intervals(v) for a, v in by.items()}


def _cps(p: Point) -> float | None:
    return (p.timed_s - p.wait_s) / p.timed_steps if p.timed_steps > 0 else None


def _coverage(pts: Sequence[Point], stalled: Intervals) -> list[float]:
    """Each point's seconds under the stall spans, over when its windows trained
    (``Point.stalls_over``, as ``_performance.py`` reads them)."""
    return [stalled.covered(*p.stalls_over) for p in pts]


def _steady(pts: Sequence[Point], cover: Sequence[float]) -> list[Point]:
    """A rank's timed points after warm-up that no stall overlaps."""
    pairs = zip(pts[1:], cover[1:], strict=True)
    return [p for p, c in pairs if p.timed_steps > 0 and not interrupted(p, c)]


def _rank_cps(pts: Sequence[Point], cover: Sequence[float]) -> float | None:
    """Compute seconds per step of a rank's steady points (without any: its points after
    warm-up; without those: all), as ``_performance.stragglers`` scores it."""
    after = list(pts[1:])
    pairs = zip(pts[1:], cover[1:], strict=True)
    body = [p for p, c in pairs if not interrupted(p, c)] or after or list(pts)
    timed = [p for p in body if p.timed_steps > 0]
    steps = sum(p.timed_steps for p in timed)
    return sum(p.timed_s - p.wait_s for p in timed) / steps if steps else None


class _Others:
    """The other ranks' steady timed points of one attempt, to look up by instant."""

    def __init__(self, body: Iterable[list[Point]]) -> None:
        self.ranks = [([p.start for p in pts], pts) for pts in body]

    def median_at(self, t: float) -> float | None:
        """The median compute per step of the other ranks' points that hold instant ``t``."""
        found = []
        for starts, pts in self.ranks:
            i = bisect.bisect_right(starts, t) - 1
            if i >= 0 and pts[i].end >= t:
                found.append(_cps(pts[i]) or 0.0)
        return statistics.median(found) if found else None


def _ratios(steady: Sequence[Point], others: _Others) -> list[list[float]]:
    """``[ratio, windows]`` of a rank's steady points, each against the other ranks' median
    compute per step at the same time (module docstring)."""
    counts: dict[float, int] = {}
    for p in steady:
        mine, ref = _cps(p), others.median_at((p.start + p.end) / 2)
        if mine is None or not ref:
            continue
        ratio = round(mine / ref, 3)
        counts[ratio] = counts.get(ratio, 0) + p.windows
    return [[r, counts[r]] for r in sorted(counts, reverse=True)[:MAX_RATIOS]]


def _straggler(
    attempt: int, ranks: dict[int, list[Point]], covers: dict[int, list[float]]
) -> dict[str, Any] | None:
    """The top rank of one attempt by score, with its ratios (None: fewer than 2 timed)."""
    cps = {r: c for r, pts in ranks.items() if (c := _rank_cps(pts, covers[r])) is not None}
    if len(cps) < 2:
        return None
    scores = {}
    for r, c in cps.items():
        ref = statistics.median([x for k, x in cps.items() if k != r])
        scores[r] = c / ref if ref > 0 else 0.0
    top = max(sorted(scores), key=lambda r: scores[r])
    others = _Others(_steady(ranks[r], covers[r]) for r in ranks if r != top)
    ratios = _ratios(_steady(ranks[top], covers[top]), others)
    return {"attempt": attempt, "rank": top, "score": round(scores[top], 4), "ratios": ratios}


def loop_facts(points: Iterable[Point], spans: Sequence[SpanRecord]) -> dict[str, Any]:
    """The job's loop facts (see the module docstring)."""
    ranks = _ranks(points)
    stalled = _stalled(spans, {a for a, _ in ranks})
    covers = {key: _coverage(pts, stalled[key[0]]) for key, pts in ranks.items()}
    samples = busy = 0.0
    for key, pts in ranks.items():
        for p, c in zip(pts[1:], covers[key][1:], strict=True):
            samples += p.samples
            busy += max(0.0, p.seconds - c)
    found = []
    for attempt in sorted({a for a, _ in ranks} - set(mismatches(ranks))):
        mine = {r: pts for (a, r), pts in ranks.items() if a == attempt}
        s = _straggler(attempt, mine, {r: covers[(attempt, r)] for r in mine})
        if s is not None:
            found.append(s)
    return {
        "samples_per_rank_s": samples / busy if busy > 0 and samples > 0 else None,
        "loop_rank_s": round(busy, 3),
        "stragglers": found[-MAX_ATTEMPTS:],
    }
