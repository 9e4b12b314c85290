"""Each rule of docs/metrics.md, one small scripted job at a time."""

from __future__ import annotations

import pytest

from ett import semconv as sc
from ett_collector.domain import Category, JobState, SegmentKind, summarize
from tests.support.spans import (
    attempt_end,
    failure,
    first_batch,
    per_component,
    persist,
    phase,
    save,
    span,
    window,
)

DONE = sc.EndReasonValues.COMPLETED.value
FAILED = sc.EndReasonValues.FAILED.value
PREEMPTED = sc.EndReasonValues.PREEMPTED.value
NOW = 1e6


def test_critical_rank_is_latest_first_batch_and_attribution_follows_it() -> None:
    spans = [
        phase("pg_init", 0, 10, rank=0),
        phase("model_init", 10, 20, rank=0),
        first_batch(20, rank=0),
        phase("pg_init", 0, 5, rank=1),
        phase("dataloader_init", 5, 30, rank=1),
        first_batch(30, rank=1),
        window(30, 40, rank=0),
        attempt_end(0, 40, DONE, rank=0),
    ]
    s = summarize(spans, NOW)
    assert s.attempts[0].critical_rank == 1
    assert s.tts_s == 30
    assert per_component(s.segments, SegmentKind.STARTUP) == pytest.approx({"comms": 5, "data": 25})


def test_critical_rank_tie_goes_to_lowest_rank() -> None:
    spans = [
        phase("pg_init", 0, 10, rank=1),
        first_batch(20, rank=1),
        phase("model_init", 0, 10, rank=0),
        first_batch(20, rank=0),
        attempt_end(0, 30, DONE),
    ]
    s = summarize(spans, NOW)
    assert s.attempts[0].critical_rank == 0
    assert per_component(s.segments, SegmentKind.STARTUP) == pytest.approx(
        {"model": 10, "other": 10}
    )


def test_explicit_component_and_unknown_phase() -> None:
    spans = [
        phase("warmup", 0, 10),
        phase("pg_init", 10, 20, **{sc.COMPONENT: "scheduler"}),
        first_batch(20),
        attempt_end(0, 20, DONE),
    ]
    s = summarize(spans, NOW)
    assert per_component(s.segments) == pytest.approx({"other": 10, "scheduler": 10})


def test_compile_span_inside_compile_phase_is_charged_once() -> None:
    spans = [
        phase("compile", 0, 10),
        span(sc.SPAN_COMPILE, 2, 8),
        first_batch(10),
        attempt_end(0, 10, DONE),
    ]
    s = summarize(spans, NOW)
    assert per_component(s.segments) == pytest.approx({"compile": 10})


def test_attempt_that_never_trained_is_failure_along_latest_rank() -> None:
    spans = [
        phase("pg_init", 0, 50, rank=0),
        phase("model_init", 0, 70, rank=1),
        attempt_end(0, 70, FAILED, sc.FailureCauseValues.NCCL_TIMEOUT.value, rank=1),
    ]
    s = summarize(spans, NOW)
    assert s.state == JobState.FAILED
    assert s.tts_s is None
    assert s.failure_s == 70 and s.idle_s == 0
    assert per_component(s.segments) == pytest.approx({"model": 70})
    assert s.attempts[0].critical_rank == 1
    assert dict(s.failure_causes) == {"nccl_timeout": 1}


def test_one_ranks_eval_stalls_job_and_overlaps_split_evenly() -> None:
    spans = [
        first_batch(0, rank=0),
        first_batch(0, rank=1),
        span(sc.SPAN_EVAL, 10, 30, rank=1),
        save(5, 20, 40, rank=0),
        save(5, 25, 35, rank=1),
        window(0, 100, rank=0),
        attempt_end(0, 100, DONE),
    ]
    s = summarize(spans, NOW)
    cut = per_component(s.segments, SegmentKind.CUTOUT)
    # eval alone 10-20, both 20-30 (5 each), checkpoint alone 30-40
    assert cut == pytest.approx({"eval": 15, "checkpoint": 15})
    assert s.checkpoint_blocking_s == pytest.approx(15)
    assert s.productive_s == pytest.approx(70)


def test_checkpoint_blocking_is_earliest_start_to_latest_end_over_ranks() -> None:
    spans = [
        first_batch(0, rank=0),
        first_batch(0, rank=1),
        save(1, 10, 12, rank=0),
        save(1, 11, 15, rank=1),
        window(0, 50),
        attempt_end(0, 50, DONE),
    ]
    assert summarize(spans, NOW).checkpoint_blocking_s == pytest.approx(5)


