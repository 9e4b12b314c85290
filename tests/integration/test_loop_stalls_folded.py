"""Stalls against folded minutes, on real SQLite and PostgreSQL: the ideal step and the slow time
of a job whose loader stalls read the same with every window raw, every window folded into its
60 s ``window_series`` bucket, and the windows folded up to a line inside a minute (the raw
window retention's fold line), the rest raw. A bucket's stalls were matched against its whole
minute: a stall in the raw windows' part of a half-folded minute was taken off the bucket too
(twice in all), and a save after the loop's last window, in the minute's untrained part,
emptied the last bucket: a probe's stalling job read a slow time of 2.0 s for 4.0 s, this one
43.5 s half folded and 29.5 s folded for 44.5 s."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.read.performance import job_performance
from ett_collector.read.query import Query
from ett_collector.storage import Store
from ett_collector.storage._series import points_of_rows
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.spans import attempt_end, data_wait, first_batch, save, window
from tests.support.stores import stores_by_retention

T0 = 1_700_000_040.0  # a minute boundary: 10 s windows, 6 to a bucket
WINDOWS = 87  # T0 to T0 + 870: minutes 0 to 13 whole, the loop ends at :30 of minute 14
SLOW_FROM = 78  # minutes 13 and 14 step at 100 ms, the rest at 50 ms
LINE = T0 + 815.0  # the split store's fold line, inside minute 13: windows to T0 + 810 folded
RETENTIONS = (None, 0.0, T0 + WINDOWS * 10 - LINE)  # all raw, all folded, split at LINE


def job_spans(job: str) -> list[SpanRecord]:
    """One rank's loop: a 1 s data wait in every 5th window before the slow minutes (10 % of it:
    interrupted) and in window 82 (minute 13, past the fold line); a window with a wait steps
    for 9 s of its 10.
    A final save from T0 + 872 to T0 + 890, after the last window, in minute 14."""
    kw: dict[str, Any] = {"job": job}
    out = [first_batch(T0, **kw)]
    first = 0
    for i in range(WINDOWS):
        t = T0 + 10 * i
        stalled = (i % 5 == 3 and i < SLOW_FROM) or i == 82
        step_s = 0.1 if i >= SLOW_FROM else 0.05
        steps = round((9.0 if stalled else 10.0) / step_s)
        attrs = {sc.STEP_FIRST: first, sc.STEP_LAST: first + steps - 1, sc.SAMPLES: 8 * steps}
        out.append(window(t, t + 10, **kw, **attrs))
        if stalled:
            out.append(data_wait(t + 4, t + 5, **kw))
        first += steps
    end = T0 + 10 * WINDOWS
    out.append(save(first, end + 2, end + 20, **kw))
    out.append(attempt_end(T0 - 5, end + 21, "completed", **kw))
    return out


@pytest.fixture
def stores(database_url: str) -> Iterator[list[Store]]:
    """One store per raw window retention on one database (a job each)."""
    with stores_by_retention(database_url, RETENTIONS) as out:
        yield out


def _block(store: Store, job: str) -> dict[str, Any]:
    pipeline = Pipeline(store)
    spans = sorted(job_spans(job), key=lambda s: s.end)
    for i in range(0, len(spans), 9):  # in time order, in small batches
        pipeline.ingest(spans[i : i + 9])
    if store.compactor.retention_s:  # folded to the line: minute 13's first 3 windows stored
        store.compactor.compact(job, cutoff=LINE)  # in its bucket, its last 3 raw
    while pipeline.recompute_dirty():
        pass
    return job_performance(Query(pipeline), job)


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_stalls_read_the_same_raw_folded_and_half_folded(stores: list[Store]) -> None:
    raw, folded, half = (_block(s, f"j{i}") for i, s in enumerate(stores))
    assert raw["points"] == WINDOWS
    assert folded["points"] == 15  # a bucket a minute
    assert half["points"] == 14 + 6  # minutes 0 to 13's buckets, windows 81 to 86 raw
    # minute 13: 5 windows of 5 s over 100 x 50 ms and window 82 (4.5 s); minute 14: 3 x 5 s
    for got in (raw, folded, half):
        assert got["ideal_step_s"] == pytest.approx(0.05)
        assert got["slow_s"] == pytest.approx(44.5, abs=1e-4)


def test_a_bucket_stored_before_0012_reads_stalls_over_its_minute() -> None:
    """Without its stored instants, when in its minute its windows trained is a guess."""
    row = ("old", 0, 0, T0, 2, 400, 3200, 20.0, 0, 0.0, 0.0)
    (legacy,) = points_of_rows([(*row, None, None)])
    (placed,) = points_of_rows([(*row, T0 + 40, T0 + 60)])
    assert not legacy.placed and legacy.stalls_over == (T0, T0 + 60)
    assert placed.placed and placed.stalls_over == (T0 + 40, T0 + 60)
