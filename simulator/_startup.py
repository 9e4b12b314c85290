"""The start-up of one attempt on every rank, and what it charges along the critical path.

Each rank runs the profile's phases one after another from the allocation instant. A barrier
phase (``pg_init``, ``rendezvous``) is left by every rank at one instant: the last rank's arrival
plus the barrier's own work. So the planted critical path is known by construction
(docs/metrics.md, "The start-up critical path (v1.1)"): before each barrier the path follows the
rank that arrived last, the barrier's work is its own component, and after the last barrier it
follows the rank whose first batch is latest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ett import semconv as sc

from ._plan import AttemptPlan, Draw, Interval, to_ms
from .profile import COMPILE_PHASE, LOAD_PHASE, Phase
from .wire import RankSpans

_ERROR_TYPES = {
    "exception": "RuntimeError",
    "oom": "torch.OutOfMemoryError",
    "hardware": "torch.cuda.CudaError",
}
STARTUP_CAUSES = tuple(_ERROR_TYPES)
"""Causes of a failure during start-up (a rank raises; torchrun stops the others)."""


def error_type(cause: str) -> str:
    """The ``error.type`` a rank reports for ``cause``."""
    return _ERROR_TYPES.get(cause, "RuntimeError")


@dataclass(slots=True)
class _Span:
    rank: int
    name: str
    component: str
    start: int
    end: int
    attrs: tuple[tuple[str, str | int | bool | float], ...] = ()


def _component(name: str) -> str:
    return sc.ComponentValues.COMPILE.value if name == COMPILE_PHASE else sc.default_component(name)


_Barrier = tuple[int, int, list[int], str]
"""A barrier as planted: enter (the last arrival), leave, each rank's arrival, its component."""


@dataclass(slots=True)
class _Layout:
    """The phases laid out on the ranks: every span; each rank's instant after its last phase
    (``cur``); the non-barrier spans of each stretch between barriers (``groups``, one more than
    ``barriers``); and the barriers."""

    spans: list[_Span]
    cur: list[int]
    groups: list[list[_Span]]
    barriers: list[_Barrier]


def run_startup(
    draw: Draw,
    ranks: list[RankSpans],
    plan: AttemptPlan,
    restored_step: int | None,
    scale: float,
) -> bool:
    """Plant the start-up of ``plan`` on ``ranks``; True when the attempt reaches its first batch.

    On success ``plan.first``, ``critical_rank`` and ``startup`` are set and each rank has its
    phase spans and ``ett.first_batch``. On a start-up failure (``failures.startup_probability``)
    the attempt ends failed and ``plan`` is complete.
    """
    prof = draw.profile
    alloc = plan.alloc
    world = len(ranks)
    phases = [p for p in prof.phases if p.name != LOAD_PHASE or restored_step is not None]
    cache, base = _phase_seconds(draw, phases, plan, scale)
    straggler = _straggler(draw, phases, base, world)
    lay = _lay_out(draw, phases, base, alloc, world, restored_step, straggler)
    first_step = prof["startup.first_step"]
    firsts = [
        lay.cur[r] + to_ms(draw.seconds(first_step, "other", alloc, scale) * draw.jitter())
        for r in range(world)
    ]
    fail = draw.rng.random() < prof["failures.startup_probability"]
    if fail:
        _fail_in_startup(draw, ranks, plan, lay.spans, cache)
        return False
    first = max(firsts)
    critical = min(r for r in range(world) if firsts[r] == first)
    plan.first, plan.critical_rank = first, critical
    plan.startup = _critical_path(alloc, first, critical, lay.groups, lay.barriers, lay.cur)
    _emit(ranks, lay.spans, cache)
    step = restored_step or 0
    for r in range(world):
        ranks[r].add(sc.SPAN_FIRST_BATCH, firsts[r], firsts[r], ((sc.STEP, step),))
    plan.phase_ms = _phase_ms(lay.spans)
    return True


