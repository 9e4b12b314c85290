"""The detector's tests against brute force: the rank test's exact p-value counts every
ordering, its approximation stays near the permutation distribution with ties, the Poisson
test sums the binomial tail, Benjamini-Hochberg matches its definition."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ett_collector.alerts._stats import (
    StratifiedRankBaseline,
    benjamini_hochberg,
    poisson_rate_greater,
    rank_test_greater,
    rank_test_less,
)


def _u(x: list[float], y: list[float]) -> float:
    return sum((a > b) + 0.5 * (a == b) for a in x for b in y)


def _permutation_p(x: list[float], y: list[float]) -> float:
    """P(U >= observed) over every split of the pooled values (exact, brute force)."""
    pooled, n1 = [*x, *y], len(x)
    seen = _u(x, y)
    hits = total = 0
    for idx in itertools.combinations(range(len(pooled)), n1):
        chosen = set(idx)
        a = [pooled[i] for i in idx]
        b = [pooled[i] for i in range(len(pooled)) if i not in chosen]
        hits += _u(a, b) >= seen - 1e-9
        total += 1
    return hits / total


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=5, unique=True),
    st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=7, unique=True),
)
def test_exact_rank_test_equals_the_permutation_count(x: list[float], y: list[float]) -> None:
    if set(x) & set(y):
        return  # ties across the samples take the approximation
    assert rank_test_greater(x, y) == pytest.approx(_permutation_p(x, y), abs=1e-12)


def test_the_extreme_exact_p_value_is_one_ordering_in_all() -> None:
    recent, baseline = [10.0, 11.0, 12.0], [float(i) / 10 for i in range(30)]
    assert rank_test_greater(recent, baseline) == pytest.approx(1 / math.comb(33, 3))
    assert rank_test_less(recent, baseline) == pytest.approx(1.0)


def test_the_approximation_with_ties_is_near_the_permutation_distribution() -> None:
    rng = random.Random(3)
    for _ in range(20):
        x = [float(rng.choice([0, 0, 1, 2, 3, 5])) for _ in range(6)]
        y = [float(rng.choice([0, 0, 1, 2, 3])) for _ in range(9)]
        exact = _permutation_p(x, y)
        assert abs(rank_test_greater(x, y) - exact) < 0.06, (x, y)


def test_no_evidence_gives_one() -> None:
    assert rank_test_greater([], [1.0]) == 1.0
    assert rank_test_greater([1.0, 1.0], [1.0, 1.0, 1.0]) == 1.0
    assert poisson_rate_greater(0, 10.0, 5, 100.0) == 1.0
    assert poisson_rate_greater(3, 0.0, 5, 100.0) == 1.0


def test_poisson_test_is_the_binomial_tail() -> None:
    k1, t1, k0, t0 = 6, 10.0, 4, 40.0
    p, n = t1 / (t1 + t0), k1 + k0
    tail = sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k1, n + 1))
    assert poisson_rate_greater(k1, t1, k0, t0) == pytest.approx(tail, rel=1e-9)
    # the same rates give no evidence; four times the rate does
    assert poisson_rate_greater(2, 10.0, 8, 40.0) > 0.3
    assert poisson_rate_greater(8, 10.0, 8, 40.0) < 0.01


def test_poisson_false_alarms_stay_at_their_level_on_simulated_equal_rates() -> None:
    rng = random.Random(7)

    def poisson(mean: float) -> int:
        k, t = 0, rng.expovariate(1.0)
        while t < mean:
            k += 1
            t += rng.expovariate(1.0)
        return k

    trials = 4000
    low = sum(
        poisson_rate_greater(poisson(2.0), 20.0, poisson(14.0), 140.0) <= 0.05
        for _ in range(trials)
    )
    assert low / trials <= 0.05  # exact and conditional: at most its level (discreteness)


def test_benjamini_hochberg_matches_its_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.005, 0.5]
    q = benjamini_hochberg(p)
    # sorted: 0.005, 0.01, 0.03, 0.04, 0.5 -> 0.025, 0.025, 0.05, 0.05, 0.5
    assert q == pytest.approx([0.025, 0.05, 0.05, 0.025, 0.5])
    assert benjamini_hochberg([]) == []
    assert all(a >= b for a, b in zip(q, p, strict=True))


def test_the_scan_gives_each_prefix_the_plain_rank_tests_p_value() -> None:
    from ett_collector.alerts._stats import RankBaseline

    rng = random.Random(11)
    for trial in range(300):
        pool = [0.0, 0.0, 1.0, 2.5, rng.random()]
        tied = trial % 2 == 1  # half the trials draw from a few values: ties across samples

        def draw(pool: list[float] = pool, tied: bool = tied) -> float:
            return rng.choice(pool) if tied else rng.random()

        xs = [draw() for _ in range(rng.randint(1, 14))]
        ys = [draw() for _ in range(rng.randint(1, 60))]
        sizes = sorted({rng.randint(1, len(xs)) for _ in range(3)})
        got = RankBaseline(ys).scan(xs, sizes)
        want = [rank_test_greater(xs[:k], ys) for k in sizes]
        assert got == pytest.approx(want, abs=1e-12)


def test_the_exact_u_distribution_is_the_count_of_orderings() -> None:
    from ett_collector.alerts._stats import _u_counts

    for n1, n2 in [(1, 1), (2, 3), (3, 2), (4, 4), (3, 7), (6, 2)]:
        counts = [0] * (n1 * n2 + 1)
        for pos in itertools.combinations(range(n1 + n2), n1):
            counts[sum(p - i for i, p in enumerate(pos))] += 1  # baseline values below each
        assert _u_counts(n1, n2) == tuple(counts)
    assert sum(_u_counts(12, 150)) == math.comb(162, 12)


def _brute_stratified(recent: list[tuple[str, float]], base: list[tuple[str, float]]) -> float:
    """P(sum of the strata's U >= the one seen) by listing every split within each stratum."""

    def u(r: list[float], b: list[float]) -> int:
        return sum(1 for x in r for y in b if x > y)

    strata = sorted({k for k, _ in base})
    pools = {k: [v for s, v in recent if s == k] + [v for s, v in base if s == k] for k in strata}
    mine = {k: sum(1 for s, _ in recent if s == k) for k in strata}
    seen = sum(u(pools[k][: mine[k]], pools[k][mine[k] :]) for k in strata)
    splits = [list(itertools.combinations(range(len(pools[k])), mine[k])) for k in strata]
    hits = total = 0
    for choice in itertools.product(*splits):
        s = 0
        for k, idx in zip(strata, choice, strict=True):
            chosen = set(idx)
            r = [pools[k][i] for i in idx]
            s += u(r, [v for i, v in enumerate(pools[k]) if i not in chosen])
        total += 1
        hits += s >= seen
    return hits / total


def test_the_stratified_rank_test_is_exact() -> None:
    rng = random.Random(3)
    for _ in range(25):
        base = [("a", rng.random()) for _ in range(rng.randint(2, 5))]
        base += [("b", 5 + rng.random()) for _ in range(rng.randint(2, 5))]
        recent = [(k, rng.random() + (5 if k == "b" else 0)) for k in rng.choices("ab", k=3)]
        [p] = StratifiedRankBaseline(base).scan(recent, [len(recent)])
        assert p == pytest.approx(_brute_stratified(recent, base), abs=1e-12)


def test_one_stratum_is_the_plain_rank_test_and_an_unknown_one_is_no_evidence() -> None:
    base = [1.0, 5.0, 2.0, 8.0, 3.0]
    one = StratifiedRankBaseline([("s", v) for v in base])
    assert one.scan([("s", 9.0), ("s", 4.0)], [2]) == [
        pytest.approx(rank_test_greater([9, 4], base))
    ]
    assert one.scan([("new", 100.0)], [1]) == [1.0]


def test_stratifying_finds_a_change_hidden_between_two_modes() -> None:
    # async saves ~3 s, sync ~20 s; the newest async jobs tripled to ~9 s, between the modes
    rng = random.Random(7)
    base = [("async", 3 * rng.lognormvariate(0, 0.3)) for _ in range(30)]
    base += [("sync", 20 * rng.lognormvariate(0, 0.3)) for _ in range(20)]
    recent = [("async", 9 * rng.lognormvariate(0, 0.3)) for _ in range(4)]
    plain = rank_test_greater([v for _, v in recent], [v for _, v in base])
    [stratified] = StratifiedRankBaseline(base).scan(recent, [4])
    assert stratified < 1e-4 < plain
