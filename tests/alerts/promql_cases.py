"""The fleets behind the ``regression_by_model`` cases of ``promtool/rules_test.yml``, as job
facts: the built-in evaluator reads them (``test_promql_approximation.py``), and
:func:`series` gives the ``ett_fleet_*`` figures ``/metrics`` would expose for them, which the
promtool cases hold. Every figure is a round number, so the YAML can hold it exactly.

A job ends at a known instant; the recent window is ``(T - 24h, T]``, the baseline
``(T - 7d, T - 24h]``. Each case is one model (its label), team ``t``, 2-hour jobs of 4 GPUs
(``gpus=8`` in one case), lost seconds charged per job as a cycle of values, so that the
baseline has spread for the rank test to measure noise against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ett_collector.alerts import Fleet, JobFacts
from ett_collector.alerts.rules import COMPONENTS, GroupKey

HOUR, DAY = 3600.0, 86400.0
T = 1_800_000_000.0
"""The instant every case is evaluated at."""
WALL = 2 * HOUR
DATA = (80.0, 100.0, 120.0, 140.0, 160.0)
"""Data-loading seconds of one job, in turn (60 s per job-hour on average)."""
CHECKPOINT = (150.0, 200.0, 250.0)
MODEL_S = 300.0
"""Model initialisation, the same in every job (a component that cannot show a change)."""


@dataclass(frozen=True)
class Charge:
    """What the jobs of one run lose: cycles of seconds by component, failures per job."""

    data: Sequence[float] = DATA
    checkpoint: Sequence[float] = CHECKPOINT
    failures: Sequence[int] = (0,)
    failure_s: float = 600.0
    """Failure seconds of one failure."""
    gpus: int = 4


def jobs(
    model: str, n: int, first_end: float, last_end: float, charge: Charge, start: int = 0
) -> list[JobFacts]:
    """``n`` jobs of ``model`` ending evenly from ``first_end`` to ``last_end``; job ``i`` is
    charged the ``(start + i)``-th value of each cycle."""
    out = []
    for i in range(n):
        k = start + i
        end = first_end + (last_end - first_end) * i / max(n - 1, 1)
        fails = charge.failures[k % len(charge.failures)]
        lost = {
            "data": charge.data[k % len(charge.data)],
            "checkpoint": charge.checkpoint[k % len(charge.checkpoint)],
            "model": MODEL_S,
        }
        if fails:
            lost["failure"] = fails * charge.failure_s
        idle = sum(v for c, v in lost.items() if c != "failure")
        out.append(
            JobFacts(
                job_id=f"{model}-{k:04d}",
                model=model,
                team="t",
                state="completed",
                alloc=end - WALL,
                end=end,
                wall=WALL,
                productive=WALL - sum(lost.values()),
                idle=idle,
                failure=lost.get("failure", 0.0),
                blocking=lost["checkpoint"],
                unsaved=0.0,
                tts=60.0,
                lost=lost,
                gpus=charge.gpus,
                failures=fails,
                causes={"exception": fails} if fails else {},
            )
        )
    return out


def baseline(model: str, charge: Charge = Charge(), n: int = 30) -> list[JobFacts]:
    """``n`` jobs ending in the baseline, from ``T - 6d`` to ``T - 25h``."""
    return jobs(model, n, T - 6 * DAY, T - 25 * HOUR, charge)


def recent(model: str, n: int, charge: Charge = Charge(), start: int = 1000) -> list[JobFacts]:
    """``n`` jobs ending in the recent window, from ``T - 22h`` to ``T - 1h``."""
    return jobs(model, n, T - 22 * HOUR, T - HOUR, charge, start)


def scaled(cycle: Sequence[float], factor: float) -> tuple[float, ...]:
    """A cycle of seconds times ``factor``."""
    return tuple(v * factor for v in cycle)


MAIN = "m"
"""Noise, then a 5x data-loading regression, then back to normal (the rule fires and
resolves in both evaluators)."""
MAIN_PHASES: dict[str, list[JobFacts]] = {
    "noise": baseline(MAIN) + recent(MAIN, 10),
    "regression": baseline(MAIN) + recent(MAIN, 10, Charge(data=scaled(DATA, 5))),
    "back": baseline(MAIN) + recent(MAIN, 12, start=2000),
}

FAILING = "f"
"""Failures per training hour up (2 a job against 1 in 10 jobs), the restarts' data loading
with them: one alert, component failure, in both evaluators."""
_BASE_FAILURES = Charge(failures=(1, 0, 0, 0, 0, 0, 0, 0, 0, 0))
FAILING_PHASES: dict[str, list[JobFacts]] = {
    "noise": baseline(FAILING, _BASE_FAILURES) + recent(FAILING, 10, _BASE_FAILURES),
    "regression": baseline(FAILING, _BASE_FAILURES)
    + recent(FAILING, 10, Charge(failures=(2,), data=scaled(DATA, 3))),
    "back": baseline(FAILING, _BASE_FAILURES) + recent(FAILING, 10, _BASE_FAILURES, start=2000),
}

FEW = "few"
"""Three recent jobs, one of them with a slow loader (1500 s): PromQL fires, the built-in's rank
test finds nothing (the documented false alarm)."""
FEW_JOBS = baseline(FEW) + recent(FEW, 3, Charge(data=(100.0, 120.0, 1500.0)))

UNDER_K = "under_k"
"""Twenty recent jobs, each loading data 1.6x as long: significant and costly, so the built-in
fires; under K = 2, PromQL stays quiet (the documented miss)."""
UNDER_K_JOBS = baseline(UNDER_K) + recent(UNDER_K, 20, Charge(data=scaled(DATA, 1.6)))

WIDE = "wide"
"""8-GPU jobs whose checkpoints cost 4x: 0.125 job-hours a day, 1 GPU-hour a day. The built-in
floor (0.25 GPU-hours a day) passes, PromQL's (0.25 job-hours a day) does not."""
_SMALL_CKPT = (10.0, 15.0, 20.0)
WIDE_JOBS = baseline(WIDE, Charge(checkpoint=_SMALL_CKPT, gpus=8)) + recent(
    WIDE, 10, Charge(checkpoint=scaled(_SMALL_CKPT, 4), gpus=8)
)

