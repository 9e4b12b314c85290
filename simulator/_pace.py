"""Inside one attempt's loop: the step time at each instant and every rank's wait per step.

Without a planted ``step`` regression or straggler the step time is the model's ``step_s``, and
the loop counts steps in whole milliseconds exactly as before (``work`` is then the clean
milliseconds themselves). With them, the loop's clock is cut into *pieces* at their instants; in a
piece the step time is ``step * k * g`` where ``k`` is the product of the ``step`` regressions'
factors and ``g = 1 + share * (f - 1)`` with ``f`` the largest straggler factor there (every rank
waits for the slowest). *Work* is clean time in units of the unstretched step: a piece of ``d`` ms
does ``d / (k * g)`` ms of work, and the steps done are ``work // step_ms``.

With the profile's ``loop.step_sigma`` above 0, ``k`` also holds the attempt's own pace, a
log-normal factor drawn once per attempt (its nodes' speed) from the same stream as the spread.

Waits (``ett.window.wait_s``): rank ``r`` computes ``share * step * k * w_r * f_r`` per step
(``w_r``: its spread, at most 1, drawn once per attempt with ``loop.compute_sigma`` from a stream
of its own, so the spans' other draws do not move; ``f_r``: its straggler factor, else 1) and waits
the rest of the step, ``step * k * (g - share * w_r * f_r)``; a window's wait is its time outside
interruptions less its steps' compute.
"""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .regression import Regression
from .straggler import Straggler

STEP: str = "step"
"""The pseudo-component of a ``--regress`` that stretches the step time."""


@dataclass(slots=True)
class Pace:
    """The step time and waits of one attempt (see the module docstring); instants in ms."""

    step_ms: int
    share: float
    weights: list[float]
    """``w_r`` per rank (the slowest rank's is 1)."""
    at: list[int]
    """The instants where a piece begins (sorted); the first piece runs before ``at[0]``."""
    k: list[float]
    """The step regressions' factor in each piece (``len(at) + 1`` of them)."""
    slow: list[dict[int, float]]
    """The straggler factors by rank in each piece."""
    timed: bool = True

    def _piece(self, t: float) -> int:
        return bisect.bisect_right(self.at, t)

    def factor(self, i: int) -> float:
        """The step time of piece ``i`` over the unstretched step: ``k * g``."""
        f = max(self.slow[i].values(), default=1.0)
        return self.k[i] * (1.0 + self.share * (f - 1.0))

    def work(self, a: int, b: int) -> float:
        """Work done over the clean interval ``[a, b]`` (``b - a`` when nothing is planted)."""
        if not self.at:
            return b - a
        total, cursor, i = 0.0, a, self._piece(a)
        while cursor < b:
            end = b if i >= len(self.at) else min(b, self.at[i])
            total += (end - cursor) / self.factor(i)
            cursor, i = end, i + 1
        return total

    def span(self, a: int, work: float) -> float:
        """Clean milliseconds from ``a`` until ``work`` is done."""
        if not self.at:
            return work
        cursor, i, left = float(a), self._piece(a), work
        while True:
            f = self.factor(i)
            if i >= len(self.at) or cursor + left * f <= self.at[i]:
                return cursor + left * f - a
            left -= (self.at[i] - cursor) / f
            cursor, i = float(self.at[i]), i + 1

    def wait_s(self, rank: int, t: int, steps: int, clean_ms: float) -> float:
        """Seconds rank ``rank`` waits in its collectives in a window from ``t`` of ``steps``
        steps and ``clean_ms`` outside interruptions: the clean time less the rank's compute,
        ``steps * share * step * k * w_r * f_r`` (so the part of a step a window boundary cuts
        off counts as waiting, never as computing)."""
        i = self._piece(t)
        mine = self.share * self.weights[rank] * self.slow[i].get(rank, 1.0) * self.k[i]
        return round(max(0.0, clean_ms - steps * self.step_ms * mine) / 1000.0, 6)


def _mine(r: Regression, model: str, team: str, t: int) -> bool:
    """Whether regression ``r`` applies to a job of ``model``/``team`` at ``t`` (ms)."""
    group = r.model == model if r.model is not None else r.team == team
    return group and t >= round(r.at * 1000)


def pace_of(
    step_ms: int,
    model: str,
    team: str,
    world: int,
    regressions: Sequence[Regression],
    stragglers: Sequence[Straggler],
    loop: dict[str, float | bool],
    seed: str,
) -> Pace:
    """The pace of one attempt of a job of ``model``/``team`` with ``world`` ranks; ``loop``:
    the profile's ``[loop]`` table; ``seed``: the attempt's own stream for the spread."""
    share, sigma = float(loop["compute_share"]), float(loop["compute_sigma"])
    rng = random.Random(seed)
    raw = [math.exp(sigma * rng.gauss(0.0, 1.0)) if sigma > 0 else 1.0 for _ in range(world)]
    spread = float(loop["step_sigma"])
    noise = math.exp(spread * rng.gauss(0.0, 1.0)) if spread > 0 else 1.0
    top = max(raw)
    weights = [w / top for w in raw]
    mine = [s for s in stragglers if s.applies(model, world)]
    steps = [r for r in regressions if r.component == STEP]
    instants = sorted({round(r.at * 1000) for r in steps} | {round(s.at * 1000) for s in mine})
    k: list[float] = []
    slow: list[dict[int, float]] = []
    for t in [instants[0] - 1 if instants else 0, *instants]:
        k.append(noise * math.prod(r.factor for r in steps if _mine(r, model, team, t)))
        by_rank: dict[int, float] = {}
        for s in mine:
            if t >= round(s.at * 1000):
                by_rank[s.rank] = by_rank.get(s.rank, 1.0) * s.factor
        slow.append(by_rank)
    if all(x == 1.0 for x in k) and not any(slow):
        instants, k, slow = [], [1.0], [{}]
    elif not instants:  # the attempt's own pace, from its start: one piece from the epoch on
        instants = [0]
        k, slow = [k[0], *k], [slow[0], *slow]
    return Pace(step_ms, share, weights, instants, k, slow, bool(loop["timed"]))
