"""Unsaved time from the next attempt's restore (docs/metrics.md, "Unsaved time", v1.2), and
causes under peer loss."""

from __future__ import annotations

from typing import Any

import pytest

from ett import semconv as sc
from ett_collector.domain import summarize
from tests.support.spans import attempt_end, first_batch, persist, phase, save, span, window

FAILED = sc.EndReasonValues.FAILED.value
DONE = sc.EndReasonValues.COMPLETED.value
NOW = 1e6
WS = {sc.WORLD_SIZE: 2}


def _restart(restored: int | None) -> list[Any]:
    attrs = {} if restored is None else {sc.CHECKPOINT_STEP: restored}
    return [
        phase("checkpoint_load", 60, 70, attempt=1, **attrs),
        first_batch(80, attempt=1),
        attempt_end(60, 90, DONE, attempt=1),
    ]


def _lost_persist() -> list[Any]:
    # both ranks snapshot step 100 at 20; rank 1 dies before its persist span is sent
    return [
        first_batch(0, rank=0, **WS),
        first_batch(0, rank=1, **WS),
        save(100, 20, 22, "async", rank=0, **WS),
        save(100, 20, 22, "async", rank=1, **WS),
        persist(100, 22, 30, rank=0, **WS),
        window(0, 50, rank=0, **WS),
        window(0, 50, rank=1, **WS),
    ]


def test_a_restore_shows_the_checkpoint_was_committed_though_its_persist_was_lost() -> None:
    without = summarize(_lost_persist() + _restart(None), NOW)
    assert without.unsaved_s == pytest.approx(48)  # no committed checkpoint: from first(0)
    with_restore = summarize(_lost_persist() + _restart(100), NOW)
    assert with_restore.unsaved_s == pytest.approx(28)  # [20, 50] less 2 s of blocking


def _two_checkpoints() -> list[Any]:
    return [
        first_batch(0),
        save(100, 10, 12),
        save(200, 30, 32),
        window(0, 50),
        span(sc.SPAN_FAILURE, 50, 50, **{sc.FAILURE_CAUSE: "exception"}),
        attempt_end(0, 50, FAILED, "exception"),
    ]


def test_a_restore_of_an_older_checkpoint_counts_unsaved_from_its_snapshot() -> None:
    newest = summarize(_two_checkpoints() + _restart(None), NOW)
    assert newest.unsaved_s == pytest.approx(18)  # after the snapshot of step 200
    older = summarize(_two_checkpoints() + _restart(100), NOW)
    assert older.unsaved_s == pytest.approx(36)  # [10, 50] less both blockings
    assert older.wall_s == newest.wall_s
    assert older.productive_s == pytest.approx(newest.productive_s - 18)


def test_a_restored_step_unknown_to_the_attempt_falls_back_to_the_last_commit() -> None:
    s = summarize(_two_checkpoints() + _restart(7), NOW)
    assert s.unsaved_s == pytest.approx(18)


def test_unsaved_never_starts_before_the_first_batch() -> None:
    spans = [
        phase("pg_init", 0, 10),
        save(5, 2, 4),  # a save before the first batch (odd, but possible on a skewed clock)
        first_batch(10),
        window(10, 40),
        attempt_end(0, 40, FAILED, "exception"),
    ]
    s = summarize(spans + _restart(5), NOW)
    assert s.unsaved_s == pytest.approx(30)


def _peer_loss_on_rank0(at: float) -> list[Any]:
    unknown = {sc.FAILURE_CAUSE: sc.FailureCauseValues.UNKNOWN.value}
    return [
        span(sc.SPAN_FAILURE, at, at, rank=0, **unknown, **WS),
        attempt_end(0, at + 1, FAILED, "unknown", rank=0, **WS),
    ]


def _job(rank1: list[Any], rank0: list[Any]) -> list[Any]:
    return [
        first_batch(0, rank=0, **WS),
        first_batch(0, rank=1, **WS),
        window(0, 50, rank=0, **WS),
        window(0, 50, rank=1, **WS),
        *rank0,
        *rank1,
        first_batch(80, attempt=1),
        attempt_end(60, 90, DONE, attempt=1),
    ]


@pytest.mark.parametrize(
    ("dead_rank_said", "cause"),
    [(None, "killed"), ("oom", "oom"), ("preemption", "preemption"), ("unknown", "killed")],
)
def test_a_lost_peer_never_names_the_cause(dead_rank_said: str | None, cause: str) -> None:
    # rank 1 died (its attempt span never came); rank 0's collective saw the peer go, earlier
    # on its clock than rank 1's own report
    rank1 = []
    if dead_rank_said is not None:
        rank1 = [span(sc.SPAN_FAILURE, 51, 51, rank=1, **{sc.FAILURE_CAUSE: dead_rank_said}, **WS)]
    s = summarize(_job(rank1, _peer_loss_on_rank0(49)), NOW)
    assert dict(s.failure_causes) == {cause: 1}
    assert s.attempts[0].failure_cause == cause
