"""Windows folded before they are written (``ETT_RAW_WINDOW_RETENTION_S=0``), on real SQLite and
PostgreSQL: no window is ever stored raw, and the figures, runs, span counts and step series are
those of the raw windows, in order, shuffled in random batches or replayed."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator

import pytest

from ett_collector.domain import SpanRecord
from ett_collector.storage import Store
from ett_collector.storage._runs import WINDOW
from tests.integration.test_window_runs_storage import count, figures, job_spans, runs_table

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
RAW_WINDOWS = f"SELECT count(*) FROM spans WHERE name = '{WINDOW}'"
SERIES = 'SELECT COALESCE(SUM("windows"), 0) FROM window_series'


@pytest.fixture
def folding(database_url: str) -> Iterator[Store]:
    s = Store(database_url, raw_window_retention_s=0.0)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


def _send_randomly(store: Store, spans: list[SpanRecord], rng: random.Random) -> None:
    i = 0
    while i < len(spans):
        n = rng.randint(1, 120)
        store.ingest(spans[i : i + n])
        i += n


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_windows_are_never_raw_and_the_figures_stay_exact(folding: Store) -> None:
    store = folding
    assert store.compactor.folds_at_ingest
    spans = job_spans("j")
    want = figures(spans)
    n_windows = sum(s.name == WINDOW for s in spans)
    for i in range(0, len(spans), 64):  # in order, as ranks send them
        store.ingest(spans[i : i + 64])
        assert count(store, RAW_WINDOWS) == 0
    assert figures(store.load_spans("j")) == want
    assert store.span_counts()["spans"] == len(spans)
    assert count(store, SERIES) == n_windows  # every window in the step series, once
    runs = runs_table(store)
    assert len(runs) == 9  # one run per (attempt, rank), and rank 1's gap: 4 + 1 + 4

    # replays, shuffled, in random batches: nothing moves, and a batch of replays only
    # marks nothing dirty
    rng = random.Random(7)
    _send_randomly(store, rng.sample(spans, k=len(spans)), rng)
    assert store.ingest([s for s in spans if s.name == WINDOW][:50]) == set()
    assert figures(store.load_spans("j")) == want
    assert store.span_counts()["spans"] == len(spans)
    assert count(store, SERIES) == n_windows
    assert runs_table(store) == runs


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_any_arrival_order_gives_the_same_runs(folding: Store) -> None:
    spans = job_spans("j", ranks=3, windows=60)
    want = figures(spans)
    rng = random.Random(11)
    _send_randomly(folding, rng.sample(spans, k=len(spans)), rng)  # late windows fill gaps
    assert figures(folding.load_spans("j")) == want
    assert folding.span_counts()["spans"] == len(spans)
    assert count(folding, RAW_WINDOWS) == 0
    # as many runs as the in-order fold makes: late windows joined the runs on both sides
    assert len(runs_table(folding)) == 3 + 1 + 3


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_concurrent_folds_of_one_job_take_turns(folding: Store) -> None:
    spans = job_spans("j", ranks=4, windows=80)
    want = figures(spans)
    parts = [spans[k::4] for k in range(4)]  # every thread has windows of every rank
    start = threading.Barrier(len(parts))
    errors: list[BaseException] = []

    def send(part: list[SpanRecord]) -> None:
        start.wait()
        try:
            for i in range(0, len(part), 16):
                folding.ingest(part[i : i + 16])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert figures(folding.load_spans("j")) == want
    assert folding.span_counts()["spans"] == len(spans)
    assert count(folding, SERIES) == sum(s.name == WINDOW for s in spans)
    assert len(runs_table(folding)) == 4 + 1 + 4
