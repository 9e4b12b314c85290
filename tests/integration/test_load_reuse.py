"""A store that loads a live job again and again reuses what its previous load decoded and
folded (``Store.load_spans``); every load must equal a fresh store's load of the same rows, and
the figures those of the raw spans, whatever arrives between loads: windows in order, late or
shuffled windows, replays, a span id repeated at another start, a new rank, compaction."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator

import pytest

from ett_collector.domain import SpanRecord
from ett_collector.storage import Store
from tests.integration.test_window_runs_storage import BACKENDS, figures, job_spans

BATCH = 12


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    s = Store(database_url, raw_window_retention_s=300.0)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


def _stream(spans: list[SpanRecord]) -> list[list[SpanRecord]]:
    """The spans in batches, mostly in end order, with a few late, replayed and odd ones (a
    window's span id at another start, earlier and later than the window)."""
    rng = random.Random(3)
    ordered = sorted(spans, key=lambda s: s.end)
    windows = [i for i, s in enumerate(ordered) if s.name == "ett.train.window"]
    late = set(rng.sample(windows, k=len(windows) // 20))
    kept = [s for i, s in enumerate(ordered) if i not in late]
    batches = [kept[i : i + BATCH] for i in range(0, len(kept), BATCH)]
    for i in sorted(late):  # each late span arrives a few batches after its neighbours
        batches[min(len(batches) - 1, i // BATCH + rng.randint(1, 3))].append(ordered[i])
    for b in rng.sample(range(len(batches)), k=len(batches) // 5):  # replays of earlier spans
        batches[b] += rng.sample(kept[: (b + 1) * BATCH], k=3)
    w = next(s for s in ordered if s.name == "ett.train.window" and s.rank == 0)
    odd = dataclasses.replace(w, start=w.start + 0.5, end=w.end + 0.5)
    batches[len(batches) // 2].append(odd)  # a stored window's span id at another start
    m = len(batches) // 3
    w = max(
        (s for b in batches[: m + 1] for s in b if s.name == "ett.train.window" and s.rank == 1),
        key=lambda s: s.end,
    )
    batches.insert(m + 1, [dataclasses.replace(w, start=w.end, end=w.end + 10)])  # id, later
    return batches


def _fresh_load(database_url: str) -> list[SpanRecord]:
    """The job's load by a new store (nothing remembered from an earlier load), the same as
    that of a store that remembers no load (``loads_kept=0``)."""
    loads = []
    for kept in (64, 0):
        fresh = Store(database_url, raw_window_retention_s=300.0, loads_kept=kept)
        try:
            loads.append(fresh.load_spans("j"))
        finally:
            fresh.close()
    assert loads[0] == loads[1]
    return loads[0]


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_each_load_equals_a_fresh_stores(store: Store, database_url: str) -> None:
    spans = job_spans("j", ranks=3, windows=60)  # attempt 1's ranks: new ranks mid-stream
    sent: list[SpanRecord] = []
    for i, batch in enumerate(_stream(spans)):
        store.ingest(batch)
        sent += batch
        got = store.load_spans("j")
        assert got == _fresh_load(database_url), f"after batch {i}"
        if i % 7 == 0:  # the figures of the raw spans sent so far (first copy of each)
            unique = {(s.trace_id, s.span_id, s.start): s for s in reversed(sent)}
            by_id = {
                (s.trace_id, s.span_id): s for s in sorted(unique.values(), key=lambda s: -s.start)
            }
            assert figures(got) == figures(list(by_id.values())), f"after batch {i}"
    store.compactor.compact("j", cutoff=max(s.end for s in spans) + 1)
    assert store.load_spans("j") == _fresh_load(database_url)
