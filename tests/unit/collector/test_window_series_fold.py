"""``ett.window.wait_s`` is a counter to the fold (issue 26): windows that differ only in their
waits still make one run, and the series keeps what the run does not."""

from __future__ import annotations

from ett import semconv as sc
from ett_collector.storage._runs import Run, fold
from ett_collector.storage._series import SERIES_S, not_replays, series_rows
from tests.support.spans import window

T0 = 1_700_000_040.0  # a bucket boundary


def _windows(n: int, rank: int = 0, waits: bool = True) -> list[object]:
    out = []
    for i in range(n):
        attrs: dict[str, object] = {sc.STEP_FIRST: 10 * i, sc.STEP_LAST: 10 * i + 9}
        attrs[sc.SAMPLES] = 320
        if waits:
            attrs[sc.WINDOW_WAIT_S] = 0.5 + 0.1 * i
        out.append(window(T0 + 10 * i, T0 + 10 * i + 10, rank=rank, **attrs))
    return out


def test_windows_with_other_waits_fold_into_one_run() -> None:
    ws = _windows(5)
    runs, dropped = fold([], ws)  # type: ignore[arg-type]
    assert dropped == 0
    (run,) = runs
    assert (run.start, run.end, run.count) == (T0, T0 + 50, 5)
    assert sc.WINDOW_WAIT_S not in run.attributes  # a run keeps no window's measurement
    assert run.attributes[sc.STEP_LAST] == 49 and run.attributes[sc.SAMPLES] == 1600
    (single,) = fold([], ws[:1])[0]  # type: ignore[arg-type]
    assert single.attributes[sc.WINDOW_WAIT_S] == 0.5  # one window is itself


def test_series_rows_sum_windows_per_rank_and_bucket() -> None:
    ws = [Run.of(w) for w in [*_windows(8), *_windows(3, rank=1, waits=False)]]  # type: ignore[arg-type]
    rows = series_rows("j", ws)
    assert [(r[2], r[3]) for r in rows] == [(0, T0), (0, T0 + SERIES_S), (1, T0)]
    first = rows[0]
    # 6 windows of 10 steps, 320 samples, 10 s; all timed, waits 0.5 .. 1.0
    assert first[4:8] == (6, 60, 1920, 60.0)
    assert first[8:10] == (60, 60.0)
    assert abs(first[10] - sum(0.5 + 0.1 * i for i in range(6))) < 1e-9
    assert first[11:] == (T0, T0 + 60)  # the first window's start, the last one's end
    assert rows[1][11:] == (T0 + 60, T0 + 80)
    untimed = rows[2]
    assert untimed[4:] == (3, 30, 960, 30.0, 0, 0.0, 0.0, T0, T0 + 30)


def test_replays_inside_a_stored_run_are_not_added_again() -> None:
    stored = fold([], _windows(4))[0]  # type: ignore[arg-type]
    fresh = [Run.of(w) for w in _windows(6)]  # type: ignore[arg-type]
    kept = not_replays([Run.of(r) for r in stored], fresh)
    assert [w.start for w in kept] == [T0 + 40, T0 + 50]


def test_a_bucket_of_one_long_window_spans_the_window() -> None:
    """A 227 s window (a step held up) was shown as a slow window of the 60 s bucket it
    started in, 'losing' 227 s in 60 s, and a stall under it was matched against 60 s only."""
    from ett_collector.domain._performance import slow_windows
    from ett_collector.storage._series import SERIES_S, points_of_rows

    starts = [1000.0 + i * SERIES_S for i in range(4)]
    rows = [("j", 0, 0, b, 6, 600, 6000, 59.4, 0, 0.0, 0.0, b, b + 59.4) for b in starts]
    rows.append(("j", 0, 0, 1240.0, 1, 1, 10, 227.5, 0, 0.0, 0.0, 1240.0, 1467.5))
    points = points_of_rows(rows)
    assert [p.end - p.start for p in points] == [SERIES_S] * 4 + [227.5]
    assert points[-1].trained == (1240.0, 1467.5)
    (slow,) = slow_windows({(0, 0): points}, [], ideal=0.099)
    assert slow["lost_s"] <= float(slow["end"]) - float(slow["start"])  # type: ignore[arg-type]
