"""The step-time series outlives compaction (issue 26), on real SQLite and PostgreSQL: every
folded window is added to ``window_series`` once (replays and reorders change nothing), and the
performance figures read from buckets are those of the raw windows."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.domain._performance import performance, point_of_window
from ett_collector.storage import Store
from ett_collector.storage._runs import WINDOW
from ett_collector.storage._series import SERIES_UPSERT, points_of_rows
from tests.support.spans import first_batch, window

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
T0 = 1_700_000_040.0  # a bucket boundary (60 s)


def job_spans(job: str, ranks: int = 3, windows: int = 60) -> list[SpanRecord]:
    """``ranks`` ranks of 10 s windows of 100 steps; rank 2 computes 0.09 s a step, the others
    0.03 s (and wait the rest of the 0.1 s step)."""
    out = []
    for rank in range(ranks):
        out.append(first_batch(T0, rank=rank, job=job))
        for i in range(windows):
            wait = 10.0 - 100 * (0.09 if rank == 2 else 0.03)
            attrs = {
                sc.STEP_FIRST: 100 * i,
                sc.STEP_LAST: 100 * i + 99,
                sc.SAMPLES: 3200,
                sc.WINDOW_WAIT_S: wait,
            }
            out.append(window(T0 + 10 * i, T0 + 10 * i + 10, rank=rank, job=job, **attrs))
    return out


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    s = Store(database_url, raw_window_retention_s=0.0)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


def _points(store: Store, job: str) -> list[object]:
    spans, rows = store.load_performance(job)
    raw = [point_of_window(s) for s in spans if s.name == WINDOW]
    return [*points_of_rows(rows), *(p for p in raw if p is not None)]


def _series(store: Store) -> list[tuple[object, ...]]:
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT attempt, rank, bucket, windows, steps, samples, seconds, timed_steps,"
            " timed_s, wait_s, first_start, last_end FROM window_series"
            " ORDER BY attempt, rank, bucket"
        )
        return [tuple(r) for r in rows]


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_one_bucket_twice_in_one_write_is_added_up(store: Store) -> None:
    """PostgreSQL writes a batch of buckets in one statement, which may not update a row twice:
    the rows of one bucket are summed first; SQLite adds them one by one. Stored alike."""
    row = ("j", 0, 1, T0, 1, 100, 3200, 10.0, 100, 3.0, 7.0, T0 + 20, T0 + 30)
    early = (*row[:11], T0 + 5, T0 + 15)
    with store.engine.begin() as conn:
        SERIES_UPSERT.run(conn, [row, row], store.compactor._series_upsert)
        SERIES_UPSERT.run(conn, [early], store.compactor._series_upsert)

    assert _series(store) == [(0, 1, T0, 3, 300, 9600, 30.0, 300, 9.0, 21.0, T0 + 5, T0 + 30)]


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_folded_windows_are_kept_once_in_the_series(store: Store) -> None:
    spans = job_spans("j")
    for i in range(0, len(spans), 25):
        store.ingest(spans[i : i + 25])
    store.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
    got = _series(store)
    assert len(got) == 3 * 10  # 10 buckets of 60 s per rank
    assert sum(int(r[3]) for r in got) == 180  # type: ignore[call-overload]
    assert {(r[3], r[4], r[5]) for r in got} == {(6, 600, 19200)}
    # replays, shuffled, compacted again: the series does not move
    store.ingest(random.Random(3).sample(spans, k=len(spans)))
    store.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
    assert _series(store) == got
    with store.engine.connect() as conn:
        raw = conn.exec_driver_sql(f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'")
        assert raw.scalar_one() == 0


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_figures_from_buckets_are_those_of_the_raw_windows(store: Store) -> None:
    spans = job_spans("j")
    raw = [p for s in spans if s.name == WINDOW if (p := point_of_window(s)) is not None]
    want = performance(raw, spans)
    store.compactor.retention_s = None  # stored raw (retention 0 folds at ingest), then:
    store.ingest(spans)
    store.compactor.compact("j", cutoff=T0 + 400)  # half compacted, half raw
    mixed = _points(store, "j")
    assert 0 < sum(p.windows > 1 for p in mixed) < len(mixed)  # type: ignore[attr-defined]
    got = performance(mixed, spans)  # type: ignore[arg-type]
    assert got["steps"] == want["steps"] == 6000
    assert got["samples_per_s"] == pytest.approx(want["samples_per_s"])
    assert got["ideal_step_s"] == pytest.approx(want["ideal_step_s"]) == pytest.approx(0.1)
    assert got["straggler"] is not None and want["straggler"] is not None
    assert got["straggler"]["rank"] == want["straggler"]["rank"] == 2
    assert got["straggler"]["score"] == pytest.approx(3.0, rel=0.01)
    assert want["straggler"]["score"] == pytest.approx(3.0, rel=0.01)
