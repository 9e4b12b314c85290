"""Compact heartbeats on real SQLite and PostgreSQL: raw windows older than the retention horizon
become runs, and the figures stay those of the raw spans, in order, shuffled or replayed."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from ett_collector.storage import Store, _compaction
from ett_collector.storage._runs import WINDOW
from tests.support.spans import attempt_end, first_batch, persist, phase, save, window

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
T0 = 1_700_000_000.0


def job_spans(job: str, ranks: int = 4, windows: int = 100) -> list[SpanRecord]:
    """Two attempts of ``ranks`` ranks; 10 s windows; rank 1 of attempt 0 pauses 25 s once;
    a save every 300 s; attempt 0 is killed, attempt 1 completes."""
    out: list[SpanRecord] = []
    t = T0
    for attempt in range(2):
        ident = {sc.MODEL: "dlrm", sc.TEAM: "ads", sc.WORLD_SIZE: ranks, sc.HOST_NAME: "h"}
        first = t + 20
        ends = []
        for rank in range(ranks):
            kw = {"attempt": attempt, "rank": rank, "job": job, **ident}
            out.append(phase("pg_init", t, t + 5 + rank, **kw))
            out.append(first_batch(first, **kw))
            ws, step = first, 1000 * attempt
            for i in range(windows):
                if attempt == 0 and rank == 1 and i == 40:
                    ws += 25.0  # a gap: no window for 25 s
                attrs = {sc.STEP_FIRST: step, sc.STEP_LAST: step + 99, sc.SAMPLES: 3200}
                out.append(window(ws, ws + 10, **kw, **attrs))
                ws += 10
                step += 100
            for k in range(1, int((ws - first) // 300) + 1):
                a = first + 300 * k
                out.append(save(k, a, a + 2, mode="async", **kw))
                out.append(persist(k, a + 2, a + 9, **kw))
            if attempt == 1:
                out.append(attempt_end(t, ws + 1, "completed", **kw))
            ends.append(ws)
        t = max(ends) + 60
    return out


def figures(spans: list[SpanRecord]) -> dict[str, object]:
    now = max(s.end for s in spans) + 5
    ordered = sorted(spans, key=lambda s: (s.start, s.trace_id, s.span_id))
    return dict(job_json(summarize(ordered, now)))


def send(store: Store, spans: list[SpanRecord], batch: int) -> None:
    for i in range(0, len(spans), batch):
        store.ingest(spans[i : i + batch])


def count(store: Store, sql: str) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql(sql).scalar_one())


def runs_table(store: Store) -> list[tuple[object, ...]]:
    with store.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            'SELECT attempt, rank, start, "end", step_first, step_last, samples, "count"'
            " FROM window_runs ORDER BY attempt, rank, start"
        )
        return [tuple(r) for r in rows]


@pytest.fixture
def stores(database_url: str) -> Iterator[Store]:
    """A store on ``database_url`` keeping 30 s of raw windows per job."""
    s = Store(database_url, raw_window_retention_s=30.0)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_windows_become_runs_and_figures_stay_exact(stores: Store) -> None:
    store = stores
    spans = job_spans("j")
    want = figures(spans)
    n_windows = sum(s.name == WINDOW for s in spans)

    send(store, spans, batch=64)  # in order, as ranks send them
    assert figures(store.load_spans("j")) == want
    raw_windows = count(store, f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'")
    assert raw_windows < n_windows / 4  # only the newest (retention + one compaction step) stay
    # one run per (attempt, rank) and the gap of rank 1: 4 + 1 + 4 chains
    assert len(runs_table(store)) <= 9
    assert store.span_counts()["spans"] == len(spans)

    # replays, shuffled: nothing changes once the replayed raw rows are folded again
    replay = random.Random(1).sample(spans, k=len(spans))
    send(store, replay, batch=50)
    assert figures(store.load_spans("j")) == want
    store.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
    assert figures(store.load_spans("j")) == want
    assert store.span_counts()["spans"] == len(spans)
    assert count(store, f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'") == 0
    assert sum(r[-1] for r in runs_table(store)) == n_windows  # type: ignore[misc]
    assert len(runs_table(store)) == 9


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_batches_of_many_jobs_compact_every_job(
    stores: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an OpenTelemetry Collector's batches hold the next spans of every job; the lines of a
    # batch's jobs are read in one statement per _LINES_AT_ONCE jobs (2 here: three reads)
    monkeypatch.setattr(_compaction, "_LINES_AT_ONCE", 2)
    store = stores
    jobs = {f"j{i}": job_spans(f"j{i}", ranks=2, windows=60) for i in range(5)}
    mixed = [s for group in itertools.zip_longest(*jobs.values()) for s in group if s]
    send(store, mixed, batch=50)
    for job, spans in jobs.items():
        assert figures(store.load_spans(job)) == figures(spans), job
    lines = store.compactor._lines([*jobs, "nobody"])
    assert sorted(lines) == sorted(jobs)  # each job was compacted, no line for an unknown job
    n_windows = sum(s.name == WINDOW for spans in jobs.values() for s in spans)
    assert count(store, f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'") < n_windows / 4


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_out_of_order_gives_the_runs_of_in_order(stores: Store, tmp_path: Path) -> None:
    store = stores
    spans = job_spans("j", ranks=3, windows=60)
    shuffled = spans + random.Random(7).sample(spans, k=len(spans) // 2)
    random.Random(8).shuffle(shuffled)
    send(store, shuffled, batch=40)
    assert figures(store.load_spans("j")) == figures(spans)
    store.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
    got = runs_table(store)

    in_order = Store(f"sqlite:///{tmp_path}/in-order.db", raw_window_retention_s=0.0)
    in_order.upgrade()
    try:
        send(in_order, spans, batch=40)
        in_order.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
        assert got == runs_table(in_order)
        assert store.span_counts()["spans"] == in_order.span_counts()["spans"] == len(spans)
    finally:
        in_order.close()


def test_retention_none_keeps_every_raw_window(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/keep.db", raw_window_retention_s=None)
    store.upgrade()
    try:
        spans = job_spans("j", ranks=2, windows=50)
        send(store, spans, batch=30)
        assert runs_table(store) == []
        assert count(store, f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'") == 200
        assert len(store.load_spans("j", raw=True)) == len(spans)
        assert figures(store.load_spans("j")) == figures(spans)
        assert len(store.load_spans("j")) < len(spans) / 5  # the domain is fed runs
    finally:
        store.close()


def test_negative_retention_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="retention"):
        Store(f"sqlite:///{tmp_path}/bad.db", raw_window_retention_s=-1.0)