def test_async_checkpoint_counts_only_when_persisted_on_every_rank() -> None:
    base = [
        first_batch(0, rank=0),
        first_batch(0, rank=1),
        save(1, 10, 11, "async", rank=0),
        save(1, 10, 11, "async", rank=1),
        persist(1, 10, 20, rank=0),
        persist(1, 10, 21, rank=1),
        save(2, 50, 51, "async", rank=0),
        save(2, 50, 51, "async", rank=1),
        persist(2, 50, 60, rank=0),  # rank 1 never persisted step 2
        window(0, 80),
        attempt_end(0, 80, FAILED, sc.FailureCauseValues.OOM.value),
    ]
    s = summarize(base, NOW)
    # last committed snapshot is step 1 at t=10; clean time after it: 70 - blocking(1+1) = 68
    assert s.unsaved_s == pytest.approx(68)
    assert dict(s.failure_causes) == {"oom": 1}


def test_no_committed_checkpoint_means_unsaved_from_first_batch() -> None:
    spans = [
        phase("pg_init", 0, 10),
        first_batch(10),
        save(1, 20, 25, "async"),
        window(10, 40),
        failure(40, "exception"),
    ]
    later = [phase("pg_init", 100, 110, attempt=1), first_batch(120, attempt=1)]
    s = summarize(spans + later, NOW)
    assert s.unsaved_s == pytest.approx(25)  # 30 of training minus 5 of blocking
    assert s.attempts[0].failure_cause == "exception"
    assert s.ttr_s == (pytest.approx(80),)


def test_failed_shutdown_is_failure_and_not_unsaved() -> None:
    spans = [
        first_batch(0),
        save(1, 10, 12),
        window(0, 50),
        failure(110, "nccl_timeout"),
        attempt_end(0, 110, FAILED),
    ]
    s = summarize(spans, NOW)
    shutdown = [x for x in s.segments if x.kind == SegmentKind.SHUTDOWN]
    assert [(x.start, x.end, x.category) for x in shutdown] == [(50, 110, Category.FAILURE)]
    assert s.unsaved_s == pytest.approx(38)  # [12, 50]: after the snapshot, less blocking
    assert dict(s.failure_causes) == {"nccl_timeout": 1}


def test_completed_shutdown_charged_to_publish_and_checkpoint() -> None:
    spans = [
        first_batch(0),
        window(0, 50),
        save(9, 50, 60),
        span(sc.SPAN_PUBLISH, 60, 75),
        attempt_end(0, 80, DONE),
    ]
    s = summarize(spans, NOW)
    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx(
        {"checkpoint": 10, "publish": 15, "other": 5}
    )
    assert s.ett_pct == pytest.approx(50 / 80 * 100)


def test_standalone_publish_and_midtraining_compile() -> None:
    spans = [
        first_batch(0),
        span(sc.SPAN_PUBLISH, 10, 20, **{sc.PUBLISH_STANDALONE: True}),
        span(sc.SPAN_COMPILE, 30, 35),
        window(0, 50),
        attempt_end(0, 50, DONE),
    ]
    s = summarize(spans, NOW)
    assert per_component(s.segments) == pytest.approx({"compile": 5})
    assert s.productive_s == pytest.approx(45)


def test_preempted_attempt_cause_and_ttr_null_when_next_never_trained() -> None:
    spans = [
        first_batch(0),
        window(0, 30),
        attempt_end(0, 30, PREEMPTED),
        phase("pg_init", 40, 50, attempt=1),
        attempt_end(40, 60, FAILED, attempt=1),
    ]
    s = summarize(spans, NOW)
    assert s.failures == 2
    assert dict(s.failure_causes) == {"preemption": 1, "unknown": 1}
    assert s.ttr_s == (None, None)
    assert s.state == JobState.FAILED


def test_running_job_extends_to_now_and_reports_at_risk() -> None:
    spans = [phase("pg_init", 0, 10), first_batch(10), save(1, 20, 22), window(10, 30)]
    s = summarize(spans, now=35.0)
    assert s.state == JobState.RUNNING
    assert s.wall_s == pytest.approx(35)
    assert s.unsaved_s == 0
    assert s.at_risk_s == pytest.approx(13)  # from the snapshot at 20, minus 2 s blocking
    assert s.productive_s == pytest.approx(23)


def test_presumed_dead_after_three_silent_windows() -> None:
    spans = [phase("pg_init", 0, 10), first_batch(10), window(10, 30)]
    s = summarize(spans, now=61.0, window_s=10)
    assert s.state == JobState.PRESUMED_DEAD
    assert s.wall_s == pytest.approx(30)
    assert s.at_risk_s == pytest.approx(20)
    assert summarize(spans, now=59.0, window_s=10).state == JobState.RUNNING


def test_clock_skew_between_attempts_never_overlaps() -> None:
    spans = [
        first_batch(0),
        window(0, 100),
        phase("pg_init", 90, 110, attempt=1),  # starts before attempt 0's last heartbeat
        first_batch(110, attempt=1),
        window(110, 120, attempt=1),
        attempt_end(90, 120, DONE, attempt=1),
    ]
    s = summarize(spans, NOW)
    for a, b in zip(s.segments, s.segments[1:], strict=False):
        assert a.end == b.start
    assert s.wall_s == pytest.approx(120)
    assert s.productive_s + s.idle_s + s.failure_s == pytest.approx(120)


