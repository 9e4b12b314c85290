"""The simulator's generative model: determinism, distributions, regressions, the planted truth."""

from __future__ import annotations

import hashlib
import math
import statistics
from collections import Counter

import pytest

from ett_simulator import FleetSpec, generate, load_profile, parse_regression, simulate
from ett_simulator.profile import CAUSES

START = 1_790_000_000.0  # 2026-09-21, a fixed start makes runs comparable


def _digest(fleet: FleetSpec) -> tuple[str, int]:
    h = hashlib.sha256()
    result = simulate(fleet, None, on_body=h.update)
    return h.hexdigest(), result.spans


def test_same_arguments_give_byte_identical_spans() -> None:
    fleet = FleetSpec(load_profile(), jobs=12, days=3, seed=7, start=START)
    first, spans = _digest(fleet)
    again, _ = _digest(FleetSpec(load_profile(), jobs=12, days=3, seed=7, start=START))
    other, _ = _digest(FleetSpec(load_profile(), jobs=12, days=3, seed=8, start=START))
    assert spans > 1000
    assert first == again
    assert other != first


def test_a_job_does_not_change_when_the_fleet_grows() -> None:
    small = {
        t.job_id: t for _, t in generate(FleetSpec(load_profile(), jobs=5, seed=3, start=START))
    }
    big = {t.job_id: t for _, t in generate(FleetSpec(load_profile(), jobs=9, seed=3, start=START))}
    assert small and all(big[j] == t for j, t in small.items())


def _fleet(jobs: int, overrides: dict[str, object], seed: int = 11) -> list:
    prof = load_profile(overrides=overrides)  # type: ignore[arg-type]
    return [t for _, t in generate(FleetSpec(prof, jobs=jobs, days=30, seed=seed, start=START))]


def test_phase_durations_match_their_log_normal_parameters() -> None:
    truths = _fleet(
        300, {"fleet": {"rank_jitter_sigma": 0.0}, "startup": {"straggler_probability": 0.0}}
    )
    prof = load_profile()
    trained = [t for t in truths if not t.standalone_publish]
    assert len(trained) >= 290  # of 300: the few still running at the history's end are left out
    for phase in ("model_init", "sharding_plan", "dataloader_init"):
        dist = next(p.dist for p in prof.phases if p.name == phase)
        assert dist is not None
        # without jitter every rank of an attempt has the same draw: one sample per attempt
        samples = [t.phase_s[phase][0] for t in truths if phase in t.phase_s]
        assert len(samples) >= len(trained)
        mean = statistics.fmean(samples)
        assert mean == pytest.approx(dist.mean, rel=0.1), (phase, mean, dist.mean)
        median = statistics.median(samples)
        assert median == pytest.approx(dist.median, rel=0.12), (phase, median, dist.median)


def test_failures_follow_the_rate_and_the_cause_mix() -> None:
    rate = 0.4
    weights = {
        "exception": 4,
        "oom": 1,
        "nccl_timeout": 1,
        "hardware": 1,
        "preemption": 2,
        "killed": 1,
        "hang": 0,
    }
    truths = _fleet(
        250,
        {
            "fleet": {"max_restarts": 100},
            "failures": {"rate_per_hour": rate, "startup_probability": 0.0, "causes": weights},
        },
    )
    failures = sum(t.failures for t in truths)
    hours = sum(t.train_s for t in truths) / 3600
    assert failures > 200
    # the clean training time a killed attempt lost after its last window is not counted: a
    # bias of under a window per failure, far below the tolerance
    assert failures / hours == pytest.approx(rate, rel=0.15)
    causes: Counter[str] = Counter()
    for t in truths:
        causes.update(t.failure_causes)
    total = sum(weights.values())
    for cause in CAUSES:
        expected = weights[cause] / total
        seen = causes.get("unknown" if cause == "hang" else cause, 0) / failures
        assert abs(seen - expected) < 0.06, (cause, seen, expected)


def test_truth_tiles_the_wall_time_and_every_cause_appears() -> None:
    truths = _fleet(150, {"failures": {"rate_per_hour": 0.3}}, seed=5)
    seen: set[str] = set()
    for t in truths:
        assert t.productive_s + t.idle_s + t.failure_s == pytest.approx(t.wall_s, abs=1e-6)
        lost = sum(t.lost_by_component.values())
        assert lost == pytest.approx(t.idle_s + t.failure_s, abs=1e-6)
        assert t.ett_pct + t.idle_pct + t.failure_pct == pytest.approx(100.0)
        assert t.failures == len(t.ttr_s) == sum(t.failure_causes.values())
        seen.update(t.failure_causes)
    assert {"exception", "oom", "nccl_timeout", "hardware", "preemption", "killed"} <= seen
    assert "unknown" in seen  # hangs, ended by the watchdog
    publish = [t for t in truths if t.standalone_publish]
    assert publish and all(t.productive_s == 0 and t.tts_s is None for t in publish)
    assert {t.state for t in truths} == {"completed", "failed"}


def test_a_regression_multiplies_its_component_from_its_instant() -> None:
    at = START + 15 * 86400
    iso = "2026-10-06T14:13:20Z"
    assert parse_regression(f"model=dcn-v2 component=checkpoint factor=4 at={iso}").at == at
    # sync saves only: the sync/async mix would swamp the factor with few jobs per side
    prof = load_profile(
        overrides={"failures": {"rate_per_hour": 0.0}, "checkpoint": {"async_probability": 0.0}}
    )
    regs = (parse_regression(f"model=dcn-v2 component=checkpoint factor=4 at={iso}"),)
    fleet = FleetSpec(prof, jobs=160, days=30, seed=2, start=START, regressions=regs)
    before: list[float] = []
    after: list[float] = []
    others_after: list[float] = []
    for _, t in generate(fleet):
        if t.standalone_publish or t.train_s < 3600:
            continue
        per_hour = t.checkpoint_blocking_s / (t.train_s / 3600)
        alloc, end = t.attempts[0]["alloc"], t.attempts[-1]["end"]
        if t.model != "dcn-v2":
            if alloc > at:
                others_after.append(per_hour)
        elif end < at:
            before.append(per_hour)
        elif alloc > at:
            after.append(per_hour)
    assert len(before) >= 5 and len(after) >= 5
    ratio = statistics.fmean(after) / statistics.fmean(before)
    assert ratio == pytest.approx(4.0, rel=0.2)
    untouched = statistics.fmean(others_after) / statistics.fmean(before)
    assert untouched == pytest.approx(1.0, rel=0.2)


def test_regression_of_the_failure_rate() -> None:
    prof = load_profile(
        overrides={
            "fleet": {"max_restarts": 100},
            "failures": {"rate_per_hour": 0.1, "startup_probability": 0.0},
        }
    )
    regs = (parse_regression("team=ads component=failure factor=5 at=2000-01-01"),)
    fleet = FleetSpec(prof, jobs=200, days=30, seed=4, start=START, regressions=regs)
    rates: dict[bool, list[float]] = {True: [0, 0], False: [0, 0]}  # type: ignore[dict-item]
    for _, t in generate(fleet):
        r = rates[t.team == "ads"]
        r[0] += t.failures
        r[1] += t.train_s / 3600
    ads = rates[True][0] / rates[True][1]
    rest = rates[False][0] / rates[False][1]
    assert ads / rest == pytest.approx(5.0, rel=0.35)
    assert math.isfinite(ads)
