"""The Job page's timeline and the figures read one rule for "committed" (issue 25): two ranks
save a step asynchronously and only one of them persists it, then the attempt fails. The
timeline must not mark the snapshot committed, and the figures must not count it (unsaved time
runs back to the previous committed snapshot); once both ranks persist, both count it."""

from __future__ import annotations

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord, job_activity, summarize
from ett_collector.read.activity import activity
from tests.support.spans import attempt_end, first_batch, persist, save, window

FAILED = sc.EndReasonValues.FAILED.value
NOW = 1e6


def _job(rank1_persists_step_2: bool) -> list[SpanRecord]:
    spans = [
        first_batch(0, rank=0),
        first_batch(0, rank=1),
        *(save(1, 10, 11, "async", rank=r) for r in (0, 1)),
        *(persist(1, 11, 20, rank=r) for r in (0, 1)),
        *(save(2, 50, 51, "async", rank=r) for r in (0, 1)),
        persist(2, 51, 60, rank=0),
        window(0, 80),
        attempt_end(0, 80, FAILED, sc.FailureCauseValues.OOM.value),
    ]
    if rank1_persists_step_2:
        spans.append(persist(2, 51, 65, rank=1))
    return spans


def test_a_step_one_rank_persisted_is_neither_committed_nor_counted() -> None:
    spans = _job(rank1_persists_step_2=False)
    rows = {r["step"]: r for r in activity(spans)["checkpoints"]}
    assert rows[1]["committed_at"] == 20.0
    assert rows[2]["committed_at"] is None  # rank 1 never persisted step 2
    assert rows[2]["persist_end"] == 60.0  # rank 0's persist is still shown
    # the figures: the last committed snapshot is step 1's (t=10), so unsaved time is
    # [10, 80] less the blocking of both saves (1 + 1 s)
    assert summarize(spans, NOW).unsaved_s == pytest.approx(68)


def test_once_every_rank_persisted_both_count_the_snapshot() -> None:
    spans = _job(rank1_persists_step_2=True)
    [_, step2] = job_activity(spans).checkpoints
    assert (step2.step, step2.committed_at, step2.persist_s) == (2, 65.0, 14.0)
    assert (step2.save_start, step2.save_end, step2.blocking_s) == (50.0, 51.0, 1.0)
    assert (step2.persist_end, step2.mode, step2.bytes) == (65.0, "async", None)
    # the snapshot of step 2 (t=50) counts now: unsaved is [50, 80] less its 1 s of blocking
    assert summarize(spans, NOW).unsaved_s == pytest.approx(29)


def test_the_json_rows_are_the_domain_records_field_for_field() -> None:
    spans = _job(rank1_persists_step_2=False)
    found = job_activity(spans)
    answer = activity(spans)
    assert list(answer) == [
        "startup",
        "first_batches",
        "checkpoints",
        "restores",
        "compiles",
        "failures",
    ]
    assert list(answer["checkpoints"][0]) == [
        "attempt",
        "step",
        "mode",
        "bytes",
        "save_start",
        "save_end",
        "persist_end",
        "blocking_s",
        "persist_s",
        "committed_at",
    ]
    assert answer["first_batches"] == [
        {"attempt": b.attempt, "rank": b.rank, "at": b.at, "step": b.step}
        for b in found.first_batches
    ]
