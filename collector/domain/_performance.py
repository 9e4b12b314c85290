"""Inside the loop: ideal step time, slow time, slow windows and the straggler rank (issue 26).

Figures beside the ETT ones, never in them (docs/metrics.md, "Inside the loop", has the formulas).
Pure: :class:`Point` values (a raw window, or a compacted bucket of a rank's windows) and the
job's other spans in, a JSON-ready dict out.

- A point's **step time** is ``seconds / steps``; its **busy step time** ``(seconds - stalled)
  / steps`` (``stalled``: its seconds under spans that stall the loop, :data:`STALL_SPANS` of
  any rank of its attempt, which ETT already charges as idle; a bucket's seconds are those its
  windows trained, ``Point.stalls_over``, not its whole minute); its **compute time** ``timed_s -
  wait_s`` (seconds outside the gradient collectives' wait, measured only where the window
  carried ``ett.window.wait_s``), per step ``(timed_s - wait_s) / timed_steps``. A point is a
  window's (or a bucket's) mean: steps slower than the rest inside it raise the mean only.
- **Warm-up**: the earliest point of each (attempt, rank). **Interrupted**: a point more than
  ``_points.INTERRUPTED_SHARE`` (5 %) of whose seconds are stalled.
- **Ideal step time**: the median busy step time of the steady points (neither warm-up nor
  interrupted); with none, of the points after warm-up; with none, of all (``ideal_basis``).
  Busy, not whole: a loader that stalls every few batches interrupts every point, and with its
  stalls left in, the ideal read 37 % above the typical step and the slow time 26 % short.
- **Stepping time** of a rank: the sum, over its points after warm-up, of ``max(0, seconds -
  stalled)``; its **slow time**: of ``max(0, seconds - stalled - steps * ideal)``. Of an attempt
  each is the median over its ranks, of the job the sum over attempts (``stepping_s``,
  ``slow_s``). ``slow_pct`` = 100 * slow time / stepping time: a share of the same windows'
  seconds, never above 100 (over ETT's productive seconds it read 111 % once a failed attempt's
  unsaved training had been slow).
- **Step counts** (:mod:`._step_counts`): in an attempt whose ranks count steps at rates more
  than 10 % apart (``step_counts_differ``), the step figures (ideal, slow time, slow windows,
  ``steps``) read its basis rank alone and no straggler is named (``straggler_note``).
- **Straggler**: per attempt, each timed rank's score is its compute time per step over the
  median of the other ranks' (steady points); the highest named when at least
  :data:`STRAGGLER_RATIO`. ``others_wait_share``: the median, over the other ranks, of the share
  of their timed seconds spent waiting.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from ett import semconv as sc

from ._points import Intervals, Point, interrupted, point_of_window
from ._step_counts import counted_ranks, mismatches, note
from .model import SpanRecord

__all__ = [
    "OVERLAP_SPANS",
    "STALL_SPANS",
    "STRAGGLER_RATIO",
    "Intervals",
    "Point",
    "performance",
    "point_of_window",
]

STALL_SPANS = frozenset(
    {
        sc.SPAN_CHECKPOINT_SAVE,
        sc.SPAN_EVAL,
        sc.SPAN_COMPILE,
        sc.SPAN_PUBLISH,
        sc.SPAN_DATA_WAIT,
        sc.SPAN_BLOCKING,
    }
)
"""Spans that stall every rank's loop (ETT cuts them out of training as idle): a point they
overlap is *interrupted*, left out of the ideal step time."""

OVERLAP_SPANS = STALL_SPANS | {sc.SPAN_CHECKPOINT_PERSIST}
"""Spans named beside a slow window when they overlap it (a persist runs beside the loop)."""

STRAGGLER_RATIO = 1.2
"""A rank is named the straggler when its compute time per step is at least this multiple of
the other ranks' median (a performance score of 1 / 1.2 = 0.83 or less)."""

SLOW_WINDOW_RATIO = 1.25
"""A point of the job's clock rank is a *slow window* when its step time is at least this
multiple of the ideal step time."""

MAX_SLOW_WINDOWS = 20
"""Slow windows listed (the most seconds lost first)."""


def _stalls(spans: Iterable[SpanRecord], names: frozenset[str]) -> dict[int, list[SpanRecord]]:
    out: dict[int, list[SpanRecord]] = {}
    for s in spans:
        if s.name in names and s.end > s.start:
            out.setdefault(s.attempt, []).append(s)
    return out


