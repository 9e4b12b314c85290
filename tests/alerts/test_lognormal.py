"""The log-normal test of the regression rule (``test: lognormal``): Student's t tail against
known values and closed forms, the predictive t-test's formula, its false-alarm rate on
log-normal draws, the guards that send zeros and heavy tails to the rank test, the rules field,
and the rule finding a clean change from fewer jobs than the rank test."""

from __future__ import annotations

import math
import random

import pytest

from ett_collector.alerts import Fleet, JobFacts, evaluate
from ett_collector.alerts._lognormal import (
    GUARD_SIZE,
    LogBaseline,
    log_shape,
    regularized_beta,
    student_t_sf,
)
from ett_collector.alerts.rules import RulesError, RuleSet, rules_from_mappings

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0


@pytest.mark.parametrize(
    ("t", "df", "want"),
    [  # one-sided tails of Student's t (the tables' critical values and a computed tail)
        (2.0, 10, 0.0366940),
        (1.812461, 10, 0.05),
        (2.228139, 10, 0.025),
        (12.706205, 1, 0.025),
        (2.022691, 39, 0.025),
        (0.0, 5, 0.5),
        (-2.0, 10, 1.0 - 0.0366940),
    ],
)
def test_the_t_tail_matches_known_values(t: float, df: float, want: float) -> None:
    assert student_t_sf(t, df) == pytest.approx(want, rel=2e-4)


def test_the_t_tail_matches_closed_forms_and_the_normal_limit() -> None:
    for t in (0.1, 0.7, 1.5, 3.0, 10.0, 100.0):
        assert student_t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, rel=1e-9)
        assert student_t_sf(t, 2) == pytest.approx(0.5 - t / (2 * math.sqrt(2 + t * t)), rel=1e-9)
        normal = 0.5 * math.erfc(t / math.sqrt(2))
        assert student_t_sf(t, 1e7) == pytest.approx(normal, rel=1e-3, abs=1e-300)
    assert student_t_sf(math.inf, 3) == 0.0
    with pytest.raises(ValueError):
        student_t_sf(1.0, 0)


def test_the_incomplete_beta_matches_closed_forms() -> None:
    for x in (0.01, 0.2, 0.5, 0.8, 0.99):
        assert regularized_beta(x, 3.5, 1.0) == pytest.approx(x**3.5, rel=1e-10)
        assert regularized_beta(x, 1.0, 2.5) == pytest.approx(1 - (1 - x) ** 2.5, rel=1e-10)
        assert regularized_beta(x, 4.0, 4.0) + regularized_beta(1 - x, 4.0, 4.0) == pytest.approx(1)
    assert regularized_beta(0.5, 7.0, 7.0) == pytest.approx(0.5)
    assert regularized_beta(0.0, 2, 2) == 0.0 and regularized_beta(1.0, 2, 2) == 1.0


def test_the_p_value_is_the_predictive_t_test_of_the_log_values() -> None:
    rng = random.Random(3)
    ys = [math.exp(rng.gauss(3.0, 0.4)) for _ in range(30)]
    xs = [math.exp(rng.gauss(4.0, 0.4)) for _ in range(6)]
    logs = [math.log(y) for y in ys]
    m = sum(logs) / 30
    s = math.sqrt(sum((v - m) ** 2 for v in logs) / 29)
    sizes = [1, 2, 5, 6]
    got = LogBaseline(ys).scan(xs, sizes)
    for k, p in zip(sizes, got, strict=True):
        x = sum(math.log(v) for v in xs[:k]) / k
        want = student_t_sf((x - m) / (s * math.sqrt(1 / k + 1 / 30)), 29)
        assert p == pytest.approx(want, rel=1e-12)
    assert LogBaseline(ys).greater(xs) == got[-1]
    assert LogBaseline(ys).greater([]) == 1.0


def test_its_false_alarm_rate_on_log_normal_draws_is_its_level() -> None:
    rng = random.Random(5)
    trials, k = 4000, GUARD_SIZE + 2  # past the guard: the plain t-test
    hits = {0.05: 0, 0.01: 0}
    for _ in range(trials):
        ys = [math.exp(rng.gauss(0.0, 0.7)) for _ in range(25)]
        xs = [math.exp(rng.gauss(0.0, 0.7)) for _ in range(k)]
        p = LogBaseline(ys).greater(xs)
        for level in hits:
            hits[level] += p <= level
    assert 0.04 < hits[0.05] / trials < 0.06  # binomial sd 0.0034
    assert 0.005 < hits[0.01] / trials < 0.015


