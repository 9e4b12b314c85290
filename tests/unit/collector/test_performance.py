"""Inside the loop (issue 26): the pure performance figures and the throughput series."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ett import semconv as sc
from ett_collector.domain._performance import (
    STRAGGLER_RATIO,
    Intervals,
    Point,
    performance,
    point_of_window,
)
from ett_collector.domain._step_counts import STEP_RATE_TOLERANCE
from ett_collector.domain._throughput import series
from tests.support.spans import data_wait, save, span, window

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
    perf = performance(pts, [stall])
    assert perf["slow_s"] == pytest.approx(3.0)  # 15 - 2 stalled - 100 x 0.1
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


def test_without_a_steady_window_the_ideal_takes_the_stalls_out() -> None:
    """A loader that stalls every few batches puts a data wait in every window (more than 5 %:
    none steady). The fallback took the whole seconds per step (stalls in) while the slow time
    took the stalls out again: an ideal 37 % high and slow time short (operator probe r2)."""
    pts, spans = [], []
    for rank in (0, 1):
        for i, p in enumerate(rank_points(rank, n=10)):
            if i == 0:
                pts.append(p)
                continue
            secs = 11.0 + (2.0 if i in (5, 6) else 0.0)  # 10 s of steps + 1 s stall (+2 slow)
            start = T0 + 20 + 13 * (i - 1)  # rank_points' warm-up is 20 s long
            pts.append(Point(0, rank, start, start + secs, 1, 100, 3200, secs, 100, secs, 5.0))
            if rank == 0:
                spans.append(data_wait(start + 0.5, start + 1.5))  # 1 s: 9 % of the window
    perf = performance(pts, spans)
    assert perf["ideal_basis"] == "after_warmup"
    assert perf["ideal_step_s"] == pytest.approx(0.1)  # (11 - 1) / 100, not 11 / 100
    assert perf["slow_s"] == pytest.approx(4.0)  # windows 5 and 6: 2 s each, per rank


def test_slow_share_is_of_the_same_windows_stepping_time() -> None:
    """``slow_pct`` divided slow time over every attempt by ETT's productive seconds, which
    leave out an attempt that failed unsaved: 111 % (operator probe r4). It is now the share of
    the same windows' stepping seconds (stalls left out), never above 100."""
    pts = rank_points(0) + rank_points(1)
    for i, p in enumerate(pts):
        if p.start == T0 + 60:  # window 5: 15 s for its 100 steps, 2 s of it a save
            pts[i] = Point(0, p.rank, p.start, p.start + 15, 1, 100, 3200, 15.0, 100, 15.0, 7.0)
    perf = performance(pts, [save(1, T0 + 61, T0 + 63)])
    assert perf["slow_s"] == pytest.approx(3.0)
    assert perf["stepping_s"] == pytest.approx(8 * 10.0 + 13.0)  # 9 windows after warm-up
    assert perf["slow_pct"] == pytest.approx(100 * 3.0 / 93.0, abs=1e-4)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 1),  # attempt
            st.integers(0, 2),  # rank
            st.floats(0.0, 60.0),  # seconds
            st.integers(0, 500),  # steps
        ),
        min_size=1,
        max_size=24,
    ),
    st.lists(st.tuples(st.floats(0.0, 400.0), st.floats(0.0, 60.0)), max_size=4),
)
def test_slow_share_stays_within_0_and_100(
    windows: list[tuple[int, int, float, int]], stalls: list[tuple[float, float]]
) -> None:
    t: dict[tuple[int, int], float] = {}
    pts = []
    for attempt, rank, secs, steps in windows:
        start = t.get((attempt, rank), T0)
        t[(attempt, rank)] = start + secs
        pts.append(Point(attempt, rank, start, start + secs, 1, steps, steps, secs))
    spans = [save(1, T0 + s, T0 + s + d, attempt=a) for a in (0, 1) for s, d in stalls]
    perf = performance(pts, spans)
    if perf["slow_pct"] is not None:
        assert 0.0 <= perf["slow_pct"] <= 100.0  # type: ignore[operator]


def test_ranks_counting_different_steps_name_no_straggler() -> None:
    """Rank 1 calls ``step()`` twice a step (once per micro-batch); both ranks run the same
    0.1 s steps. Per-step times named rank 0 the straggler at 2.0, the ideal read half-way
    and the steps twice (operator probe r6). Now: no straggler, a note, rank 0's steps."""
    once = rank_points(0, compute_s=0.05)
    twice = [
        Point(0, 1, p.start, p.end, 1, 2 * p.steps, p.samples, p.seconds, 2 * p.steps, p.timed_s,
              p.wait_s)
        for p in rank_points(1, compute_s=0.05)
    ]  # fmt: skip
    perf = performance(once + twice, [])
    assert perf["straggler"] is None and perf["stragglers"] == []
    (differ,) = perf["step_counts_differ"]  # type: ignore[misc]
    assert differ["basis_rank"] == 0 and differ["ratio"] == pytest.approx(2.0)
    assert str(perf["straggler_note"]).startswith("attempt 0: rank 1 counts 2.00x the steps")
    assert perf["ideal_step_s"] == pytest.approx(0.1)
    assert perf["steps"] == 1000  # rank 0's, not rank 1's 2000
    assert perf["slow_s"] == pytest.approx(0.0)


def test_step_counts_within_the_tolerance_are_compared() -> None:
    """Ranks whose step rates differ by less than the tolerance (a window's edge) are still
    scored, and a true straggler among them named."""
    slow = [
        Point(0, 1, p.start, p.end, 1, p.steps + 5, p.samples, p.seconds, p.steps + 5,
              p.timed_s, p.timed_s - (p.steps + 5) * 0.1)
        for p in rank_points(1, compute_s=0.1)
    ]  # fmt: skip
    perf = performance(rank_points(0, compute_s=0.05) + slow, [])
    assert perf["step_counts_differ"] == [] and perf["straggler_note"] is None
    assert perf["straggler"] is not None and perf["straggler"]["rank"] == 1  # type: ignore[index]
    assert perf["straggler"]["score"] == pytest.approx(2.0)  # type: ignore[index]
    assert 1.0 + STEP_RATE_TOLERANCE > 105 / 100