def _by_rank(points: Iterable[Point]) -> dict[tuple[int, int], list[Point]]:
    out: dict[tuple[int, int], list[Point]] = {}
    for p in sorted(points, key=lambda p: (p.attempt, p.rank, p.start)):
        out.setdefault((p.attempt, p.rank), []).append(p)
    return out


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def ideal_step(
    ranks: dict[tuple[int, int], list[Point]], stalled: dict[int, Intervals]
) -> tuple[float | None, str, int]:
    """``(ideal step seconds, basis, points it is the median of)``: the median busy step time
    ``(seconds - stalled) / steps`` of a pool of points (see the module docstring)."""

    def busy(p: Point) -> float:
        return max(0.0, p.seconds - stalled[p.attempt].covered(*p.stalls_over)) / p.steps

    after = [p for pts in ranks.values() for p in pts[1:] if p.steps > 0]
    steady = [p for p in after if not interrupted(p, stalled[p.attempt].covered(*p.stalls_over))]
    for basis, pool in (("steady", steady), ("after_warmup", after)):
        if pool:
            return _median([busy(p) for p in pool]), basis, len(pool)
    every = [p for pts in ranks.values() for p in pts if p.steps > 0]
    return _median([busy(p) for p in every]), "all", len(every)


def _compute_per_step(points: Iterable[Point]) -> float | None:
    pts = [p for p in points if p.timed_steps > 0]
    steps = sum(p.timed_steps for p in pts)
    return sum(p.timed_s - p.wait_s for p in pts) / steps if steps else None


def _rank_compute(pts: list[Point], stalled: Intervals) -> tuple[float, float] | None:
    """``(compute seconds per step, wait share)`` of a rank's steady points (without any: its
    points after warm-up; without those: all); None when none was timed."""
    after = pts[1:]
    body = [p for p in after if not interrupted(p, stalled.covered(*p.stalls_over))] or after or pts
    cps = _compute_per_step(body)
    timed = sum(p.timed_s for p in body)
    if cps is None or timed <= 0:
        return None
    return cps, sum(p.wait_s for p in body) / timed


def stragglers(
    ranks: dict[tuple[int, int], list[Point]],
    stalled: dict[int, Intervals],
    skip: Iterable[int] = (),
) -> list[dict[str, object]]:
    """Per attempt with two or more timed ranks, but those in ``skip`` (whose ranks count
    steps differently): the scores (see the module docstring)."""
    out: list[dict[str, object]] = []
    for attempt in sorted({a for a, _ in ranks} - set(skip)):
        per: dict[int, tuple[float, float]] = {}
        for (a, rank), pts in ranks.items():
            figures = _rank_compute(pts, stalled[a]) if a == attempt else None
            if figures is not None:
                per[rank] = figures
        if len(per) < 2:
            continue
        scores = {}
        for rank, (cps, _) in per.items():
            others = _median([c for r, (c, _) in per.items() if r != rank]) or 0.0
            scores[rank] = cps / others if others > 0 else 0.0
        top = max(sorted(scores), key=lambda r: scores[r])
        named = scores[top] >= STRAGGLER_RATIO
        waits = [w for r, (_, w) in per.items() if r != top]
        ref = _median([c for r, (c, _) in per.items() if r != top]) or 0.0
        timed_pts = [p for p in ranks[(attempt, top)][1:] if p.timed_steps > 0]
        above = [
            p for p in timed_pts if (p.timed_s - p.wait_s) / p.timed_steps >= STRAGGLER_RATIO * ref
        ]
        out.append(
            {
                "attempt": attempt,
                "rank": top if named else None,
                "score": round(scores[top], 4),
                "compute_s_per_step": round(per[top][0], 6),
                "others_compute_s_per_step": round(ref, 6),
                "windows_above": len(above),
                "windows_timed": len(timed_pts),
                "others_wait_share": round(_median(waits) or 0.0, 4),
                "ranks_timed": len(per),
                "top_ranks": [
                    {"rank": r, "score": round(scores[r], 4)}
                    for r in sorted(scores, key=lambda r: (-scores[r], r))[:5]
                ],
            }
        )
    return out


def _slow(
    ranks: dict[tuple[int, int], list[Point]], stalled: dict[int, Intervals], ideal: float
) -> tuple[float, float]:
    """``(slow seconds, stepping seconds)`` of the job: per attempt the median over its ranks."""
    per_attempt: dict[int, list[tuple[float, float]]] = {}
    for (a, _), pts in ranks.items():
        slow = stepping = 0.0
        for p in pts[1:]:
            busy = p.seconds - stalled[a].covered(*p.stalls_over)
            stepping += max(0.0, busy)
            slow += max(0.0, busy - p.steps * ideal)
        per_attempt.setdefault(a, []).append((slow, stepping))
    slow_s = sum(_median([s for s, _ in v]) or 0.0 for v in per_attempt.values())
    stepping_s = sum(_median([x for _, x in v]) or 0.0 for v in per_attempt.values())
    return slow_s, stepping_s


