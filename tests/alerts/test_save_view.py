"""The save view of the ``regression`` rule: slower checkpoint saves show in the saves that
ended after the change, running jobs' saves included, hours before the jobs that made them end;
one job with slow saves on its own does not make an alert; a flat fleet stays quiet; the
backtest steps through the saves' ends; and a simulated fleet's facts carry each save, summing
to the job's checkpoint blocking."""

from __future__ import annotations

import dataclasses
import random

import pytest
from fleet_builder import job_facts

from ett_collector.alerts import Fleet, JobFacts, evaluate, load_facts, replay
from ett_collector.alerts._backtest import instants
from ett_collector.alerts._detect import SAVE_VIEW_MIN_JOBS
from ett_collector.alerts.rules import RuleSet, rules_from_mappings
from ett_collector.storage import Store
from ett_simulator import simulate_into_db
from tests.conftest import BACKENDS

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0
JOB_HOURS = 12.0
EVERY_S = 1800.0  # a save every half hour of training


def rules() -> RuleSet:
    rule = {"name": "regression_by_model", "kind": "regression", "window": "24h", "baseline": "7d"}
    return rules_from_mappings([rule])


def job(i: int, alloc: float, model: str, rng: random.Random, slow: object, now: float) -> JobFacts:
    """A 12 h job of 8 GPUs saving every half hour, async (~3 s) with probability 0.6 else sync
    (~20 s), each save log-normal (sigma 0.3); ``slow(job_id, at)`` is the factor of a save
    that starts at ``at``. Seen at ``now``: a job that would end later is running."""
    job_id = f"{model}-{i:04d}"
    mode = "async" if rng.random() < 0.6 else "sync"
    median = 3.0 if mode == "async" else 20.0
    end = alloc + JOB_HOURS * HOUR * rng.uniform(0.8, 1.2)
    running = end > now
    end = min(end, now)
    saves = []
    at = alloc + 60.0 + EVERY_S
    while True:
        seconds = median * rng.lognormvariate(0, 0.3) * slow(job_id, at)  # type: ignore[operator]
        if at + seconds > end:
            break
        saves.append((at + seconds, seconds))
        at += seconds + EVERY_S
    blocking = sum(x for _, x in saves)
    return job_facts(
        job_id,
        model,
        alloc,
        end,
        running,
        {"model": 60.0, "checkpoint": blocking},
        tts=60.0,
        checkpoint_mode=mode if saves else None,
        first_batch=alloc + 60.0,
        startup={"model": 60.0},
        saves=tuple(saves),
    )


def fleet(seed: int, now: float, slow: object = lambda job_id, at: 1.0) -> list[JobFacts]:
    """Two models, 6 jobs a day each, allocated up to ``now``; ``slow`` as in :func:`job` (m1
    only)."""
    rng = random.Random(seed)
    out = []
    for model in ("m1", "m2"):
        alloc, i = T0, 0
        while alloc < now:
            factor = slow if model == "m1" else (lambda job_id, at: 1.0)
            out.append(job(i, alloc, model, rng, factor, now))
            alloc += rng.expovariate(6 / DAY)
            i += 1
    return out


def after(onset: float, factor: float = 3.0) -> object:
    return lambda job_id, at: factor if at >= onset else 1.0


def test_slower_saves_fire_hours_before_the_jobs_that_show_them_end() -> None:
    onset = T0 + 9 * DAY
    now = onset + 4 * HOUR
    jobs = fleet(5, now, after(onset))
    slow_saves = [(j, e) for j in jobs if j.model == "m1" for e, x in j.saves if e - x >= onset]
    ended = {j.job_id for j, _ in slow_saves if j.state == "completed"}
    assert slow_saves and len(ended) < 3  # too few ended jobs for the per-job test
    [rule] = rules().rules
    findings = evaluate(rule, Fleet(jobs), now, live=False, active={})
    assert [(f.labels["model"], f.labels["component"]) for f in findings] == [("m1", "checkpoint")]
    [f] = findings
    assert f.figures["unit"] == "s per checkpoint save"
    assert "saves of" in f.description and f.figures["recent_saves"] >= 3
    assert 2.0 < f.figures["ratio"] < 5.0  # planted 3x
    assert onset - HOUR <= f.figures["onset"] <= onset + HOUR
    assert set(f.jobs) <= {j.job_id for j, _ in slow_saves}
    # without the saves the same fleet shows nothing yet
    blind = [dataclasses.replace(j, saves=()) for j in jobs]
    assert evaluate(rule, Fleet(blind), now, live=False, active={}) == []


