"""An open ``regression`` incident resolves on evidence that its change is gone: not on the cost
of a view too thin to judge one (the saves of two jobs), and not on a cheap view while another
view of the same component still shows the change at its cost. The live evaluator and the
backtest judge an open incident with the same code (``_detect.detect``); these replay it.

The fleet: one model's 1 h jobs of 8 GPUs, one an hour, each restoring a checkpoint at start
(60 s) and saving once (0.25 s). From the onset both take 5x: per job-hour the change costs
~13 GPU-hours a day, while its saves, each 1 s longer, cost the save view's 0.05 GPU-hours a
day, under half the floor. Halfway through, the short jobs stop and two long ones run on, still
slower, until the change ends: a day later the per-job view has fewer than 3 jobs that ended,
and the save view holds the saves of those two jobs."""

from __future__ import annotations

import random

from fleet_builder import job_facts

from ett_collector.alerts import JobFacts, replay
from ett_collector.alerts.rules import RuleSet, rules_from_mappings

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0
ONSET = T0 + 8 * DAY
GAP = ONSET + 30 * HOUR
"""The short jobs stop; two long ones run on, from here until the change ends."""
STOP = GAP + 30 * HOUR
"""The change ends; short jobs at the old speed come back."""
UNTIL = STOP + 2 * DAY


def rules() -> RuleSet:
    rule = {"name": "regression_by_model", "kind": "regression", "window": "24h", "baseline": "7d"}
    return rules_from_mappings([rule])


def factor(at: float) -> float:
    return 5.0 if ONSET <= at < STOP else 1.0


def job(n: int, alloc: float, hours: float, rng: random.Random) -> JobFacts:
    """A job of 8 GPUs from ``alloc``: a restore at its start (60 s, its component
    ``checkpoint``) and an async save (0.25 s) every hour from its first half hour, each slower
    by :func:`factor` at its instant and log-normal (sigma 0.1); as seen at :data:`UNTIL`."""
    end = alloc + hours * HOUR
    restore = 60.0 * rng.lognormvariate(0, 0.1) * factor(alloc)
    saves, at = [], alloc + HOUR
    while at < end:
        seconds = 0.25 * rng.lognormvariate(0, 0.1) * factor(at)
        saves.append((at + seconds, seconds))
        at += HOUR
    lost = {"model": 60.0, "checkpoint": restore + sum(x for _, x in saves)}
    return job_facts(
        f"m1-{n:04d}",
        "m1",
        alloc,
        min(end, UNTIL),
        end > UNTIL,
        lost,
        tts=60.0,
        checkpoint_mode="async",
        first_batch=alloc + 60.0,
        startup={"model": 60.0},
        saves=tuple(saves),
    )


def fleet(seed: int) -> list[JobFacts]:
    rng = random.Random(seed)
    every = 6 * HOUR
    allocs = [T0 + k * every for k in range(int((GAP - T0) / every))]
    allocs += [STOP + k * every for k in range(int((UNTIL - STOP) / every))]
    jobs = [job(n, alloc, 2.0, rng) for n, alloc in enumerate(allocs)]
    return [*jobs, job(9000, GAP, 30.0, rng), job(9001, GAP + HOUR / 2, 30.0, rng)]


def test_an_incident_fires_once_and_resolves_only_once_its_change_is_gone() -> None:
    """Before: the incident resolved within an hour of firing, on the save view (its 4 saves
    more significant than the per-job view's 3 jobs, its cost 0.05 GPU-hours a day), fired
    again, and resolved again in the gap on the saves of the two long jobs alone."""
    for seed in (1, 2, 3):
        firings = replay(fleet(seed), rules(), ONSET - DAY, UNTIL)
        assert [(f.labels["model"], f.labels["component"]) for f in firings] == [
            ("m1", "checkpoint")
        ], [(f.fired_at - ONSET, f.resolved_at and f.resolved_at - ONSET) for f in firings]
        [f] = firings
        assert ONSET < f.fired_at <= ONSET + DAY
        assert f.resolved_at is not None and STOP <= f.resolved_at <= STOP + DAY
