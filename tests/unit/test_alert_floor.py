"""The CUSUM chain of ``tests/performance/bench_alert_floor.py``, whose delays are the floor
that docs/alerts.md compares the rule with, against values known in closed form or tabled."""

from __future__ import annotations

import math

import pytest

from tests.performance.bench_alert_floor import (
    _arl,
    gaussian_delay,
    gaussian_increments,
    poisson_increments,
)


def test_cusum_chain_matches_the_published_arl() -> None:
    """The chain against the classical values of a one-sided CUSUM of N(0, 1) with k = 0.5 and
    h = 5 (the integral-equation solution: ARL 930.9 in control, 10.38 at a shift of one σ;
    Siegmund's approximation gives 938 and 10.4)."""
    assert _arl(5.0, gaussian_increments(1.0, False)) == pytest.approx(930.9, rel=0.002)
    assert _arl(5.0, gaussian_increments(1.0, True)) == pytest.approx(10.38, rel=0.002)


def test_poisson_chain_of_a_sure_alarm() -> None:
    """A threshold below one failure's step: the first failure alarms, so the ARL is the mean
    wait for a failure, 1 / P(k >= 1) steps."""
    rate, factor = 0.1, 4.0
    expected = 1.0 / (1.0 - math.exp(-rate))
    assert _arl(0.5 * math.log(factor), poisson_increments(rate, factor, False)) == pytest.approx(
        expected, rel=1e-6
    )


def test_delay_falls_as_the_false_alarm_budget_shrinks_and_the_shift_grows() -> None:
    assert gaussian_delay(2.0, 10_000) > gaussian_delay(2.0, 1_000)
    assert gaussian_delay(1.0, 1_000) > gaussian_delay(2.0, 1_000) > 1.0
