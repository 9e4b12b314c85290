"""The stratified log-normal test (``startup_test: lognormal``, and ``test: lognormal`` for the
stratified components): its formula, its false-alarm rate on log-normal draws of two kinds far
apart, strata the baseline lacks, the guard, the shape screen on the residuals, the rules field,
and the start-up view needing three start-ups (``STARTUP_LOG_LEAST``)."""

from __future__ import annotations

import math
import random

import pytest

from ett_collector.alerts import Fleet, JobFacts, evaluate
from ett_collector.alerts._detect import STARTUP_LOG_LEAST
from ett_collector.alerts._lognormal import LogBaseline, StratifiedLogBaseline, student_t_sf
from ett_collector.alerts.rules import RulesError, RuleSet, rules_from_mappings

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0
WARM, COLD = 15.0, 120.0  # the simulator's compile modes: a warm cache, a cold one


def _draws(
    rng: random.Random, n_hit: int, n_miss: int, factor: float = 1.0
) -> list[tuple[str, float]]:
    out = [("hit", WARM * factor * rng.lognormvariate(0, 0.3)) for _ in range(n_hit)]
    out += [("miss", COLD * factor * rng.lognormvariate(0, 0.3)) for _ in range(n_miss)]
    rng.shuffle(out)
    return out


def test_the_p_value_is_the_pooled_within_stratum_t_test() -> None:
    rng = random.Random(4)
    base = _draws(rng, 9, 31)
    recent = [("hit", 50.0), ("miss", 300.0), ("miss", 260.0)]
    logs: dict[str, list[float]] = {}
    for s, v in base:
        logs.setdefault(s, []).append(math.log(v))
    means = {s: sum(v) / len(v) for s, v in logs.items()}
    ss = sum((x - means[s]) ** 2 for s, v in logs.items() for x in v)
    sd = math.sqrt(ss / (40 - 2))
    r = sum(math.log(v) - means[s] for s, v in recent) / 3
    spread = 1 / 3 + (1**2 / 9 + 2**2 / 31) / 9
    want = student_t_sf(r / (sd * math.sqrt(spread)), 38)
    got = StratifiedLogBaseline(base).scan(recent, [1, 3])
    assert got[1] == pytest.approx(want, rel=1e-12)
    assert got[0] == pytest.approx(
        student_t_sf((math.log(50.0) - means["hit"]) / (sd * math.sqrt(1 + 1 / 9)), 38)
    )


def test_one_stratum_is_the_plain_predictive_test() -> None:
    rng = random.Random(5)
    ys = [rng.lognormvariate(2, 0.4) for _ in range(25)]
    xs = [rng.lognormvariate(2.8, 0.4) for _ in range(5)]
    plain = StratifiedLogBaseline([("", y) for y in ys]).scan([("", x) for x in xs], [4, 5])
    assert LogBaseline(ys).scan(xs, [4, 5]) == plain
    logs = [math.log(y) for y in ys]
    m = sum(logs) / 25
    s = math.sqrt(sum((v - m) ** 2 for v in logs) / 24)
    x = sum(math.log(v) for v in xs) / 5
    assert plain[1] == pytest.approx(student_t_sf((x - m) / (s * math.sqrt(1 / 5 + 1 / 25)), 24))


def test_its_false_alarm_rate_is_its_level_on_two_kinds_far_apart() -> None:
    """Under no change (each kind's own log-normal, one sd) the p-value is uniform: the share
    of p <= 0.05 and of p <= 0.01 over 3,000 draws is the level, within 3 binomial sds."""
    rng = random.Random(6)
    ps = []
    for _ in range(3000):
        base = _draws(rng, 10, 30)
        recent = _draws(rng, 2, 4)
        if not all(v > StratifiedLogBaseline(base).median[s] for s, v in recent[:3]):
            recent = recent[3:] + recent[:3]  # keep the guard out of a test of the level
        ps.append(StratifiedLogBaseline(base).scan(recent, [6])[0])
    for level in (0.05, 0.01):
        share = sum(p <= level for p in ps) / len(ps)
        assert abs(share - level) <= 3 * math.sqrt(level * (1 - level) / len(ps))


