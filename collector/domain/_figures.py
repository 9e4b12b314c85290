"""The figures of a job (docs/metrics.md). One function per quantity; ``summarize``
(``_summary.py``) composes them.

Pure: no clock reads, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ett import semconv as sc

from ._attempts import AttemptFacts
from .model import Category, CheckpointAdvice, JobState, Segment, SegmentKind

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