def _phase_seconds(
    draw: Draw, phases: list[Phase], plan: AttemptPlan, scale: float
) -> tuple[str, dict[str, float]]:
    """The compile cache's outcome (``hit`` or ``miss``, by the first attempt's or a restart's
    probability) and each phase's drawn seconds before the ranks' jitter."""
    prof = draw.profile
    hit_p = prof[
        "compile.hit_probability_first" if plan.number == 0 else "compile.hit_probability_restart"
    ]
    cache = "hit" if draw.rng.random() < hit_p else "miss"
    base: dict[str, float] = {}
    for p in phases:
        dist = prof[f"compile.{cache}"] if p.dist is None else p.dist
        base[p.name] = draw.seconds(dist, _component(p.name), plan.alloc, scale)
    return cache, base


def _straggler(
    draw: Draw, phases: list[Phase], base: dict[str, float], world: int
) -> tuple[int, str, float] | None:
    """The start-up straggler, if the dice plant one: ``(rank, phase, factor)``, the rank whose
    phase (a non-barrier one of ``startup.straggler_phases``) lasts ``factor`` times longer."""
    prof, rng = draw.profile, draw.rng
    candidates = [n for n in prof["startup.straggler_phases"] if n in base]
    candidates = [n for n in candidates if not any(p.name == n and p.barrier for p in phases)]
    if not candidates or not rng.random() < prof["startup.straggler_probability"]:
        return None
    rank, phase = rng.randrange(world), rng.choice(candidates)
    return rank, phase, prof["startup.straggler_factor"].sample(rng)


def _lay_out(
    draw: Draw,
    phases: list[Phase],
    base: dict[str, float],
    alloc: int,
    world: int,
    restored_step: int | None,
    straggler: tuple[int, str, float] | None,
) -> _Layout:
    """The phases one after another on each rank from ``alloc``: a barrier is left by every
    rank at the last arrival plus its work; another phase lasts its base seconds times the
    rank's jitter (times the straggler's factor)."""
    lay = _Layout([], [alloc] * world, [[]], [])
    for p in phases:
        comp = _component(p.name)
        if p.barrier:
            enter = max(lay.cur)
            leave = enter + to_ms(base[p.name])
            for r in range(world):
                lay.spans.append(_Span(r, p.name, comp, lay.cur[r], leave))
            lay.barriers.append((enter, leave, list(lay.cur), comp))
            lay.cur = [leave] * world
            lay.groups.append([])
            continue
        attrs: tuple[tuple[str, str | int | bool | float], ...] = ()
        if p.name == LOAD_PHASE and restored_step is not None:
            attrs = ((sc.CHECKPOINT_STEP, restored_step),)
        for r in range(world):
            secs = base[p.name] * draw.jitter()
            if straggler is not None and straggler[:2] == (r, p.name):
                secs *= straggler[2]
            d = to_ms(secs)
            s = _Span(r, p.name, comp, lay.cur[r], lay.cur[r] + d, attrs)
            lay.spans.append(s)
            lay.groups[-1].append(s)
            lay.cur[r] += d
    return lay


def _phase_ms(spans: list[_Span]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s.end - s.start)
    return out


def _along(rank: int, group: list[_Span]) -> list[Interval]:
    return [(s.start, s.end, s.component) for s in group if s.rank == rank]


def _critical_path(
    alloc: int,
    first: int,
    critical: int,
    groups: list[list[_Span]],
    barriers: list[_Barrier],
    cur: list[int],
) -> list[Interval]:
    """``[alloc, first]`` charged along docs/metrics.md's critical path, from what was planted."""
    out: list[Interval] = []
    for i, (enter, leave, arrivals, comp) in enumerate(barriers):
        tied = [r for r, t in enumerate(arrivals) if t == enter]
        entrant = critical if critical in tied else min(tied)
        out += _along(entrant, groups[i])
        out.append((enter, leave, comp))
    out += _along(critical, groups[-1])
    if first > cur[critical]:
        out.append((cur[critical], first, sc.ComponentValues.OTHER.value))
    return [iv for iv in out if iv[1] > iv[0]]