LASTING = "lasting"
"""Data loading 5x since 8 days before ``T``, 6 jobs a day from ``T - 18d``: by ``T`` the
7-day window holds only regressed jobs. PromQL has learned the regression as its baseline and
is quiet; the built-in incident, found on day 10 against the baseline before it, still fires."""
LASTING_ONSET = T - 8 * DAY
LASTING_JOBS = [
    j for j in jobs(LASTING, 18 * 6, T - 18 * DAY + 4 * HOUR, T, Charge()) if j.end < LASTING_ONSET
] + [
    j
    for j in jobs(LASTING, 18 * 6, T - 18 * DAY + 4 * HOUR, T, Charge(data=scaled(DATA, 5)))
    if j.end >= LASTING_ONSET
]


def series(fleet_jobs: Sequence[JobFacts], model: str, t: float = T) -> dict[str, float]:
    """The ``ett_fleet_*`` series the regression rule reads, for ``model``'s jobs at ``t``
    (what ``/metrics`` exposes: the sums of the jobs that ended in each window), by their
    promtool name (``ett_fleet_jobs{model="m",team="t",window="24h"}``). Lost seconds of a
    component no job was charged, and failure causes that did not occur, are left out."""
    fleet = Fleet(fleet_jobs)
    out: dict[str, float] = {}
    for window, length in (("24h", DAY), ("7d", 7 * DAY)):
        sums = fleet.sums(GroupKey.MODEL, model, t, length)
        labels = f'model="{model}",team="t",window="{window}"'
        out[f"ett_fleet_jobs{{{labels}}}"] = float(sums.jobs)
        out[f"ett_fleet_wall_seconds{{{labels}}}"] = sums.wall
        out[f"ett_fleet_productive_seconds{{{labels}}}"] = sums.productive
        for c in COMPONENTS:
            total = sum(j.lost.get(c, 0.0) for j in fleet_jobs if j.model == model)
            if total:
                name = f'ett_fleet_lost_seconds{{model="{model}",team="t",component="{c}"'
                out[f'{name},window="{window}"}}'] = sums.lost.get(c, 0.0)
        causes: dict[str, int] = {}
        for j in fleet.members(GroupKey.MODEL, model, t, length):
            for cause, n in j.causes.items():
                causes[cause] = causes.get(cause, 0) + n
        for cause, n in sorted(causes.items()):
            name = f'ett_fleet_failures{{model="{model}",team="t",cause="{cause}"'
            out[f'{name},window="{window}"}}'] = float(n)
    return out