def test_completed_attempt_followed_by_another_counts_as_failed() -> None:
    spans = [
        first_batch(0),
        window(0, 10),
        attempt_end(0, 10, DONE),
        first_batch(20, attempt=1),
        attempt_end(20, 30, DONE, attempt=1),
    ]
    s = summarize(spans, NOW)
    assert s.failures == 1
    assert s.attempts[0].failed


def test_empty_job_is_an_error() -> None:
    with pytest.raises(ValueError):
        summarize([], NOW)


def _two_ranks_then_restart(rank1_end: list, rank0_end: list) -> list:
    ws = {sc.WORLD_SIZE: 2}
    spans = [
        first_batch(0, rank=0, **ws),
        first_batch(0, rank=1, **ws),
        window(0, 50, rank=0, **ws),
        window(0, 50, rank=1, **ws),
        *rank0_end,
        *rank1_end,
        first_batch(80, attempt=1),
        attempt_end(60, 90, DONE, attempt=1),
    ]
    return spans


def test_sigkilled_rank_makes_the_cause_killed_whatever_its_peers_said() -> None:
    # rank 1 was SIGKILLed (silent); torchrun stopped rank 0 with SIGTERM → preempted
    s = summarize(_two_ranks_then_restart([], [attempt_end(0, 52, PREEMPTED, rank=0)]), NOW)
    assert dict(s.failure_causes) == {"killed": 1}
    assert s.attempts[0].end_reason == FAILED
    # rank 0's collective failed instead, and it could only say "unknown"
    peer = [
        failure(51, "unknown", rank=0),
        attempt_end(0, 52, FAILED, "unknown", rank=0),
    ]
    assert dict(summarize(_two_ranks_then_restart([], peer), NOW).failure_causes) == {"killed": 1}


def test_world_size_reveals_a_rank_that_never_spoke() -> None:
    spans = [
        first_batch(0, **{sc.WORLD_SIZE: 2}),
        window(0, 50, **{sc.WORLD_SIZE: 2}),
        attempt_end(0, 52, PREEMPTED, **{sc.WORLD_SIZE: 2}),
    ]
    s = summarize(spans, NOW)
    assert dict(s.failure_causes) == {"killed": 1}


def test_specific_cause_wins_over_peers_stopped_by_torchrun() -> None:
    rank1 = [
        failure(50, "oom", rank=1),
        attempt_end(0, 50, FAILED, "oom", rank=1),
    ]
    rank0 = [attempt_end(0, 52, PREEMPTED, rank=0)]
    s = summarize(_two_ranks_then_restart(rank1, rank0), NOW)
    assert dict(s.failure_causes) == {"oom": 1}


def test_real_preemption_of_every_rank() -> None:
    rank0 = [attempt_end(0, 52, PREEMPTED, rank=0)]
    rank1 = [attempt_end(0, 52, PREEMPTED, rank=1)]
    s = summarize(_two_ranks_then_restart(rank1, rank0), NOW)
    assert dict(s.failure_causes) == {"preemption": 1}
    assert s.attempts[0].end_reason == PREEMPTED


def test_standalone_publish_job_is_idle_publish_not_failure() -> None:
    spans = [
        phase("checkpoint_load", 0, 5),
        span(sc.SPAN_PUBLISH, 5, 20, **{sc.PUBLISH_STANDALONE: True}),
        attempt_end(0, 21, DONE),
    ]
    s = summarize(spans, NOW)
    assert s.failure_s == 0
    assert per_component(s.segments) == pytest.approx({"checkpoint": 5, "publish": 15, "other": 1})


@pytest.mark.parametrize("second_step", [200, 100])
def test_a_rank_that_saves_one_step_twice_made_two_checkpoints(second_step: int) -> None:
    """Two saves of one step by one rank (a step counter that did not move, saves keyed by
    epoch) are two checkpoints, each blocking its own 10 s: grouped by the step alone they read
    as one save from 150 to 270, the 100 s of training between them charged to checkpoint."""
    async_ = sc.CheckpointModeValues.ASYNC.value
    spans = [phase("pg_init", 0, 10, rank=r) for r in (0, 1)] + [
        first_batch(20, rank=r) for r in (0, 1)
    ]
    for r in (0, 1):
        spans += [window(t, t + 10, rank=r) for t in range(20, 300, 10)]
        spans += [
            save(100, 150 + r, 160, mode=async_, rank=r),
            persist(100, 160, 170 + r, rank=r),
            save(second_step, 260, 270 - r, mode=async_, rank=r),
            persist(second_step, 270, 280, rank=r),
        ]
    spans.append(attempt_end(0, 300, DONE))
    s = summarize(spans, NOW)

    assert s.checkpoint_blocking_s == pytest.approx(20)
    assert s.checkpoint_blocking_stats.count == 2
    assert s.checkpoint_blocking_stats.max_s == pytest.approx(10)
    assert s.ett_pct == pytest.approx((280 - 20) / 300 * 100)