def test_one_job_with_slow_saves_is_not_an_alert_two_are() -> None:
    onset = T0 + 9 * DAY
    now = onset + 8 * HOUR
    probe = fleet(6, now)
    running = sorted(
        (j for j in probe if j.model == "m1" and j.state == "running" and len(j.saves) >= 4),
        key=lambda j: j.alloc,
    )
    assert len(running) >= SAVE_VIEW_MIN_JOBS
    [rule] = rules().rules

    def firing(bad: set[str]) -> list[str]:
        jobs = fleet(6, now, lambda job_id, at: 5.0 if job_id in bad and at >= onset else 1.0)
        return [f.labels["component"] for f in evaluate(rule, Fleet(jobs), now, False, {})]

    assert firing({running[0].job_id}) == []  # one job on a slow file system, say
    assert firing({j.job_id for j in running[:2]}) == ["checkpoint"]


def test_a_flat_fleet_stays_quiet_in_the_save_view() -> None:
    [rule] = rules().rules
    fired = []
    for seed in range(6):
        now = T0 + 12 * DAY
        f = Fleet(fleet(300 + seed, now))
        for hour in range(8 * 24, 12 * 24, 3):
            fired += evaluate(rule, f, T0 + hour * HOUR, live=False, active={})
    assert fired == []


def test_the_backtest_steps_through_save_ends() -> None:
    onset, since, until = T0 + 9 * DAY, T0 + 8 * DAY, T0 + 11 * DAY
    jobs = fleet(7, until, after(onset))
    points = set(instants(jobs, rules(), since, until))
    ends = [e for j in jobs for e, _ in j.saves if since <= e <= until]
    assert ends and all(t in points for t in ends)
    [firing] = replay(jobs, rules(), since, until)  # one firing: it does not flap
    assert (firing.labels["model"], firing.labels["component"]) == ("m1", "checkpoint")
    assert onset < firing.fired_at < onset + 6 * HOUR
    assert firing.resolved_at is None  # the change lasts to the end


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_simulated_saves_sum_to_each_jobs_checkpoint_blocking(database_url: str) -> None:
    url = database_url
    simulate_into_db(url, jobs=40, days=3, seed=8, start=T0)
    store = Store(url)
    try:
        facts = load_facts(store.engine, None)
    finally:
        store.engine.dispose()
    saving = [j for j in facts if j.saves]
    assert len(saving) >= 15
    for j in saving:
        assert abs(sum(x for _, x in j.saves) - j.blocking) < 1e-3, j.job_id
        ends = [e for e, _ in j.saves]
        assert ends == sorted(ends) and j.alloc < ends[0] and ends[-1] <= j.end + 1e-6
    # the modes keep their scales apart: every async save is shorter than the sync median
    sync = sorted(x for j in saving if j.checkpoint_mode == "sync" for _, x in j.saves)
    asyn = [x for j in saving if j.checkpoint_mode == "async" for _, x in j.saves]
    assert sync and asyn and max(asyn) < sync[len(sync) // 2]


def test_the_replay_with_memo_equals_the_replay_computing_every_view(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Fleet.memo reuses a view's test while its samples stay the same: the replay must fire
    exactly what computing every view at every instant fires (a planted change that opens,
    holds and resolves)."""
    onset, stop = T0 + 9 * DAY, T0 + 10 * DAY
    since, until = onset - 6 * HOUR, stop + DAY  # it fires at 9.02 d and resolves at 10.86 d
    jobs = fleet(9, until, lambda job_id, at: 4.0 if onset <= at < stop else 1.0)
    remembered = [f.to_dict() for f in replay(jobs, rules(), since, until)]
    monkeypatch.setattr(Fleet, "memo", lambda self, slot, inputs, fn, *args: fn(*args))
    computed = [f.to_dict() for f in replay(jobs, rules(), since, until)]
    assert remembered == computed
    assert [(f["labels"]["component"], f["resolved_at"] is not None) for f in computed] == [
        ("checkpoint", True)
    ]