def _emit(ranks: list[RankSpans], spans: list[_Span], cache: str) -> None:
    for s in spans:
        rank = ranks[s.rank]
        rank.add(sc.startup_span_name(s.name), s.start, s.end, s.attrs)
        if s.name == COMPILE_PHASE:
            rank.add(sc.SPAN_COMPILE, s.start, s.end, ((sc.COMPILE_CACHE, cache),))


def _fail_in_startup(
    draw: Draw,
    ranks: list[RankSpans],
    plan: AttemptPlan,
    spans: list[_Span],
    cache: str,
) -> None:
    """One rank raises inside one of its phases after the last barrier (or any phase when none
    follows it); torchrun then stops the other ranks (they report ``preempted``)."""
    rng = draw.rng
    prof = draw.profile
    world = len(ranks)
    failing = rng.randrange(world)
    own = [s for s in spans if s.rank == failing]
    last_barrier = max(
        (i for i, s in enumerate(own) if s.name in _barrier_names(spans)), default=-1
    )
    pool = own[last_barrier + 1 :] or own
    victim = rng.choice(pool)
    t_fail = victim.start + int(rng.random() * (victim.end - victim.start))
    cause = draw.weighted({c: 1.0 for c in STARTUP_CAUSES})
    exit_dist = prof["failures.exit"]
    ends = [0] * world
    ends[failing] = t_fail + draw.ms(exit_dist, "other", t_fail)
    t_term = ends[failing]
    for r in range(world):
        if r != failing:
            ends[r] = t_term + draw.ms(exit_dist, "other", t_term)
    kept: list[_Span] = []
    for s in spans:
        stop = t_fail if s.rank == failing else t_term
        if s.start >= stop:
            continue
        kept.append(_Span(s.rank, s.name, s.component, s.start, min(s.end, stop), s.attrs))
    _emit(ranks, kept, cache)
    failed, preempted = sc.EndReasonValues.FAILED.value, sc.EndReasonValues.PREEMPTED.value
    for r in range(world):
        if r == failing:
            attrs = ((sc.FAILURE_CAUSE, cause), (sc.STEP, 0), (sc.ERROR_TYPE, error_type(cause)))
            ranks[r].add(sc.SPAN_FAILURE, t_fail, t_fail, attrs)
            end_attrs = ((sc.ATTEMPT_END_REASON, failed), (sc.FAILURE_CAUSE, cause))
        else:
            end_attrs = ((sc.ATTEMPT_END_REASON, preempted), (sc.FAILURE_CAUSE, "preemption"))
        ranks[r].add(sc.SPAN_ATTEMPT, plan.alloc, ends[r], end_attrs)
    end = max(ends)
    latest = min(r for r in range(world) if ends[r] == end)
    path = sorted((s.start, s.end, s.component) for s in kept if s.rank == latest)
    plan.startup = _charged_along(path, plan.alloc, end)
    plan.end, plan.end_reason, plan.failed, plan.cause = end, failed, True, cause
    plan.critical_rank = latest
    plan.phase_ms = _phase_ms(spans)


def _charged_along(path: list[Interval], alloc: int, end: int) -> list[Interval]:
    """``[alloc, end]`` charged along one rank's (sorted) phases: each phase to its component,
    the gaps between them and after the last to ``other``; empty intervals left out."""
    other = sc.ComponentValues.OTHER.value
    charged: list[Interval] = []
    cursor = alloc
    for a, b, comp in path:
        if a > cursor:
            charged.append((cursor, a, other))
        charged.append((a, b, comp))
        cursor = max(cursor, b)
    if end > cursor:
        charged.append((cursor, end, other))
    return [iv for iv in charged if iv[1] > iv[0]]


def _barrier_names(spans: list[_Span]) -> set[str]:
    from .profile import BARRIER_PHASES

    return {s.name for s in spans if s.name in BARRIER_PHASES}