def test_few_jobs_count_only_when_all_lie_above_the_baseline_median() -> None:
    ys = [float(v) for v in range(10, 50)]
    one_low = [1000.0, 5.0]  # one extreme job and one ordinary one
    alone = LogBaseline(ys).greater([1000.0])
    assert alone < 0.05 and LogBaseline(ys).scan(one_low, [1, 2]) == [alone, 1.0]
    assert LogBaseline(ys).greater([1000.0, 900.0]) < 1e-3


def test_zeros_and_heavy_tails_stay_on_the_rank_test() -> None:
    rng = random.Random(8)
    normal = [math.exp(rng.gauss(0, 0.5)) for _ in range(40)]
    assert LogBaseline.fits(normal, [1.0, 2.0])
    assert not LogBaseline.fits([0.0, *normal], [1.0])  # a zero has no log
    assert not LogBaseline.fits(normal, [0.0, 1.0])
    assert not LogBaseline.fits([2.0] * 40, [3.0])  # constant
    assert not LogBaseline.fits(normal[:2], [3.0])  # too few
    heavy = [*normal[:36], 50.0, 80.0, 120.0, 400.0]  # a right tail: restarts paying again
    shape = log_shape(heavy)
    assert shape is not None and (shape[0] > 0.5 or shape[1] > 1.0)
    assert not LogBaseline.fits(heavy, [1.0])
    assert log_shape([3.0, 3.0]) is None


def rules(test: str) -> RuleSet:
    return rules_from_mappings(
        [
            {
                "name": "regression_by_model",
                "kind": "regression",
                "window": "24h",
                "baseline": "7d",
                "test": test,
            }
        ]
    )


def test_the_rules_field_names_the_test() -> None:
    assert rules("lognormal").rules[0].test == "lognormal"
    assert rules("rank").rules[0].test == "rank"
    with pytest.raises(RulesError, match=r"regression_by_model.*'test'.*rank or lognormal"):
        rules("t")


def _fleet(seed: int, onset: float) -> list[JobFacts]:
    """One model, 6 jobs a day of 3 h and 4 GPUs; checkpoints ~40 s per job-hour, log-normal
    (sd 0.3), 5x from ``onset``."""
    rng = random.Random(seed)
    out = []
    for i in range(12 * 6):
        end = T0 + (i + rng.random()) * DAY / 6
        wall = 3 * HOUR
        factor = 5.0 if end - HOUR >= onset else 1.0
        ckpt = 40.0 * 3 * rng.lognormvariate(0, 0.3) * factor
        lost = {"checkpoint": ckpt, "data": 180.0 * rng.lognormvariate(0, 0.3)}
        out.append(
            JobFacts(
                job_id=f"m-{i:04d}",
                model="m",
                team="ads",
                state="completed",
                alloc=end - wall,
                end=end,
                wall=wall,
                productive=wall - sum(lost.values()),
                idle=sum(lost.values()),
                failure=0.0,
                blocking=ckpt,
                unsaved=0.0,
                tts=60.0,
                lost=lost,
                gpus=4,
                failures=0,
            )
        )
    return out


def _first_firing(jobs: list[JobFacts], rule_set: RuleSet, onset: float) -> float | None:
    [rule] = rule_set.rules
    f = Fleet(jobs)
    for step in range(0, 36 * 2):
        t = onset + step * HOUR / 2
        if any(
            x.labels.get("component") == "checkpoint"
            for x in evaluate(rule, f, t, live=False, active={})
        ):
            return t
    return None


def test_a_clean_change_is_found_from_fewer_jobs_than_the_rank_test_needs() -> None:
    onset = T0 + 9 * DAY
    jobs = _fleet(2, onset)
    lognormal = _first_firing(jobs, rules("lognormal"), onset)
    rank = _first_firing(jobs, rules("rank"), onset)
    assert lognormal is not None and rank is not None
    assert onset < lognormal < rank
    ended = sum(1 for j in jobs if onset < j.end <= lognormal)
    assert ended < 5  # the rank test's floor: about 5 jobs at this level
