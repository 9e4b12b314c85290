"""The floor under every rule's detection delay: how soon the best possible detector could name
each regression of ``bench_alert_quality``, at the flat-fleet false-alarm target.

For each planted regression (model, component, factor) the benchmark measures, on flat fleets
simulated like the quality benchmark's (same sizes, days and seeds, no plant), the stream of
samples that shows it and how noisy they are:

- a start-up component (``STARTUP_VIEW``): one sample per first start-up, the log of its
  seconds, σ the standard deviation of the logs (``compile`` within its two modes: a cold and
  a warm cache, split at the geometric mean of the profile's two medians);
- ``checkpoint``: one sample per save, σ within the save view's strata (mode × width);
- ``failure``: the model's failures, a Poisson count per hour of wall time.

The detector: a CUSUM that knows the baseline, the factor and σ exactly (an oracle; a real rule
must estimate all three). By Moustakides (1986) the CUSUM minimises the worst-case mean delay
(Lorden's criterion) among all detectors with the same mean time to a false alarm, so its delay
is a floor for this criterion. The false-alarm budget is the issue's flat-fleet target, at most
one false firing per 30 fleet-days, split evenly over the streams one evaluation watches (the
default regression rule's components × the fleet's models): each stream may false-alarm once in
``30 × streams`` days. Its threshold and delays are exact for the modelled samples (the CUSUM as
a Markov chain on a fine grid, Brook and Evans 1972), not a simulation.

Assumptions, which make the floor lower than a real rule can reach: samples independent and
log-normal with known parameters (the simulator draws them so); the oracle knows the factor;
one stream is watched per plant (a checkpoint plant also slows ``checkpoint_load`` at start-up,
a scheduler plant also slows restarts' allocations: both add little beside the stream watched,
and are left out, so the true floor is a little lower);
σ is estimated from the flat fleets (its error is printed); a worst case over when the change
comes, while the quality benchmark's delays are one draw each: a detector may beat the floor on
one draw, not on average over many. Printed beside the issue's targets:

    PYTHONPATH=. .venv/bin/python -m tests.performance.bench_alert_floor [--seeds 3]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.performance.bench_alert_quality import DAY, START, Scenario, scenarios

pytestmark = pytest.mark.performance

FALSE_BUDGET_DAYS = 30.0
"""The issue's flat-fleet target: at most one false firing per this many fleet-days."""
TARGET_MEDIAN_H, TARGET_WORST_H = 6.0, 24.0
GRID = 600
"""Cells of the CUSUM's Markov chain between 0 and its threshold."""


# -- the CUSUM as a Markov chain --------------------------------------------------------------


def _arl(h: float, increments: Callable[[Any], Any]) -> float:
    """Mean number of steps until a CUSUM that starts at 0 reaches ``h``: the statistic is
    ``max(0, s + X)`` with ``X`` drawn by ``increments(edges)``, which returns for every state
    the probability that ``s + X`` falls at or below each edge (rows: the atom at 0 and the
    cell midpoints; columns: the edges 0, w, 2w, ..., h). Solved exactly on the grid:
    ``(I - Q) L = 1``."""
    import numpy as np

    w = h / GRID
    states = np.concatenate(([0.0], (np.arange(GRID) + 0.5) * w))
    edges = np.arange(GRID + 1) * w
    cdf = increments(edges[None, :] - states[:, None])  # P(X <= edge - s)
    q = np.empty((GRID + 1, GRID + 1))
    q[:, 0] = cdf[:, 0]  # at or below 0: back to the atom
    q[:, 1:] = np.diff(cdf, axis=1)  # into each cell; the rest is at or over h: an alarm
    arl = np.linalg.solve(np.eye(GRID + 1) - q, np.ones(GRID + 1))
    return float(arl[0])


def gaussian_increments(d: float, shifted: bool) -> Callable[[Any], Any]:
    """The CUSUM increment of one standardised sample, ``d·z - d²/2`` (the log-likelihood
    ratio of a shift of ``d`` standard deviations): ``z`` is N(0, 1) before the change, N(d, 1)
    after it (``shifted``)."""
    import numpy as np

    mean = (d * d / 2.0) * (1.0 if shifted else -1.0)
    cdf = np.vectorize(statistics.NormalDist(mean, abs(d)).cdf)

    def at(x: Any) -> Any:  # the grid repeats its offsets: each distinct one evaluated once
        values, where = np.unique(np.round(x, 12), return_inverse=True)
        return cdf(values)[where].reshape(x.shape)

    return at


