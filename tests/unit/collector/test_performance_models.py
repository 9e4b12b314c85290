"""Per model (issue 26): the slow share sums like with like (``read/performance_models.py``)."""

from __future__ import annotations

import pytest

from ett_collector.read.performance_models import JobFacts, _by_model, _job_facts


def _facts(model: str, perf: dict[str, object]) -> JobFacts:
    """A job of ``model`` with 50 s of productive time and the figures ``perf``."""
    row = {"model": model, "wall_s": 100.0, "ett_pct": 50.0}
    return _job_facts(row, {"ideal_step_s": 0.1, "stragglers": [], **perf}, None, 0.0)


def test_the_slow_share_is_of_the_jobs_stepping_time() -> None:
    """It was slow seconds over the jobs' productive seconds, which leave out an attempt that
    failed unsaved while the slow time counts it: a model's share could pass 100 %."""
    jobs = [
        _facts("m", {"slow_s": 60.0, "stepping_s": 400.0}),  # 50 s productive: 120 % before
        _facts("m", {"slow_s": 0.0, "stepping_s": 100.0}),
    ]
    (row,) = _by_model(jobs)
    assert row["slow_pct"] == pytest.approx(100 * 60.0 / 500.0)
    assert (row["stepping_s"], row["productive_s"]) == (500.0, 100.0)


def test_figures_kept_before_stepping_time_existed_stay_within_100() -> None:
    """A pruned job's kept figures of before have no ``stepping_s``: their productive seconds
    are the base, as their ``slow_pct`` had, or their slow time where that is more."""
    (row,) = _by_model([_facts("m", {"slow_s": 60.0})])  # productive 50 s
    assert row["slow_pct"] == pytest.approx(100.0)
    (row,) = _by_model([_facts("m", {"slow_s": 10.0})])
    assert row["slow_pct"] == pytest.approx(20.0)
