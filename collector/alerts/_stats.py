"""The tests the regression detector runs, in plain Python (no SciPy in the server).

Each returns a one-sided p-value: the probability, if nothing changed, of a recent sample at
least as far from the baseline as the one seen. Their assumptions (see ``docs/alerts.md``):

- :func:`rank_test_greater` (Mann-Whitney U): the recent jobs' values and the baseline's are
  independent draws, and under no change they come from one distribution (exchangeable). It
  assumes nothing of its shape: lost seconds per job-hour are skewed, zero-inflated and
  multi-modal (sync and async checkpoints), where a t-test's normality would not hold.
- :class:`StratifiedRankBaseline`: the same within each stratum (jobs of one checkpoint mode, or
  of one start-up compile-cache outcome), the strata independent of each other.
- :func:`poisson_rate_greater`: failures are a Poisson process in training time, with one rate
  in the baseline and, under no change, the same rate in the recent window. Conditional on the
  total count, the recent count is binomial (the exact conditional test of two Poisson rates).
- :func:`benjamini_hochberg`: the p-values of one evaluation are independent or positively
  dependent (PRDS); it then bounds the expected share of false findings among the findings by
  ``q``.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

EXACT_MAX_CONVOLUTION = 20_000
"""The stratified rank test is exact when the distributions of all its strata but the largest
have at most this many cells together (their convolution's cost); else normal."""

EXACT_MAX_CELLS = 2500
"""Without ties and with ``n1 * n2`` at most this, the rank test's p-value is exact (the
distribution of U counted); above it, or with ties, the normal approximation with the tie and
continuity corrections (within a few % of the exact value there)."""


def _midranks(values: Sequence[float]) -> tuple[list[float], float]:
    """Ranks (1-based, ties share their mean rank) and the tie term ``sum(t**3 - t)``."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    i = 0
    while i < len(order):
        k = i
        while k + 1 < len(order) and values[order[k + 1]] == values[order[i]]:
            k += 1
        rank = (i + k) / 2 + 1
        for m in range(i, k + 1):
            ranks[order[m]] = rank
        t = k - i + 1
        ties += t**3 - t
        i = k + 1
    return ranks, ties


@lru_cache(maxsize=4096)
def _u_counts(n1: int, n2: int) -> tuple[int, ...]:
    """How many of the ``C(n1 + n2, n1)`` orderings give each U = 0 .. n1 * n2 (no ties).

    They are the coefficients of the Gaussian binomial ``[n1 + n2 choose m]_q`` with
    ``m = min(n1, n2)``, the product over ``i = 1 .. m`` of ``(1 - q^(n + i)) / (1 - q^i)``
    (``n`` the larger size): each factor is one multiplication and one exact division of a
    polynomial, ``O(m * n1 * n2)`` steps in all and no table of smaller sizes.
    """
    m, n = min(n1, n2), max(n1, n2)
    size = m * n + 1
    poly = [0] * size
    poly[0] = 1
    for i in range(1, m + 1):
        shift = n + i
        for u in range(size - 1, shift - 1, -1):  # times (1 - q^(n + i))
            poly[u] -= poly[u - shift]
        for u in range(i, size):  # divided by (1 - q^i): a running sum with stride i
            poly[u] += poly[u - i]
    return tuple(poly)


@lru_cache(maxsize=4096)
def _u_tail(n1: int, n2: int) -> tuple[float, ...]:
    """``P(U >= u)`` for u = 0 .. n1 * n2 under no change (no ties)."""
    counts = _u_counts(n1, n2)
    total = math.comb(n1 + n2, n1)
    tail, acc = [0.0] * len(counts), 0
    for u in range(len(counts) - 1, -1, -1):
        acc += counts[u]
        tail[u] = acc / total
    return tuple(tail)


def rank_test_greater(recent: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided Mann-Whitney p-value that ``recent`` tends to exceed ``baseline``.

    1.0 when either sample is empty or every value is equal.
    """
    n1, n2 = len(recent), len(baseline)
    if n1 == 0 or n2 == 0:
        return 1.0
    ranks, ties = _midranks([*recent, *baseline])
    u = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    if ties == 0 and n1 * n2 <= EXACT_MAX_CELLS:
        return _u_tail(n1, n2)[math.ceil(u - 1e-9)]
    return _normal_tail(u, n1, n2, ties)


class RankBaseline:
    """A baseline sample ready for many rank tests against it (the scan of the regression rule
    tests nested recent samples, its newest jobs, against one baseline): its values sorted and
    their tie term. U is a sum of one term per recent value (the baseline values below it,
    and half those equal to it), so the nested samples' p-values come from running sums:
    ``O(n1 log n2)`` for the whole scan. The p-values are those of :func:`rank_test_greater`."""

    def __init__(self, baseline: Sequence[float]) -> None:
        self.values = sorted(baseline)
        self.ties = 0.0
        if len(set(self.values)) < len(self.values):  # ties: count them (a pass in C if not)
            self.ties = float(sum(t**3 - t for t in Counter(self.values).values() if t > 1))

    def greater(self, recent: Sequence[float]) -> float:
        """One-sided p-value that ``recent`` tends to exceed this baseline."""
        return self.scan(recent, [len(recent)])[0] if recent else 1.0

    def scan(self, recent: Sequence[float], sizes: Sequence[int]) -> list[float]:
        """The p-value of each first ``k`` values of ``recent``, for each ``k`` of ``sizes``."""
        n2 = len(self.values)
        want = set(sizes)
        out: dict[int, float] = {}
        mine: dict[float, int] = {}
        u, ties = 0.0, self.ties
        for n1, x in enumerate(recent, start=1):
            du, dties = self.step(x, mine)
            u, ties = u + du, ties + dties
            if n1 in want:
                out[n1] = self._tail(u, n1, n2, ties)
        return [out.get(k, 1.0) for k in sizes]

    def step(self, x: float, mine: dict[float, int]) -> tuple[float, float]:
        """One more recent value ``x``: what it adds to U (the baseline values below it, half
        those equal) and to the tie term; ``mine`` counts the recent values so far."""
        below = bisect.bisect_left(self.values, x)
        base = bisect.bisect_right(self.values, x, below) - below
        had = mine.get(x, 0)
        mine[x] = had + 1
        t0, t1 = had + base, had + base + 1
        return below + base / 2.0, (t1**3 - t1) - (t0**3 - t0)

    @staticmethod
    def _tail(u: float, n1: int, n2: int, ties: float) -> float:
        if n2 == 0:
            return 1.0
        if ties == 0 and n1 * n2 <= EXACT_MAX_CELLS:
            return _u_tail(n1, n2)[math.ceil(u - 1e-9)]
        return _normal_tail(u, n1, n2, ties)


class StratifiedRankBaseline:
    """A baseline split into strata (jobs of one kind, such as sync and async checkpoints) for
    the stratified rank test: each recent value is ranked only among the baseline values of its
    own stratum, and the statistic is the sum of the strata's U. Under no change the strata's U
    are independent, so the sum's distribution is the convolution of theirs: exact without ties
    when every stratum is within :data:`EXACT_MAX_CELLS` and the convolution within
    :data:`EXACT_MAX_CONVOLUTION`, else the normal approximation with
    the strata's means and tie-corrected variances added. A stratum the baseline lacks carries
    no evidence and is left out. It is the plain rank test when there is one stratum; with two
    modes 7x apart it no longer needs a change to climb over the other mode to show."""

    def __init__(self, baseline: Sequence[tuple[str, float]]) -> None:
        groups: dict[str, list[float]] = {}
        for stratum, value in baseline:
            groups.setdefault(stratum, []).append(value)
        self.strata = {k: RankBaseline(v) for k, v in groups.items()}

    def scan(self, recent: Sequence[tuple[str, float]], sizes: Sequence[int]) -> list[float]:
        """The p-value of each first ``k`` values of ``recent``, for each ``k`` of ``sizes``."""
        want = set(sizes)
        out: dict[int, float] = {}
        u: dict[str, float] = {}
        n1: dict[str, int] = {}
        mine: dict[str, dict[float, int]] = {}
        ties = {k: b.ties for k, b in self.strata.items()}
        for i, (stratum, x) in enumerate(recent, start=1):
            b = self.strata.get(stratum)
            if b is not None:
                du, dties = b.step(x, mine.setdefault(stratum, {}))
                u[stratum] = u.get(stratum, 0.0) + du
                n1[stratum] = n1.get(stratum, 0) + 1
                ties[stratum] += dties
            if i in want:
                out[i] = self._tail(u, n1, ties)
        return [out.get(k, 1.0) for k in sizes]

    def _tail(self, u: dict[str, float], n1: dict[str, int], ties: dict[str, float]) -> float:
        """``P(sum of U >= the sum seen)`` under no change."""
        used = [k for k in n1 if n1[k] > 0]
        if not used:
            return 1.0
        sizes = {k: (n1[k], len(self.strata[k].values)) for k in used}
        total = sum(u[k] for k in used)
        exact = all(ties[k] == 0 and a * b <= EXACT_MAX_CELLS for k, (a, b) in sizes.items())
        cells = sorted(a * b + 1 for a, b in sizes.values())
        if exact and math.prod(cells[:-1]) <= EXACT_MAX_CONVOLUTION:
            # the smaller strata's U convolved, then summed against the largest one's tail
            ordered = sorted(sizes.values(), key=lambda ab: ab[0] * ab[1])
            pmf = [1.0]
            for a, b in ordered[:-1]:
                counts, whole = _u_counts(a, b), math.comb(a + b, a)
                pmf = _convolve(pmf, [c / whole for c in counts])
            tail = _u_tail(*ordered[-1])
            need = math.ceil(total - 1e-9)
            p = sum(
                x * (1.0 if need - i <= 0 else tail[need - i] if need - i < len(tail) else 0.0)
                for i, x in enumerate(pmf)
            )
            return min(1.0, p)
        mean = sum(a * b / 2.0 for a, b in sizes.values())
        var = sum(_u_variance(a, b, ties[k]) for k, (a, b) in sizes.items())
        return _upper_normal(total - mean, var)


def _convolve(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """The distribution of the sum of two independent counts."""
    out = [0.0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                out[i + j] += x * y
    return out


def _normal_tail(u: float, n1: int, n2: int, ties: float) -> float:
    """``P(U >= u)`` by the normal approximation with tie and continuity corrections."""
    return _upper_normal(u - n1 * n2 / 2.0, _u_variance(n1, n2, ties))


def _u_variance(n1: int, n2: int, ties: float) -> float:
    """The variance of U under no change, with the tie correction."""
    n = n1 + n2
    return n1 * n2 / 12.0 * ((n + 1) - ties / (n * (n - 1)))


def _upper_normal(excess: float, var: float) -> float:
    """``P(Z >= (excess - 0.5) / sd)``: the upper tail with the continuity correction."""
    if var <= 0:
        return 1.0
    z = (excess - 0.5) / math.sqrt(var)
    return min(1.0, 0.5 * math.erfc(z / math.sqrt(2.0)))


def rank_test_less(recent: Sequence[float], baseline: Sequence[float]) -> float:
    """One-sided Mann-Whitney p-value that ``recent`` tends to fall below ``baseline``."""
    return rank_test_greater([-x for x in recent], [-x for x in baseline])


def _log_binom_pmf(k: int, n: int, p: float) -> float:
    return (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )


def poisson_rate_greater(k1: int, t1: float, k0: int, t0: float) -> float:
    """One-sided p-value that the rate behind ``k1`` events in exposure ``t1`` exceeds the rate
    behind ``k0`` events in ``t0`` (exact, conditional on ``k1 + k0``).

    1.0 without events, without recent events or without exposure on either side.
    """
    n = k1 + k0
    if k1 == 0 or t1 <= 0 or t0 <= 0:
        return 1.0
    p = t1 / (t1 + t0)
    if p >= 1.0:
        return 1.0
    terms = [_log_binom_pmf(i, n, p) for i in range(k1, n + 1)]
    top = max(terms)
    return min(1.0, math.exp(top) * sum(math.exp(x - top) for x in terms))


def benjamini_hochberg(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in the input's order: a finding is a
    discovery at false-discovery rate ``q`` when its q-value is at most ``q``."""
    m = len(pvalues)
    order = sorted(range(m), key=pvalues.__getitem__)
    out = [1.0] * m
    running = 1.0
    for rank in range(m, 0, -1):
        i = order[rank - 1]
        running = min(running, pvalues[i] * m / rank)
        out[i] = min(1.0, running)
    return out
