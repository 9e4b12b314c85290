"""The job page's checkpoint rows and the figures agree on when a checkpoint is committed: once
every rank that saved it has persisted it (``checkpoints_of``), not at the first rank's persist
(issue 25: the timeline showed a snapshot committed that the figures did not count)."""

from __future__ import annotations

from typing import Any

from ett_collector.domain import SpanRecord, checkpoints_of
from ett_collector.read.activity import activity
from tests.support.spans import persist, save


def _row(spans: list[SpanRecord]) -> dict[str, Any]:
    [row] = activity(spans)["checkpoints"]
    return row


def test_an_async_save_is_committed_when_its_last_rank_persists() -> None:
    saves = [save(100, 1.0, 1.2, mode="async", rank=r) for r in (0, 1)]
    one = [*saves, persist(100, 1.2, 10.0, rank=0)]
    assert _row(one)["committed_at"] is None  # rank 1 has not persisted: not committed yet
    assert [c.committed_at for c in checkpoints_of(one)] == [None]
    both = [*one, persist(100, 1.2, 20.0, rank=1)]
    assert _row(both)["committed_at"] == 20.0
    assert [c.committed_at for c in checkpoints_of(both)] == [20.0]


def test_sync_saves_commit_at_their_end_and_attempts_stay_apart() -> None:
    spans = [save(50, 1.0, 2.0, rank=r, attempt=a) for r in (0, 1) for a in (0, 1)]
    spans.append(save(50, 3.0, 4.5, rank=1, attempt=1))
    rows = activity(spans)["checkpoints"]
    assert [(r["attempt"], r["committed_at"]) for r in rows] == [(0, 2.0), (1, 4.5)]
