"""The loop facts kept with a job's figures for the alerts (issue 26): throughput per rank,
loop rank-seconds and the straggler's window-by-window ratios against the other ranks."""

from __future__ import annotations

import pytest

from ett import semconv as sc
from ett_collector.domain._loop_facts import loop_facts
from ett_collector.domain._performance import performance
from ett_collector.domain._points import Point
from ett_collector.domain.model import SpanRecord


def _points(slow_rank: int | None, factor: float, windows: int = 30) -> list[Point]:
    """Four ranks, 60 s windows of 500 steps (0.12 s); compute 0.096 s a step, times ``factor``
    on ``slow_rank`` from window 10 on (its wait shrinks: its wall time stays the others')."""
    out = []
    for r in range(4):
        for w in range(windows):
            compute = 0.096 * (factor if r == slow_rank and w >= 10 else 1.0) * (1 + 0.01 * r)
            out.append(
                Point(
                    0,
                    r,
                    w * 60.0,
                    w * 60.0 + 60.0,
                    1,
                    500,
                    500 * 64,
                    60.0,
                    500,
                    60.0,
                    60.0 - 500 * compute,
                )
            )
    return out


def _save(start: float, end: float) -> SpanRecord:
    return SpanRecord("t" * 32, "s" * 16, sc.SPAN_CHECKPOINT_SAVE, start, end, "j", 0, 0, {})


def test_throughput_counts_busy_seconds_only() -> None:
    facts = loop_facts(_points(None, 1.0), [_save(600.0, 630.0)])
    # 29 windows after warm-up per rank, 4 ranks; the save stalls 30 s of one window per rank
    busy = 4 * (29 * 60.0 - 30.0)
    assert facts["loop_rank_s"] == pytest.approx(busy)
    assert facts["samples_per_rank_s"] == pytest.approx(4 * 29 * 500 * 64 / busy)


def test_the_stragglers_windows_are_scored_against_the_others_at_the_same_time() -> None:
    (s,) = loop_facts(_points(2, 1.5), [])["stragglers"]
    assert s["rank"] == 2 and s["score"] > 1.3
    ratios = dict((r, n) for r, n in s["ratios"])
    slow = sum(n for r, n in ratios.items() if r >= 1.3)
    assert slow == 20  # windows 10..29; window 0 is warm-up, 1..9 ran at the others' pace
    assert max(ratios) == pytest.approx(1.5 * 1.02 / 1.01, rel=0.01)  # over the others' median


def test_the_score_is_the_performance_views() -> None:
    points, saves = _points(1, 1.4), [_save(600.0, 630.0), _save(1200.0, 1210.0)]
    (s,) = loop_facts(points, saves)["stragglers"]
    view = performance(points, saves)["stragglers"][0]
    assert (s["rank"], s["score"]) == (view["top_ranks"][0]["rank"], view["score"])


def test_ranks_alike_name_no_window_above_a_threshold() -> None:
    (s,) = loop_facts(_points(None, 1.0), [])["stragglers"]
    assert all(r < 1.05 for r, _ in s["ratios"])


def test_ranks_counting_different_steps_give_the_alert_no_straggler() -> None:
    """Rank 3 calls ``step()`` twice a step: per step it computes half, and rank 0 (the next
    highest) scored about 2.0 against the others' median. The straggler alert reads no score
    for an attempt whose ranks count different steps, as the performance view names none."""
    points = [
        Point(p.attempt, p.rank, p.start, p.end, 1, 2 * p.steps, p.samples, p.seconds,
              2 * p.steps, p.timed_s, p.wait_s) if p.rank == 3 else p
        for p in _points(None, 1.0)
    ]  # fmt: skip
    assert loop_facts(points, [])["stragglers"] == []
    assert performance(points, [])["stragglers"] == []
