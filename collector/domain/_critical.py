"""The start-up critical path through barrier phases (docs/metrics.md, "The start-up critical
path (v1.1)").

A barrier phase (``rendezvous``, ``pg_init``, or any start-up phase whose span says
``ett.barrier`` = true) is one that no rank leaves before every rank has entered it. The time
before a barrier belongs to the rank everyone waited for (the last to enter), the barrier's own
work to the barrier's component, and the time after the last barrier to the critical rank (the
one whose first batch came last). A rank that only waited inside a barrier carries none of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ett import semconv as sc

from .model import SpanRecord


@dataclass(frozen=True, slots=True)
class PathPiece:
    """One piece of the start-up: followed along ``rank``'s phases, or (``rank`` None) a
    barrier's own work charged to ``component``."""

    start: float
    end: float
    rank: int | None
    component: str | None = None


def is_barrier(span: SpanRecord) -> bool:
    """True for a start-up phase span that is a barrier."""
    phase = sc.startup_phase(span.name)
    if phase is None:
        return False
    return phase in sc.BARRIER_PHASES or span.attr(sc.BARRIER) is True


def _component(span: SpanRecord) -> str:
    comp = span.attr(sc.COMPONENT)
    if isinstance(comp, str) and comp:
        return comp
    phase = sc.startup_phase(span.name)
    return sc.default_component(phase) if phase else sc.ComponentValues.OTHER.value


def _first_barriers(spans: Sequence[SpanRecord]) -> dict[str, dict[int, SpanRecord]]:
    """Each barrier name → rank → that rank's first span of that name."""
    out: dict[str, dict[int, SpanRecord]] = {}
    for s in spans:
        if not is_barrier(s):
            continue
        per_rank = out.setdefault(s.name, {})
        held = per_rank.get(s.rank)
        if held is None or s.start < held.start:
            per_rank[s.rank] = s
    return out


def barrier_skew_s(spans: Sequence[SpanRecord]) -> float | None:
    """How far apart the ranks' clocks put one barrier's end: the largest spread, over attempts
    and barrier phases seen on two ranks or more, of each rank's end of its first span of the
    phase. Every rank leaves a barrier at one instant, so on clocks that agree the spread is
    the barrier's exit jitter (milliseconds); seconds or more mean the hosts' clocks disagree
    (or a phase marked ``ett.barrier`` is no barrier), which the spec's figures assume they do
    not. None without such a barrier."""
    by_attempt: dict[int, list[SpanRecord]] = {}
    for s in spans:
        if s.name.startswith(sc.SPAN_STARTUP_PREFIX) and is_barrier(s):
            by_attempt.setdefault(s.attempt, []).append(s)
    spreads = [
        max(ends) - min(ends)
        for group in by_attempt.values()
        for per_rank in _first_barriers(group).values()
        if len(ends := [s.end for s in per_rank.values()]) > 1
    ]
    return max(spreads) if spreads else None


def _entrant(per_rank: dict[int, SpanRecord], critical: int) -> int:
    """The rank that entered the barrier last (tie: the critical rank if it ties, else lowest)."""
    enter = max(s.start for s in per_rank.values())
    tied = sorted(r for r, s in per_rank.items() if s.start == enter)
    return critical if critical in tied else tied[0]


def critical_path(
    spans: Sequence[SpanRecord], lo: float, hi: float, critical: int
) -> list[PathPiece]:
    """The start-up ``[lo, hi]`` cut into pieces that tile it in order (empty ones dropped).

    Barriers are those the critical rank has, in the order they start on it. Instants are
    clamped to ``[lo, hi]`` and kept in order, so a skewed clock never makes pieces overlap.
    """
    if hi <= lo:
        return []
    by_name = _first_barriers(spans)
    order = sorted(
        (per_rank[critical] for per_rank in by_name.values() if critical in per_rank),
        key=lambda s: (s.start, s.name),
    )
    if not order:
        return [PathPiece(lo, hi, critical)]
    entrants = [_entrant(by_name[b.name], critical) for b in order]
    pieces: list[PathPiece] = []
    cursor = lo
    for i, own in enumerate(order):
        per_rank = by_name[own.name]
        entrant = entrants[i]
        enter = min(max(per_rank[entrant].start, cursor), hi)
        nxt = entrants[i + 1] if i + 1 < len(order) else critical
        leaving = per_rank.get(nxt, own)
        leave = min(max(leaving.end, enter), hi)
        pieces.append(PathPiece(cursor, enter, entrant))
        pieces.append(PathPiece(enter, leave, None, _component(own)))
        cursor = leave
    pieces.append(PathPiece(cursor, hi, critical))
    return [p for p in pieces if p.end > p.start]
