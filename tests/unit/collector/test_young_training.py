"""Young's interval read backwards gives back the training time it came from."""

from __future__ import annotations

import pytest

from ett_collector.domain import young_interval, young_training


@pytest.mark.parametrize(
    ("blocking", "training", "failures"), [(2.0, 3600.0, 1), (0.5, 86400.0, 7)]
)
def test_young_training_inverts_young_interval(
    blocking: float, training: float, failures: int
) -> None:
    optimal = young_interval(blocking, training, failures)
    assert young_training(optimal, blocking, failures) == pytest.approx(training)


@pytest.mark.parametrize(
    ("optimal", "blocking", "failures"), [(None, 1.0, 2), (60.0, None, 2), (60.0, 1.0, 0)]
)
def test_young_training_is_none_without_an_optimum(
    optimal: float | None, blocking: float | None, failures: int
) -> None:
    assert young_training(optimal, blocking, failures) is None
