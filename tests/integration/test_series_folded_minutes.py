"""The throughput series over folded minutes, on real SQLite and PostgreSQL: a job whose windows
are folded into 60 s ``window_series`` buckets shows each rank's samples where they were trained,
as its raw windows do. A bucket spanned its whole minute: a probe's 60 s loop from :15 to :15
read 531 samples/s from :00 and 106 samples/s to the next :00 (637 true), and a straggler job
of 2 ranks 188 samples/s per rank for a true 376. Buckets stored before migration 0012 keep
no first start nor last end: their place in the minute is guessed from their neighbours."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.read.performance import job_performance
from ett_collector.read.query import Query
from ett_collector.storage import Store, _migrate
from ett_collector.storage._series import SERIES_S, points_of_rows
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.spans import attempt_end, first_batch, window
from tests.support.stores import stores_by_retention

T0 = 1_700_000_040.0  # a minute boundary: the loop starts and ends in the middle of minutes
STARTS = (T0 + 15, T0 + 160)  # attempt 0 trains to T0 + 135, attempt 1 from T0 + 160 (restart)
WINDOWS = 12  # of 10 s per attempt and rank
RETENTIONS = (None, 0.0, 60.0)  # raw windows; all folded at ingest; some folded, some raw
HALF = T0 + 175  # where the third store's compaction folds to: amid a bucket of attempt 1


def job_spans(job: str) -> list[SpanRecord]:
    """Two attempts of two ranks; rank 1 a straggler (half the steps and samples of rank 0 in
    each 10 s window: 160 samples/s against 320)."""
    out: list[SpanRecord] = []
    for attempt, t in enumerate(STARTS):
        for rank in (0, 1):
            kw = {"attempt": attempt, "rank": rank, "job": job}
            out.append(first_batch(t, **kw))
            steps = 100 if rank == 0 else 50
            for i in range(WINDOWS):
                attrs = {
                    sc.STEP_FIRST: steps * i,
                    sc.STEP_LAST: steps * i + steps - 1,
                    sc.SAMPLES: 32 * steps,
                }
                out.append(window(t + 10 * i, t + 10 * i + 10, **kw, **attrs))
            end = t + 10 * WINDOWS
            reason = "failed" if attempt == 0 else "completed"
            out.append(attempt_end(t - 5, end + 1, reason, **kw))
    return out


@pytest.fixture
def stores(database_url: str) -> Iterator[list[Store]]:
    """One store per raw window retention on one database (a job each)."""
    with stores_by_retention(database_url, RETENTIONS) as out:
        yield out


def _series(store: Store, job: str, buckets: int) -> list[dict[str, object]]:
    pipeline = Pipeline(store)
    spans = job_spans(job)
    for i in range(0, len(spans), 7):  # in order, in small batches
        pipeline.ingest(spans[i : i + 7])
    if store.compactor.retention_s:  # windows ending before HALF folded, bucket T0 + 120 in two
        store.compactor.compact(job, cutoff=HALF)  # parts: the rest stays raw, read past the
    pipeline.recompute_dirty()  # retention line (T0 + 220) into their buckets, or as windows
    block = job_performance(Query(pipeline), job, buckets)
    return block["series"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_folded_minutes_show_the_samples_where_they_were_trained(stores: list[Store]) -> None:
    # T0 + 15 to T0 + 280 in 5 s slices: each slice lies in one window, or in the restart's gap
    raw, *folded = [_series(s, f"j{i}", 53) for i, s in enumerate(stores)]
    assert len(raw) == 53 and raw[0]["start"] == T0 + 15 and raw[-1]["end"] == T0 + 280
    gap = [r for r in raw if T0 + 135 <= r["start"] < T0 + 160]  # type: ignore[operator]
    assert len(gap) == 5 and all(r["samples_per_s"] is None for r in gap)
    trained = [r for r in raw if r not in gap]
    assert all(r["ranks"] == pytest.approx({"0": 320.0, "1": 160.0}) for r in trained)
    for got in folded:
        assert [(r["start"], r["end"]) for r in got] == [(r["start"], r["end"]) for r in raw]
        for g, w in zip(got, raw, strict=True):
            assert g["samples_per_s"] == pytest.approx(w["samples_per_s"]), g
            assert g.get("ranks") == pytest.approx(w.get("ranks")), g
            assert g["step_s"] == pytest.approx(w["step_s"]), g


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_buckets_stored_before_0012_are_placed_by_their_neighbours(database_url: str) -> None:
    """Rows of 0011 get NULL first starts and last ends; windows added to such a bucket leave
    it NULL (when its older windows trained is still unknown), a new bucket has both."""
    store = Store(database_url, raw_window_retention_s=0.0)
    try:
        _migrate.upgrade(store.engine, "0011")
        with store.engine.begin() as conn:  # a loop from T0 + 15 to T0 + 135, folded in 0011
            for b, seconds in ((T0, 45.0), (T0 + 60, 60.0), (T0 + 120, 15.0)):
                steps = int(seconds * 10)
                conn.exec_driver_sql(
                    "INSERT INTO window_series VALUES ('old', 0, 0, "
                    f"{b}, {int(seconds // 10)}, {steps}, {steps * 32}, {seconds}, 0, 0.0, 0.0)"
                )
        store.upgrade()
        store.ingest(
            [
                window(b, b + 10, job="old", **{sc.STEP_FIRST: i, sc.STEP_LAST: i, sc.SAMPLES: 32})
                for i, b in enumerate((T0 + 170.0, T0 + 200.0))
            ]
        )
        rows = store.load_series("old")
        assert [r[11:] for r in rows] == [
            (None, None),
            (None, None),
            (None, None),  # its windows of 0011 and the one of T0 + 170
            (T0 + 200, T0 + 210),
        ]
        got = [p.trained for p in points_of_rows(rows)]
    finally:
        store.close()
    assert got == [
        (T0 + 15, T0 + 60),  # the loop's first minute: at its end
        (T0 + 60, T0 + 60 + SERIES_S),  # amid the loop
        (T0 + 120, T0 + 180),  # a bucket follows: amid it
        (T0 + 200, T0 + 210),
    ]
    alone = points_of_rows([(*rows[2][:11], None, None)])  # the loop's last minute, alone
    assert alone[0].trained == (T0 + 120, T0 + 180)
    last = points_of_rows([(*r[:11], None, None) for r in rows[:3]])[-1]
    assert last.trained == (T0 + 120, T0 + 120 + 25.0)  # its end: at the start of its minute
