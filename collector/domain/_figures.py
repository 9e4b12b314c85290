"""ETT-SPEC section 3: the figures of a job. One function per quantity; ``summarize`` composes.

Pure: spans and ``now`` in, a :class:`JobSummary` out. No clock reads, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ett import semconv as sc

from ._attempts import AttemptFacts, attempt_facts, latest_rank
from ._charges import blocking_events
from ._checkpoints import blocking_stats, checkpoints_of, restored_step, unsaved_since
from ._segments import shutdown_segments, startup_segments, training_segments
from .model import (
    AttemptSummary,
    Category,
    CheckpointAdvice,
    JobState,
    JobSummary,
    Segment,
    SegmentKind,
    SpanRecord,
)

DEFAULT_WINDOW_S = sc.DEFAULT_WINDOW_S
"""The default ``ett.train.window`` length (the emitter's, from ``ett.semconv``)."""

_COMPLETED = sc.EndReasonValues.COMPLETED.value


def job_state(last: AttemptFacts, now: float, window_s: float) -> JobState:
    """The job's state from its last attempt: its end reason, else live-ness.

    An attempt with no end reason and no span for ``PRESUMED_DEAD_WINDOWS`` (3) windows is
    presumed dead.
    """
    if last.end_reason == _COMPLETED:
        return JobState.COMPLETED
    if last.end_reason is not None:
        return JobState.FAILED
    if now - last.end > sc.PRESUMED_DEAD_WINDOWS * window_s:
        return JobState.PRESUMED_DEAD
    return JobState.RUNNING


def is_failed(facts: AttemptFacts, later_exists: bool) -> bool:
    """An attempt failed if its end reason is not ``completed``, or if a later attempt exists."""
    return later_exists or (facts.end_reason is not None and facts.end_reason != _COMPLETED)


def failure_cause(facts: AttemptFacts) -> str:
    """The cause of a failed attempt: the one its spans reported; ``preemption`` for a preempted
    attempt that said no more; ``killed`` when no span said why (it died without an end span);
    ``unknown`` when it ended failed without a cause."""
    if facts.reported_cause:
        return facts.reported_cause
    if facts.end_reason == sc.EndReasonValues.PREEMPTED.value:
        return sc.FailureCauseValues.PREEMPTION.value
    if facts.end_reason is None:
        return sc.FailureCauseValues.KILLED.value
    return sc.FailureCauseValues.UNKNOWN.value


def tts(attempts: Sequence[AttemptFacts]) -> float | None:
    """``TTS = first(0) - alloc(0)``; None when attempt 0 never trained."""
    first = attempts[0]
    return None if first.first is None else first.first - first.alloc


def ttr(attempts: Sequence[AttemptFacts], failed: Sequence[bool]) -> list[float | None]:
    """``TTR(a) = first(a+1) - end(a)`` for each failed ``a`` (None where ``a+1`` never trained
    or has not started)."""
    out: list[float | None] = []
    for i, a in enumerate(attempts):
        if not failed[i]:
            continue
        nxt = attempts[i + 1] if i + 1 < len(attempts) else None
        out.append(None if nxt is None or nxt.first is None else nxt.first - a.end)
    return out


def category_seconds(segments: Sequence[Segment], category: Category) -> float:
    """Seconds of the segments of one category."""
    return sum(s.duration for s in segments if s.category == category)


def kind_component_seconds(segments: Sequence[Segment], kind: SegmentKind, component: str) -> float:
    """Seconds charged to ``component`` by segments of ``kind`` (shares where split)."""
    return sum(s.shares().get(component, 0.0) for s in segments if s.kind == kind)


def checkpoint_restore(segments: Sequence[Segment]) -> float:
    """``checkpoint_restore``: the start-up seconds charged to ``checkpoint`` (the restores,
    ``ett.startup.checkpoint_load``, as charged along the critical path; shares where split)."""
    return kind_component_seconds(segments, SegmentKind.STARTUP, sc.ComponentValues.CHECKPOINT)


def lost_by_component(segments: Sequence[Segment]) -> dict[str, float]:
    """Idle + failure seconds per component, largest first."""
    out: dict[str, float] = {}
    for s in segments:
        for comp, secs in s.shares().items():
            out[comp] = out.get(comp, 0.0) + secs
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def pct(part: float, wall: float) -> float:
    """``part / wall`` in percent (0 when the wall time is 0)."""
    return 100.0 * part / wall if wall > 0 else 0.0


def young_interval(mean_blocking: float, training: float, failures: int) -> float | None:
    """Young's optimal checkpoint interval ``I* = sqrt(2·B·T/F)`` (None without failures)."""
    if failures <= 0 or mean_blocking <= 0 or training <= 0:
        return None
    return math.sqrt(2.0 * mean_blocking * training / failures)


def checkpoint_loss(interval: float, mean_blocking: float, training: float, failures: int) -> float:
    """Total loss ``L(I) = F·I/2 + (T/I)·B`` of checkpointing every ``I`` seconds."""
    return failures * interval / 2.0 + (training / interval) * mean_blocking


def checkpoint_advice(
    blocking: float, checkpoints: int, training: float, failures: int, intervals: Sequence[float]
) -> CheckpointAdvice:
    """The interval in use (mean clean training time between snapshots), Young's optimum, and
    the seconds a change to the optimum would have saved on this job."""
    mean_b = blocking / checkpoints if checkpoints else None
    in_use = sum(intervals) / len(intervals) if intervals else None
    optimal = young_interval(mean_b or 0.0, training, failures)
    saving: float | None = None
    if optimal is not None and in_use is not None and in_use > 0 and mean_b is not None:
        saving = max(
            0.0,
            checkpoint_loss(in_use, mean_b, training, failures)
            - checkpoint_loss(optimal, mean_b, training, failures),
        )
    return CheckpointAdvice(in_use, optimal, saving, mean_b, checkpoints)


def _first_str(spans: Sequence[SpanRecord], key: str) -> str | None:
    for s in spans:
        v = s.attr(key)
        if isinstance(v, str) and v:
            return v
    return None


def summarize(
    spans: Sequence[SpanRecord], now: float, window_s: float = DEFAULT_WINDOW_S
) -> JobSummary:
    """Every figure of one job from its spans, as seen at ``now`` (ETT-SPEC section 3).

    A running job's last attempt is extended to ``now`` (its wall time grows); a presumed-dead
    one is taken as it was at its last span. Neither has unsaved time yet: theirs is at risk.
    """
    if not spans:
        raise ValueError("a job needs at least one span")
    facts = attempt_facts(spans)
    state = job_state(facts[-1], now, window_s)
    n = len(facts)
    failed = [is_failed(f, i + 1 < n) for i, f in enumerate(facts)]
    segments: list[Segment] = []
    summaries: list[AttemptSummary] = []
    cursor = facts[0].alloc
    at_risk = clean = 0.0
    checkpoints_count = 0
    intervals: list[float] = []
    per_save: list[float] = []
    for i, f in enumerate(facts):
        live = i == n - 1 and state in (JobState.RUNNING, JobState.PRESUMED_DEAD)
        end = max(now, f.end) if live and state == JobState.RUNNING else f.end
        progress = (
            None if f.first is None else (end if live and state == JobState.RUNNING else f.progress)
        )
        lo = max(f.alloc, cursor)
        if i > 0 and lo > cursor:
            segments.append(
                Segment(
                    f.attempt,
                    cursor,
                    lo,
                    Category.FAILURE,
                    SegmentKind.RECOVERY_GAP,
                    (sc.ComponentValues.SCHEDULER.value,),
                )
            )
        startup_cat = Category.IDLE if i == 0 else Category.FAILURE
        if f.first is None:
            hi = max(end, lo)
            cat = Category.FAILURE if failed[i] else startup_cat
            critical: int | None = latest_rank(f.spans)
            segments += startup_segments(
                f.attempt, f.spans, lo, hi, critical or 0, cat, through_barriers=False
            )
        else:
            critical = f.critical_rank
            s_hi = max(f.first, lo)
            segments += startup_segments(f.attempt, f.spans, lo, s_hi, critical or 0, startup_cat)
            t_hi = max(progress or s_hi, s_hi)
            ckpts = checkpoints_of(f.spans)
            restored = restored_step(facts[i + 1].spans) if i + 1 < n else None
            snap = unsaved_since(ckpts, f.end, restored)
            tr = training_segments(f.attempt, f.spans, ckpts, s_hi, t_hi, snap, failed[i])
            segments += tr.segments
            at_risk += tr.at_risk_s if live else 0.0
            clean += tr.clean_s
            checkpoints_count += tr.checkpoints_in_training
            intervals += tr.snapshot_intervals
            per_save += [c.block_end - c.block_start for c in ckpts]
            hi = max(end, t_hi)
            segments += shutdown_segments(f.attempt, f.spans, t_hi, hi, failed[i])
        cause = failure_cause(f) if failed[i] else None
        summaries.append(
            AttemptSummary(
                attempt=f.attempt,
                alloc=f.alloc,
                first_batch=f.first,
                end=f.end,
                progress=f.progress,
                end_reason=f.end_reason,
                failed=failed[i],
                failure_cause=cause,
                critical_rank=critical,
                ranks=f.ranks,
            )
        )
        cursor = hi
    return _compose(
        spans,
        facts,
        state,
        failed,
        summaries,
        segments,
        at_risk,
        clean,
        checkpoints_count,
        intervals,
        cursor,
        per_save,
    )


def _compose(
    spans: Sequence[SpanRecord],
    facts: Sequence[AttemptFacts],
    state: JobState,
    failed: Sequence[bool],
    summaries: Sequence[AttemptSummary],
    segments: Sequence[Segment],
    at_risk: float,
    clean: float,
    checkpoints_count: int,
    intervals: Sequence[float],
    end: float,
    per_save: Sequence[float],
) -> JobSummary:
    """Put the figures of :func:`summarize` together."""
    alloc = facts[0].alloc
    wall = end - alloc
    productive = category_seconds(segments, Category.PRODUCTIVE)
    idle = category_seconds(segments, Category.IDLE)
    failure = category_seconds(segments, Category.FAILURE)
    causes: dict[str, int] = {}
    for a in summaries:
        if a.failure_cause is not None:
            causes[a.failure_cause] = causes.get(a.failure_cause, 0) + 1
    n_failed = sum(failed)
    blocking = kind_component_seconds(segments, SegmentKind.CUTOUT, sc.ComponentValues.CHECKPOINT)
    advice = checkpoint_advice(blocking, checkpoints_count, clean, n_failed, intervals)
    unsaved = sum(s.duration for s in segments if s.kind == SegmentKind.UNSAVED)
    expected = n_failed * advice.interval_s / 2.0 if advice.interval_s is not None else None
    return JobSummary(
        job_id=spans[0].job_id,
        state=state,
        model=_first_str(spans, sc.MODEL),
        team=_first_str(spans, sc.TEAM),
        alloc=alloc,
        end=end,
        wall_s=wall,
        productive_s=productive,
        idle_s=idle,
        failure_s=failure,
        ett_pct=pct(productive, wall),
        idle_pct=pct(idle, wall),
        failure_pct=pct(failure, wall),
        tts_s=tts(facts),
        ttr_s=tuple(ttr(facts, failed)),
        failures=n_failed,
        failure_causes=causes,
        unsaved_s=unsaved,
        expected_unsaved_s=expected,
        at_risk_s=at_risk,
        checkpoint_blocking_s=blocking,
        lost_by_component=lost_by_component(segments),
        checkpoint_advice=advice,
        attempts=tuple(summaries),
        segments=tuple(segments),
        span_count=sum(s.count for s in spans),
        last_span_end=max(s.end for s in spans),
        checkpoint_restore_s=checkpoint_restore(segments),
        checkpoint_blocking_stats=blocking_stats(per_save),
        blocking_events=blocking_events(spans),
    )