def slow_windows(
    ranks: dict[tuple[int, int], list[Point]], spans: Sequence[SpanRecord], ideal: float
) -> list[dict[str, object]]:
    """The clock rank's (each attempt's lowest rank of ``ranks``) points after warm-up at least
    :data:`SLOW_WINDOW_RATIO` times the ideal step time, the most seconds lost
    (``seconds - steps * ideal``) first, each with the names of the spans overlapping it."""
    overlaps = _stalls(spans, OVERLAP_SPANS)
    clock: dict[int, int] = {}
    for a, r in ranks:
        clock[a] = min(r, clock.get(a, r))
    out = []
    for a, r in clock.items():
        for p in ranks[(a, r)][1:]:  # after warm-up
            step = p.step_s
            if step is None or step < SLOW_WINDOW_RATIO * ideal:
                continue
            start, end = p.stalls_over
            names = sorted({s.name for s in overlaps.get(a, []) if s.start < end and s.end > start})
            lost = p.seconds - p.steps * ideal
            out.append(
                {
                    "attempt": a,
                    "rank": r,
                    "start": p.start,
                    "end": p.end,
                    "step_s": step,
                    "ratio": round(step / ideal, 4),
                    "lost_s": round(lost, 6),
                    "overlaps": names,
                }
            )
    out.sort(key=lambda w: (-float(w["lost_s"]), float(w["start"])))  # type: ignore[arg-type]
    return out[:MAX_SLOW_WINDOWS]


def _totals(
    ranks: dict[tuple[int, int], list[Point]], counted: dict[tuple[int, int], list[Point]]
) -> dict[str, object]:
    """Steps and throughput: per attempt the most steps of a ``counted`` rank, the most seconds
    of a rank and the samples of all ranks; ``samples_per_s`` = their samples over their
    seconds, summed over attempts."""
    steps: dict[int, int] = {}
    seconds: dict[int, float] = {}
    samples: dict[int, int] = {}
    for (a, _), pts in counted.items():
        steps[a] = max(steps.get(a, 0), sum(p.steps for p in pts))
    for (a, _), pts in ranks.items():
        seconds[a] = max(seconds.get(a, 0.0), sum(p.seconds for p in pts))
        samples[a] = samples.get(a, 0) + sum(p.samples for p in pts)
    total_s = sum(seconds.values())
    return {
        "steps": sum(steps.values()),
        "loop_s": round(total_s, 6),
        "samples_per_s": sum(samples.values()) / total_s if total_s > 0 else None,
    }


def performance(points: Iterable[Point], spans: Sequence[SpanRecord]) -> dict[str, object]:
    """The job's performance figures (see the module docstring)."""
    ranks = _by_rank(points)
    by_attempt = _stalls(spans, STALL_SPANS)
    stalled = {a: Intervals((s.start, s.end) for s in by_attempt.get(a, [])) for a, _ in ranks}
    differ = mismatches(ranks)
    counted = counted_ranks(ranks, differ)
    ideal, basis, n = ideal_step(counted, stalled)
    pts = [p for v in ranks.values() for p in v]
    out: dict[str, object] = {
        "ideal_step_s": ideal,
        "ideal_basis": basis,
        "ideal_points": n,
        "points": len(pts),
        "windows": sum(p.windows for p in pts),
        **_totals(ranks, counted),
        "slow_s": None,
        "stepping_s": None,
        "slow_pct": None,
        "slow_windows": [],
        "stragglers": stragglers(ranks, stalled, skip=differ),
        "straggler_threshold": STRAGGLER_RATIO,
        "step_counts_differ": list(differ.values()),
        "straggler_note": note(differ),
    }
    if ideal:
        slow_s, stepping_s = _slow(counted, stalled, ideal)
        out["slow_s"] = round(slow_s, 6)
        out["stepping_s"] = round(stepping_s, 6)
        out["slow_pct"] = round(100.0 * slow_s / stepping_s, 4) if stepping_s > 0 else None
        out["slow_windows"] = slow_windows(counted, spans, ideal)
    named = [s for s in out["stragglers"] if s["rank"] is not None]  # type: ignore[attr-defined]
    out["straggler"] = named[-1] if named else None
    return out