def test_a_tripled_warm_compile_stands_out_of_its_own_kind() -> None:
    """Three warm-cache compiles tripled (45 s) lie between the kinds: the stratified test finds
    them; pooled, they sit under the mean of the bimodal log values and show nothing."""
    rng = random.Random(7)
    base = _draws(rng, 12, 28)
    recent = [("hit", 3 * WARM * rng.lognormvariate(0, 0.3)) for _ in range(3)]
    assert StratifiedLogBaseline.fits(base, recent)
    assert StratifiedLogBaseline(base).scan(recent, [3])[0] < 1e-5
    pooled = StratifiedLogBaseline([("", v) for _, v in base])
    assert pooled.scan([("", v) for _, v in recent], [3])[0] > 0.1


def test_a_kind_the_baseline_lacks_is_no_evidence_and_the_guard_holds() -> None:
    rng = random.Random(8)
    base = _draws(rng, 0, 40)
    b = StratifiedLogBaseline(base)
    assert b.scan([("hit", 1e6), ("hit", 1e6), ("hit", 1e6)], [3]) == [1.0]
    high, low = ("miss", 10 * COLD), ("miss", COLD / 2)
    assert b.scan([high, high, low], [3]) == [1.0]  # a suffix of 3 with one below the median
    assert b.scan([high, high, high], [3])[0] < 1e-6
    assert b.scan([high, high, high, low], [4])[0] < 1e-4  # above the guard's size: tested


def test_the_shape_screen_reads_the_residuals() -> None:
    rng = random.Random(9)
    base = _draws(rng, 15, 25)
    assert StratifiedLogBaseline.fits(base, [("hit", 20.0)])
    assert not StratifiedLogBaseline.fits(base, [("hit", 0.0)])  # a zero has no log
    tailed = [*base[:36], ("miss", 40 * COLD), ("miss", 30 * COLD), ("hit", 50 * WARM)]
    assert not StratifiedLogBaseline.fits(tailed, [("hit", 20.0)])  # a right tail
    assert not StratifiedLogBaseline.fits([("a", 1.0), ("b", 2.0), ("c", 3.0)], [])  # no df


def rules(**fields: object) -> RuleSet:
    return rules_from_mappings(
        [
            {
                "name": "regression_by_model",
                "kind": "regression",
                "window": "24h",
                "baseline": "7d",
                "components": ["compile"],
                **fields,
            }
        ]
    )


def test_the_rules_field_names_the_start_up_test() -> None:
    assert rules().rules[0].startup_test == "rank"
    assert rules(startup_test="lognormal").rules[0].startup_test == "lognormal"
    with pytest.raises(RulesError, match=r"regression_by_model.*'startup_test'.*rank or lognormal"):
        rules(startup_test="t")


def _job(i: int, end: float, compile_s: float, cache: str) -> JobFacts:
    wall = 3 * HOUR
    lost = {"compile": compile_s}
    return JobFacts(
        job_id=f"m-{i:04d}",
        model="m",
        team="ads",
        state="running",
        alloc=end - wall,
        end=end,
        wall=wall,
        productive=wall - compile_s,
        idle=compile_s,
        failure=0.0,
        blocking=0.0,
        unsaved=0.0,
        tts=60.0 + compile_s,
        lost=lost,
        gpus=8,
        failures=0,
        first_batch=end - wall + 60.0 + compile_s,
        startup=lost,
        compile_cache=cache,
    )


def test_the_start_up_view_needs_three_start_ups() -> None:
    """Cold-cache compiles 4x from the onset: nothing fires on the first two slow start-ups
    (one start-up far out in a tail fired alone on a flat simulated fleet), the third fires.
    """
    rng = random.Random(10)
    jobs = [_job(i, T0 + i * DAY / 6, COLD * rng.lognormvariate(0, 0.3), "miss") for i in range(42)]
    onset = T0 + 42 * DAY / 6
    jobs += [_job(42 + i, onset + (i + 1) * 4 * HOUR, 4 * COLD, "miss") for i in range(4)]
    fleet = Fleet(jobs)
    [rule] = rules(startup_test="lognormal", min_gpu_hours_per_day=0.1).rules

    def fires(r: object, n: int) -> bool:
        t = onset + n * 4 * HOUR + 1.0  # just after the n-th slow start-up's first batch
        found = evaluate(r, fleet, t, live=False, active={})  # type: ignore[arg-type]
        return any(x.labels.get("component") == "compile" for x in found)

    assert STARTUP_LOG_LEAST == 3
    assert not fires(rule, 1) and not fires(rule, 2)
    assert fires(rule, 3)