def poisson_increments(rate: float, factor: float, shifted: bool) -> Callable[[Any], Any]:
    """The CUSUM increment of one step of a Poisson count, ``k·ln f - (f - 1)·rate`` (the
    log-likelihood ratio of the rate times ``f``): ``k`` is Poisson(rate) before the change,
    Poisson(f·rate) after it (``shifted``)."""
    import numpy as np

    lam = rate * factor if shifted else rate
    up, down = math.log(factor), (factor - 1.0) * rate
    kmax = int(lam + 12 * math.sqrt(lam) + 12)
    pmf = [math.exp(-lam + k * math.log(lam) - math.lgamma(k + 1)) for k in range(kmax + 1)]

    def cdf(x: Any) -> Any:
        out = np.zeros_like(x)
        for k, p in enumerate(pmf):
            out += p * (k * up - down <= x)
        return out

    return cdf


def cusum(pre: Callable[[float], float], post: Callable[[float], float], arl0: float) -> float:
    """The worst-case mean delay, in steps, of the CUSUM whose mean time to a false alarm is
    ``arl0`` steps: its threshold found by bisection on ``pre`` (``pre(h)``: ARL before the
    change), then ``post(h)`` (ARL after it, from 0: the worst case)."""
    lo, hi = 0.0, 1.0
    while pre(hi) < arl0:
        lo, hi = hi, hi * 2.0
    for _ in range(40):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if pre(mid) < arl0 else (lo, mid)
    return post(hi)


def gaussian_delay(d: float, arl0: float) -> float:
    """Samples a CUSUM needs (worst case, mean) for a shift of ``d`` σ at ``arl0`` samples."""
    return cusum(
        lambda h: _arl(h, gaussian_increments(d, False)),
        lambda h: _arl(h, gaussian_increments(d, True)),
        arl0,
    )


def poisson_delay(rate: float, factor: float, arl0: float) -> float:
    """Steps a CUSUM needs (worst case, mean) for a Poisson rate per step times ``factor``."""
    return cusum(
        lambda h: _arl(h, poisson_increments(rate, factor, False)),
        lambda h: _arl(h, poisson_increments(rate, factor, True)),
        arl0,
    )


# -- the streams of a flat fleet --------------------------------------------------------------


@dataclass(frozen=True)
class Stream:
    """What a flat fleet shows of one (model, component): samples a day and their spread."""

    per_day: float
    sigma: float | None
    """σ of the logs (within strata); None for failures (a count)."""


def _pooled_sigma(groups: Iterable[Sequence[float]]) -> float | None:
    num = den = 0.0
    for xs in groups:
        if len(xs) >= 2:
            num += statistics.variance(xs) * (len(xs) - 1)
            den += len(xs) - 1
    return math.sqrt(num / den) if den else None


def _by(pairs: Iterable[tuple[str, float]]) -> list[list[float]]:
    out: dict[str, list[float]] = {}
    for key, x in pairs:
        out.setdefault(key, []).append(x)
    return list(out.values())


def streams(
    jobs: Sequence[Any], days: float, compile_split_s: float
) -> dict[tuple[str, str], Stream]:
    """The streams of every model of the facts ``jobs`` over ``days`` of history."""
    from ett_collector.alerts._detect import STARTUP_VIEW, _save_stratum

    out: dict[tuple[str, str], Stream] = {}
    for model in sorted({j.model for j in jobs if j.trained}):
        mine = [j for j in jobs if j.model == model and j.trained]
        started = [j for j in mine if j.first_batch is not None]
        for c in STARTUP_VIEW:
            xs = [math.log(j.startup[c]) for j in started if j.startup.get(c, 0.0) > 0.0]
            if c == "compile":
                split = math.log(compile_split_s)
                sigma = _pooled_sigma(_by(("miss" if x > split else "hit", x) for x in xs))
            else:
                sigma = _pooled_sigma([xs])
            out[(model, c)] = Stream(len(xs) / days, sigma)
        saves = [(_save_stratum(j), math.log(s)) for j in mine for _, s in j.saves if s > 0.0]
        out[(model, "checkpoint")] = Stream(len(saves) / days, _pooled_sigma(_by(saves)))
        failures = sum(j.failures for j in mine)
        out[(model, "failure")] = Stream(failures / days, None)
    return out


