"""The training loop of one attempt, job level then per rank: clean stretches of steps broken by
checkpoint saves, evals and recompiles, until the job's steps are done or a failure strikes.

Failures are a Poisson process over clean training time (its rate stretched by a ``failure``
regression from its instant on). Every interruption is synchronous (all ranks), so the planted
cut-outs never overlap. The spans each rank sends are in :mod:`ett_simulator._loop_spans`, how
an attempt ends in :mod:`ett_simulator._training_end`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._loop_spans import CKPT, Loop, LoopRun
from ._plan import AttemptPlan, Checkpoint, Draw
from ._training_end import Training, complete, fail
from .wire import RankSpans

_MS_PER_HOUR = 3_600_000.0


def _rate_breaks(draw: Draw) -> list[int]:
    return sorted({int(r.at * 1000) for r in draw.regressions if r.component == "failure"})


def _time_to_hazard(draw: Draw, t: int, budget: float, base: float, breaks: list[int]) -> float:
    """Clean ms from ``t`` until ``budget`` of hazard is used (rate per ms, piecewise)."""
    cursor, used = t, 0.0
    for bp in breaks:
        if bp <= cursor:
            continue
        rate = base * draw.k("failure", cursor)
        if rate > 0 and used + rate * (bp - cursor) >= budget:
            return cursor - t + (budget - used) / rate
        used += rate * (bp - cursor)
        cursor = bp
    rate = base * draw.k("failure", cursor)
    return math.inf if rate <= 0 else cursor - t + (budget - used) / rate


def _hazard(draw: Draw, a: int, b: int, base: float, breaks: list[int]) -> float:
    total, cursor = 0.0, a
    for bp in [*[x for x in breaks if a < x < b], b]:
        total += base * draw.k("failure", cursor) * (bp - cursor)
        cursor = bp
    return total


@dataclass(slots=True)
class _Clock:
    """Where the loop stands: the instant ``t`` (unix ms), the clean work done, the failure
    hazard and recompile budget left (exponential draws, used up at their rates per clean ms),
    the ms since the last save and eval, and the last step saved."""

    t: int
    clean: float
    hazard: float
    recompile_budget: float
    since_ckpt: int = 0
    since_eval: int = 0
    last_step: int = -1


@dataclass(frozen=True, slots=True)
class _Rates:
    """Failures (``base`` per clean ms, stretched from each of ``breaks`` on) and recompiles
    (per clean ms)."""

    base: float
    breaks: list[int]
    recompile: float


def run_training(
    draw: Draw, ranks: list[RankSpans], plan: AttemptPlan, loop: Loop
) -> Checkpoint | None:
    """Plant the training and the end of ``plan``; returns the newest checkpoint committed before
    the attempt died (None when it committed none). ``plan`` is complete afterwards."""
    prof = draw.profile
    rng = draw.rng
    assert plan.first is not None
    run = LoopRun()
    clean: float = 0.0 if loop.pace is not None and loop.pace.at else 0
    target_clean = max(1, (loop.target_step - loop.start_step) * loop.step_ms)
    rates = _Rates(
        base=prof["failures.rate_per_hour"] / _MS_PER_HOUR,
        breaks=_rate_breaks(draw),
        recompile=prof["compile.recompile_per_hour"] / _MS_PER_HOUR,
    )
    hazard = rng.expovariate(1.0)
    clock = _Clock(plan.first, clean, hazard, rng.expovariate(1.0))
    while True:
        event = _stretch(draw, loop, run, clock, rates, target_clean)
        if event in ("finish", "failure"):
            break
        if event == "ckpt":
            _save(draw, loop, run, clock, len(ranks))
        elif event == "eval":
            clock.since_eval = 0
            _pause(draw, run, clock, "eval.duration", "eval")
        else:
            clock.recompile_budget = rng.expovariate(1.0)
            _pause(draw, run, clock, "compile.recompile", "compile")
    step_now = loop.start_step + int(clock.clean) // loop.step_ms
    end = complete if event == "finish" else fail
    return end(Training(draw, ranks, plan, loop, run), clock.t, step_now)


def _stretch(
    draw: Draw, loop: Loop, run: LoopRun, clock: _Clock, rates: _Rates, target_clean: float
) -> str:
    """Run clean steps until the next event (the steps done, a failure, a save, an eval, a
    recompile: the soonest, in that order on a tie); the event."""
    t = clock.t
    options = [
        (loop.span(t, target_clean - clock.clean), 0, "finish"),
        (_time_to_hazard(draw, t, clock.hazard, rates.base, rates.breaks), 1, "failure"),
        (loop.ckpt_ms - clock.since_ckpt, 2, "ckpt"),
    ]
    if loop.eval_ms > 0:
        options.append((loop.eval_ms - clock.since_eval, 3, "eval"))
    if rates.recompile > 0:
        options.append((clock.recompile_budget / rates.recompile, 4, "recompile"))
    gap, _, event = min(options)
    d = max(1, math.ceil(gap if gap < math.inf else loop.span(t, target_clean - clock.clean)))
    run.stretches.append((t, t + d, clock.clean))
    run.starts.append(t)
    clock.hazard -= _hazard(draw, t, t + d, rates.base, rates.breaks)
    clock.recompile_budget -= rates.recompile * d
    clock.clean += loop.work(t, t + d)
    clock.t = t + d
    clock.since_ckpt += d
    clock.since_eval += d
    return event


def _save(draw: Draw, loop: Loop, run: LoopRun, clock: _Clock, world: int) -> None:
    """A checkpoint save of the current step (none when that step is saved already): every
    rank blocks for its own drawn time, then (async) persists; the loop resumes after the
    slowest rank's block."""
    prof = draw.profile
    clock.since_ckpt = 0
    t = clock.t
    step = loop.start_step + int(clock.clean) // loop.step_ms
    if step == clock.last_step:
        return
    clock.last_step = step
    dist = prof["checkpoint.async_blocking" if loop.is_async else "checkpoint.sync_blocking"]
    blocks = [
        t + max(1, round(draw.seconds(dist, CKPT, t) * draw.jitter() * 1000)) for _ in range(world)
    ]
    persists = (
        [b + draw.ms(prof["checkpoint.persist"], CKPT, t, draw.jitter()) for b in blocks]
        if loop.is_async
        else []
    )
    run.saves.append((step, t, blocks, persists))
    clock.t = max(blocks)


def _pause(draw: Draw, run: LoopRun, clock: _Clock, duration: str, component: str) -> None:
    """An eval or a recompile of drawn length (profile key ``duration``) at the current instant."""
    t = clock.t
    e = t + draw.ms(draw.profile[duration], component, t)
    run.others.append((t, e, component))
    clock.t = e
