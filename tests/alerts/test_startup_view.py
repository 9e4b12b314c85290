"""The start-up view of the ``regression`` rule: a slower first start-up shows in the jobs that
reached their first batch after it, running ones included, hours before any of them ends; a
flat fleet stays quiet; the backtest steps through first batches; and the facts of a simulated
fleet carry first start-ups that tile each job's allocation to its first batch, and each job's
checkpoint mode and start-up compile-cache outcome."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

from fleet_builder import startup_job

from ett_collector.alerts import Fleet, JobFacts, evaluate, load_facts, replay
from ett_collector.alerts._backtest import instants
from ett_collector.alerts.rules import RuleSet, rules_from_mappings
from ett_collector.storage import Store
from ett_simulator import simulate_into_db

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0


def rules() -> RuleSet:
    rule = {"name": "regression_by_model", "kind": "regression", "window": "24h", "baseline": "7d"}
    return rules_from_mappings([rule])


def job(
    i: int, alloc: float, model: str, rng: random.Random, factor: float, now: float
) -> JobFacts:
    """A 12 h job of 8 GPUs (:func:`startup_job`) whose first start-up spends ~20 s scheduling
    (times ``factor``) and ~25 s building the model."""
    startup = {
        "scheduler": 20.0 * rng.lognormvariate(0, 0.6) * factor,
        "model": 25.0 * rng.lognormvariate(0, 0.4),
    }
    return startup_job(f"{model}-{i:04d}", model, alloc, startup, rng, now)


def fleet(seed: int, onset: float | None, now: float, per_day: int = 6) -> list[JobFacts]:
    """Two models, ``per_day`` jobs a day each, allocated up to ``now``; from ``onset`` model
    m1's scheduling takes 5x as long."""
    rng = random.Random(seed)
    out = []
    for model in ("m1", "m2"):
        alloc, i = T0, 0
        while alloc < now:
            slow = model == "m1" and onset is not None and alloc >= onset
            out.append(job(i, alloc, model, rng, 5.0 if slow else 1.0, now))
            alloc += rng.expovariate(per_day / DAY)
            i += 1
    return out


def test_a_slower_start_up_fires_before_the_jobs_that_show_it_end() -> None:
    onset = T0 + 9 * DAY
    now = onset + 12 * HOUR  # 12 h jobs: few of those that started after the onset have ended
    jobs = fleet(3, onset, now)
    slow = [j for j in jobs if j.model == "m1" and j.alloc >= onset]
    assert sum(j.state == "completed" for j in slow) < 3  # too few ended jobs to test
    [rule] = rules().rules
    findings = evaluate(rule, Fleet(jobs), now, live=False, active={})
    assert [(f.labels["model"], f.labels["component"]) for f in findings] == [("m1", "scheduler")]
    [f] = findings
    assert f.figures["unit"] == "s per first start-up"
    assert "started in the last 24h" in f.description
    assert 2.5 < f.figures["ratio"] < 12  # planted 5x (the scan picks its most extreme suffix)
    assert onset - 6 * HOUR <= f.figures["onset"] <= onset + 6 * HOUR
    assert set(f.jobs) <= {j.job_id for j in slow}
    # without the start-up view (no first batches known) the same fleet shows nothing yet
    blind = [dataclasses.replace(j, first_batch=None, startup={}) for j in jobs]
    assert evaluate(rule, Fleet(blind), now, live=False, active={}) == []


def test_a_flat_fleet_stays_quiet_in_the_start_up_view() -> None:
    [rule] = rules().rules
    fired = []
    for seed in range(8):
        now = T0 + 12 * DAY
        f = Fleet(fleet(200 + seed, None, now))
        for hour in range(8 * 24, 12 * 24, 4):
            fired += evaluate(rule, f, T0 + hour * HOUR, live=False, active={})
    assert fired == []


def test_the_backtest_steps_through_first_batches() -> None:
    onset, since, until = T0 + 9 * DAY, T0 + 8 * DAY, T0 + 14 * DAY
    jobs = fleet(4, onset, until)
    points = set(instants(jobs, rules(), since, until))
    firsts = [j.first_batch for j in jobs if j.first_batch and since <= j.first_batch <= until]
    assert firsts and all(t in points for t in firsts)
    [firing] = replay(jobs, rules(), since, until)
    assert (firing.labels["model"], firing.labels["component"]) == ("m1", "scheduler")
    # found in the start-ups, before the third of the slow jobs ended
    slow = sorted((j for j in jobs if j.model == "m1" and j.alloc >= onset), key=lambda j: j.end)
    assert onset < firing.fired_at < slow[2].end


def test_simulated_first_start_ups_tile_the_allocation_to_the_first_batch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    simulate_into_db(url, jobs=40, days=3, seed=8, start=T0)
    store = Store(url)
    try:
        facts = load_facts(store.engine, None)
    finally:
        store.engine.dispose()
    trained = [j for j in facts if j.trained and j.first_batch is not None]
    assert len(trained) >= 20
    for j in trained:
        assert {"scheduler", "model", "compile"} <= set(j.startup), j.startup
        assert abs(sum(j.startup.values()) - (j.first_batch - j.alloc)) < 1e-3, j.job_id
    # the checkpoint mode of each job (the stratum of its checkpoint test) comes through too:
    # the profile's jobs save async with probability 0.6
    assert {j.checkpoint_mode for j in trained} == {"sync", "async"}
    # and its first start-up's compile-cache outcome (the stratum of its compile test): the
    # profile's first attempts find a warm cache with probability 0.3
    assert {j.compile_cache for j in trained} == {"hit", "miss"}
    publishing = [j for j in facts if not j.trained]
    assert publishing and all(not j.startup for j in publishing if j.first_batch is None)
