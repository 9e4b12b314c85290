"""The start-up of one attempt on every rank, and what it charges along the critical path.

Each rank runs the profile's phases one after another from the allocation instant. A barrier
phase (``pg_init``, ``rendezvous``) is left by every rank at one instant: the last rank's arrival
plus the barrier's own work. So the planted critical path is known by construction (ETT-SPEC
section 3, v1.1): before each barrier the path follows the rank that arrived last, the barrier's
work is its own component, and after the last barrier it follows the rank whose first batch is
latest.
"""

from __future__ import annotations

from dataclasses import dataclass

from ett import semconv as sc

from ._plan import AttemptPlan, Draw, Interval, to_ms
from .profile import COMPILE_PHASE, LOAD_PHASE
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
    rng = draw.rng
    alloc = plan.alloc
    world = len(ranks)
    phases = [p for p in prof.phases if p.name != LOAD_PHASE or restored_step is not None]
    hit_p = prof[
        "compile.hit_probability_first" if plan.number == 0 else "compile.hit_probability_restart"
    ]
    cache = "hit" if rng.random() < hit_p else "miss"
    base: dict[str, float] = {}
    for p in phases:
        comp = _component(p.name)
        dist = prof[f"compile.{cache}"] if p.dist is None else p.dist
        base[p.name] = draw.seconds(dist, comp, alloc, scale)
    straggler: tuple[int, str] | None = None
    candidates = [n for n in prof["startup.straggler_phases"] if n in base]
    candidates = [n for n in candidates if not any(p.name == n and p.barrier for p in phases)]
    if candidates and rng.random() < prof["startup.straggler_probability"]:
        straggler = (rng.randrange(world), rng.choice(candidates))
        factor = prof["startup.straggler_factor"].sample(rng)
    spans: list[_Span] = []
    cur = [alloc] * world
    groups: list[list[_Span]] = [[]]  # non-barrier spans between barriers, per group
    barriers: list[tuple[int, int, list[int], str]] = []  # enter, leave, arrivals, component
    for p in phases:
        comp = _component(p.name)
        if p.barrier:
            enter = max(cur)
            leave = enter + to_ms(base[p.name])
            for r in range(world):
                spans.append(_Span(r, p.name, comp, cur[r], leave))
            barriers.append((enter, leave, list(cur), comp))
            cur = [leave] * world
            groups.append([])
            continue
        attrs: tuple[tuple[str, str | int | bool | float], ...] = ()
        if p.name == LOAD_PHASE and restored_step is not None:
            attrs = ((sc.CHECKPOINT_STEP, restored_step),)
        for r in range(world):
            secs = base[p.name] * draw.jitter()
            if straggler == (r, p.name):
                secs *= factor
            d = to_ms(secs)
            s = _Span(r, p.name, comp, cur[r], cur[r] + d, attrs)
            spans.append(s)
            groups[-1].append(s)
            cur[r] += d
    first_step = prof["startup.first_step"]
    firsts = [
        cur[r] + to_ms(draw.seconds(first_step, "other", alloc, scale) * draw.jitter())
        for r in range(world)
    ]
    fail = rng.random() < prof["failures.startup_probability"]
    if fail:
        _fail_in_startup(draw, ranks, plan, spans, cache)
        return False
    first = max(firsts)
    critical = min(r for r in range(world) if firsts[r] == first)
    plan.first, plan.critical_rank = first, critical
    plan.startup = _critical_path(alloc, first, critical, groups, barriers, cur)
    _emit(ranks, spans, cache)
    step = restored_step or 0
    for r in range(world):
        ranks[r].add(sc.SPAN_FIRST_BATCH, firsts[r], firsts[r], ((sc.STEP, step),))
    plan.phase_ms = _phase_ms(spans)
    return True


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
    barriers: list[tuple[int, int, list[int], str]],
    cur: list[int],
) -> list[Interval]:
    """``[alloc, first]`` charged as ETT-SPEC v1.1 says, from what was planted."""
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
    charged: list[Interval] = []
    cursor = plan.alloc
    for a, b, comp in path:
        if a > cursor:
            charged.append((cursor, a, sc.ComponentValues.OTHER.value))
        charged.append((a, b, comp))
        cursor = max(cursor, b)
    if end > cursor:
        charged.append((cursor, end, sc.ComponentValues.OTHER.value))
    plan.startup = [iv for iv in charged if iv[1] > iv[0]]
    plan.end, plan.end_reason, plan.failed, plan.cause = end, failed, True, cause
    plan.critical_rank = latest
    plan.phase_ms = _phase_ms(spans)


def _barrier_names(spans: list[_Span]) -> set[str]:
    from .profile import BARRIER_PHASES

    return {s.name for s in spans if s.name in BARRIER_PHASES}