def _flat_streams(
    s: Scenario,
) -> tuple[dict[tuple[str, str], Stream], int, dict[str, dict[str, float]]]:
    """Simulate ``s`` without its plants and measure its streams; also the number of streams
    one evaluation of the default regression rule watches, and each model's lost seconds by
    component (for the share of a plant)."""
    from ett_collector.alerts import load_facts, load_rules
    from ett_collector.storage import Store
    from ett_simulator import simulate_into_db
    from ett_simulator.profile import load_profile

    profile = load_profile(None)
    compile_split_s = math.sqrt(profile["compile.miss"].median * profile["compile.hit"].median)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'flat.db'}"
        simulate_into_db(url, jobs=s.jobs, days=s.days, seed=s.seed, start=START)
        store = Store(url)
        try:
            jobs = [j for j in load_facts(store.engine, None) if j.end <= START + s.days * DAY]
        finally:
            store.engine.dispose()
    rule = next(r for r in load_rules(None).rules if r.kind == "regression")
    models = {j.model for j in jobs if j.trained}
    lost: dict[str, dict[str, float]] = {}
    for j in jobs:
        for c, x in j.lost.items():
            lost.setdefault(j.model, {}).setdefault(c, 0.0)
            lost[j.model][c] += x
    return streams(jobs, s.days, compile_split_s), len(models) * len(rule.components), lost


# -- the floor of each plant ------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    scenario: str
    model: str
    component: str
    factor: float
    share_pct: float
    stream: Stream
    watched: int
    hours: float
    """The oracle CUSUM's worst-case mean delay after the onset."""

    @property
    def counted(self) -> bool:
        """Whether the issue's targets count this plant: factor >= 3 on >= 5 % of lost time."""
        return self.factor >= 3 and self.share_pct >= 5.0


def floor_of(s: Scenario, model: str, component: str, factor: float, flat: Any) -> Floor:
    measured, watched, lost = flat
    stream: Stream = measured[(model, component)]
    share = 100.0 * lost[model].get(component, 0.0) / max(sum(lost[model].values()), 1e-9)
    budget_days = FALSE_BUDGET_DAYS * watched
    if stream.sigma is None:  # failures: hourly Poisson counts
        hours = poisson_delay(stream.per_day / 24.0, factor, budget_days * 24.0)
    else:
        d = math.log(factor) / stream.sigma
        hours = gaussian_delay(d, budget_days * stream.per_day) * 24.0 / stream.per_day
    return Floor(s.name, model, component, factor, share, stream, watched, hours)


def run(seeds: int, quick: bool, out: Any = sys.stdout) -> list[Floor]:
    def say(line: str = "") -> None:
        print(line, file=out, flush=True)

    regressed = [s for s in scenarios(quick, seeds) if s.regress and not s.hard]
    floors: list[Floor] = []
    cache: dict[tuple[int, float, int], Any] = {}
    for s in regressed:
        key = (s.jobs, s.days, s.seed)
        if key not in cache:
            print(
                f"  simulating flat fleet {len(cache) + 1}: {s.jobs} jobs, seed {s.seed}",
                file=sys.stderr,
                flush=True,
            )
            cache[key] = _flat_streams(s)
        for model, component, factor, _ in s.regress:
            floors.append(floor_of(s, model, component, factor, cache[key]))
    say(
        f"{'scenario':28} {'planted':26} {'share':>6} {'samples/day':>11} {'sigma':>6} "
        f"{'streams':>7} {'floor':>8}"
    )
    for f in floors:
        sigma = "-" if f.stream.sigma is None else f"{f.stream.sigma:.2f}"
        mark = "" if f.counted else "  (not counted)"
        say(
            f"{f.scenario:28} {f'{f.model}/{f.component} x{f.factor:g}':26} "
            f"{f.share_pct:5.1f}% {f.stream.per_day:11.1f} {sigma:>6} {f.watched:7d} "
            f"{f.hours:6.1f} h{mark}"
        )
    counted = sorted(f.hours for f in floors if f.counted)
    if counted:
        say()
        say(
            f"the {len(counted)} counted plants (factor >= 3, share >= 5 %): floor median "
            f"{statistics.median(counted):.1f} h (target <= {TARGET_MEDIAN_H:g} h), worst "
            f"{counted[-1]:.1f} h (target <= {TARGET_WORST_H:g} h); "
            f"{sum(h > TARGET_WORST_H for h in counted)} of them above {TARGET_WORST_H:g} h "
            "for any detector at this false-alarm rate"
        )
    return floors


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="draws of each 400-job scenario (3)")
    ap.add_argument("--quick", action="store_true", help="the quality benchmark's quick set")
    args = ap.parse_args(argv)
    run(args.seeds, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
