"""The worked example of docs/metrics.md ("Worked example"), figure by figure."""

from __future__ import annotations

import itertools

import pytest

from ett_collector.domain import Category, JobState, SegmentKind, summarize
from ett_collector.schemas import job_json
from tests.support.figures import (
    WORKED_EXAMPLE,
    WORKED_EXAMPLE_LOST_BY_COMPONENT,
    WORKED_EXAMPLE_STARTUP,
)
from tests.support.worked_example import worked_example


@pytest.fixture(scope="module")
def summary():
    return summarize(worked_example(), now=10_000.0)


def test_figures(summary) -> None:
    job = job_json(summary)
    for key, value in WORKED_EXAMPLE.items():
        assert job[key] == pytest.approx(value), key
    assert summary.state == JobState.COMPLETED


def test_startup_attribution(summary) -> None:
    startup0 = [s for s in summary.segments if s.attempt == 0 and s.kind == SegmentKind.STARTUP]
    per: dict[str, float] = {}
    for s in startup0:
        assert s.category == Category.IDLE
        for c, v in s.shares().items():
            per[c] = per.get(c, 0) + v
    assert per == pytest.approx(WORKED_EXAMPLE_STARTUP[0])
    startup1 = [s for s in summary.segments if s.attempt == 1 and s.kind == SegmentKind.STARTUP]
    assert {s.category for s in startup1} == {Category.FAILURE}
    per1: dict[str, float] = {}
    for s in startup1:
        for c, v in s.shares().items():
            per1[c] = per1.get(c, 0) + v
    assert per1 == pytest.approx(WORKED_EXAMPLE_STARTUP[1])


def test_gap_and_lost_by_component(summary) -> None:
    gaps = [s for s in summary.segments if s.kind == SegmentKind.RECOVERY_GAP]
    assert [(g.start, g.end, g.components) for g in gaps] == [(300, 360, ("scheduler",))]
    assert dict(summary.lost_by_component) == pytest.approx(WORKED_EXAMPLE_LOST_BY_COMPONENT)


def test_attempts(summary) -> None:
    a0, a1 = summary.attempts
    assert (a0.alloc, a0.first_batch, a0.end, a0.end_reason, a0.failed) == (0, 50, 300, None, True)
    assert a0.failure_cause == "killed"
    assert (a1.alloc, a1.first_batch, a1.end, a1.end_reason, a1.failed) == (
        360,
        400,
        500,
        "completed",
        False,
    )
    assert a1.critical_rank == 0


def test_checkpoint_advice(summary) -> None:
    advice = summary.checkpoint_advice
    # B = 10 s per checkpoint; T = clean training time 230 + 100; F = 1
    assert advice.mean_blocking_s == pytest.approx(10)
    assert advice.interval_s == pytest.approx(100)
    assert advice.optimal_interval_s == pytest.approx((2 * 10 * 330 / 1) ** 0.5)
    assert advice.saving_s is not None and advice.saving_s >= 0


def test_segments_tile_wall(summary) -> None:
    segs = summary.segments
    assert segs[0].start == 0 and segs[-1].end == 500
    for a, b in itertools.pairwise(segs):
        assert a.end == b.start
