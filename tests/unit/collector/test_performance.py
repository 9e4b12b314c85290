"""Inside the loop (issue 26): the pure performance figures and the throughput series."""

from __future__ import annotations

import pytest

from ett import semconv as sc
from ett_collector.domain._performance import (
    STRAGGLER_RATIO,
    Intervals,
    Point,
    performance,
    point_of_window,
)
from ett_collector.domain._throughput import series
from tests.support.spans import save, span, window

T0 = 1_700_000_000.0


def rank_points(
    rank: int, n: int = 10, step_s: float = 0.1, compute_s: float | None = 0.08, attempt: int = 0
) -> list[Point]:
    """``n`` 10 s windows of 100 steps of ``step_s`` (the first: warm-up, twice as slow), each
    step computing ``compute_s`` and waiting the rest."""
    out, t = [], T0
    for i in range(n):
        secs = 100 * step_s * (2 if i == 0 else 1)
        timed = compute_s is not None
        wait = secs - 100 * (compute_s or 0.0) if timed else 0.0
        out.append(
            Point(
                attempt,
                rank,
                t,
                t + secs,
                1,
                100,
                3200,
                secs,
                100 if timed else 0,
                secs if timed else 0.0,
                wait,
            )
        )
        t += secs
    return out


def test_ideal_step_is_the_median_of_steady_windows() -> None:
    pts = rank_points(0) + rank_points(1)
    stall = save(1, T0 + 35, T0 + 36, rank=1)  # inside window 2 (30..40) of every rank
    slow = list(pts)  # rank 0's window 2 was slow: the stall, left out of the ideal
    slow[2] = Point(0, 0, T0 + 30, T0 + 40, 1, 20, 640, 10.0, 20, 10.0, 2.0)
    perf = performance(slow, [stall])
    assert perf["ideal_step_s"] == pytest.approx(0.1)
    assert perf["ideal_basis"] == "steady"
    assert perf["ideal_points"] == 16  # 2 x 9 after warm-up, less both ranks' window 2


def test_slow_time_counts_steps_slower_than_ideal_less_the_stalls() -> None:
    pts = rank_points(0) + rank_points(1)
    # window 5 of both ranks took 15 s instead of 10 s, 2 s of it in a checkpoint save
    for i, p in enumerate(pts):
        if p.start == T0 + 60:
            pts[i] = Point(0, p.rank, p.start, p.start + 15, 1, 100, 3200, 15.0, 100, 15.0, 7.0)
    stall = save(1, T0 + 61, T0 + 63)
    perf = performance(pts, [stall], productive_s=100.0)
    assert perf["slow_s"] == pytest.approx(3.0)  # 15 - 2 stalled - 100 x 0.1
    assert perf["slow_pct"] == pytest.approx(3.0)
    (slow,) = perf["slow_windows"]
    assert slow["start"] == T0 + 60 and slow["overlaps"] == [sc.SPAN_CHECKPOINT_SAVE]
    assert slow["ratio"] == pytest.approx(1.5)


def test_the_straggler_is_named_with_its_ratio_to_the_others_median() -> None:
    pts = [p for r in range(4) for p in rank_points(r, compute_s=0.05)]
    pts += rank_points(4, compute_s=0.1)  # rank 4 computes twice as long; the others wait
    perf = performance(pts, [])
    straggler = perf["straggler"]
    assert straggler is not None
    assert (straggler["rank"], straggler["score"]) == (4, pytest.approx(2.0))
    assert straggler["others_wait_share"] == pytest.approx(0.5)
    assert straggler["windows_above"] == straggler["windows_timed"] == 9


def test_no_straggler_below_the_threshold_or_without_waits() -> None:
    pts = rank_points(0, compute_s=0.05) + rank_points(1, compute_s=0.05 * 1.1)
    perf = performance(pts, [])
    assert perf["straggler"] is None
    assert perf["stragglers"][0]["score"] == pytest.approx(1.1)
    assert perf["stragglers"][0]["score"] < STRAGGLER_RATIO
    untimed = performance(rank_points(0, compute_s=None) + rank_points(1, compute_s=None), [])
    assert untimed["stragglers"] == [] and untimed["straggler"] is None
    assert untimed["ideal_step_s"] == pytest.approx(0.1)


def test_point_of_a_raw_window() -> None:
    attrs = {sc.STEP_FIRST: 10, sc.STEP_LAST: 19, sc.SAMPLES: 320, sc.WINDOW_WAIT_S: 0.25}
    p = point_of_window(window(T0, T0 + 2, rank=3, **attrs))
    assert p == Point(0, 3, T0, T0 + 2, 1, 10, 320, 2.0, 10, 2.0, 0.25)
    assert p.step_s == pytest.approx(0.2)
    bare = point_of_window(window(T0, T0 + 2, **{sc.STEP_FIRST: 1, sc.STEP_LAST: 1}))
    assert bare is not None and (bare.timed_steps, bare.samples) == (0, 0)
    assert point_of_window(span(sc.SPAN_TRAIN_WINDOW, T0, T0 + 1)) is None


def test_a_negative_sample_count_counts_no_samples_raw_or_folded() -> None:
    """``ett.samples`` -640 read -64 samples/s (a time probe); a count below 0 is none, alike
    for a raw window and for the bucket a fold adds it to."""
    from ett_collector.storage._runs import Run
    from ett_collector.storage._series import series_rows

    w = window(T0, T0 + 10, **{sc.STEP_FIRST: 0, sc.STEP_LAST: 99, sc.SAMPLES: -640})
    p = point_of_window(w)
    assert p is not None and p.samples == 0 and p.steps == 100
    [row] = series_rows("j", [Run.of(w)])
    assert row[6] == 0 and row[5] == 100  # samples, steps


def test_intervals_cover_merged_overlaps() -> None:
    iv = Intervals([(0, 2), (1, 3), (5, 6)])
    assert iv.covered(0, 10) == pytest.approx(4.0)
    assert iv.covered(2.5, 5.5) == pytest.approx(1.0)
    assert iv.covered(3, 5) == 0.0


def test_series_is_sized_by_buckets_and_keeps_every_sample() -> None:
    pts = rank_points(0) + rank_points(1, compute_s=0.02)
    rows = series(pts, buckets=7)
    assert len(rows) == 7
    total = sum(float(r["samples_per_s"]) * (r["end"] - r["start"]) for r in rows)  # type: ignore[operator, arg-type]
    assert total == pytest.approx(sum(p.samples for p in pts))
    mid = rows[3]
    assert mid["top_rank"] == 0 and mid["top_score"] == pytest.approx(4.0)
    assert mid["ranks"] is not None and set(mid["ranks"]) == {"0", "1"}  # type: ignore[arg-type]
    assert series([], buckets=5) == []
    assert len(series(pts, buckets=10_000)) == 2000
