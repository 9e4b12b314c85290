"""A job's figures from its spans (docs/metrics.md): :func:`summarize` walks the attempts in
order, cuts each one's time into segments (the recovery gap before it, start-up, training,
shutdown) and composes the quantities of ``_figures``, one function each.

Pure: spans and ``now`` in, a :class:`JobSummary` out. No clock reads, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

from ett import semconv as sc

from ._activity import startup_compile_cache, telemetry_lost_spans
from ._attempts import AttemptFacts, attempt_facts, latest_rank
from ._charges import blocking_events
from ._checkpoints import blocking_stats, checkpoints_of, restored_step, unsaved_since
from ._critical import barrier_skew_s
from ._figures import (
    DEFAULT_WINDOW_S,
    category_seconds,
    checkpoint_advice,
    checkpoint_restore,
    failure_cause,
    is_failed,
    job_state,
    kind_component_seconds,
    lost_by_component,
    pct,
    ttr,
    tts,
)
from ._segments import shutdown_segments, startup_segments, training_segments
from .model import (
    AttemptSummary,
    Category,
    JobState,
    JobSummary,
    Segment,
    SegmentKind,
    SpanRecord,
)


def summarize(
    spans: Sequence[SpanRecord], now: float, window_s: float = DEFAULT_WINDOW_S
) -> JobSummary:
    """Every figure of one job from its spans, as seen at ``now`` (docs/metrics.md).

    A running job's last attempt is extended to ``now`` (its wall time grows); a presumed-dead
    one is taken as it was at its last span. Neither has unsaved time yet: theirs is at risk.
    """
    if not spans:
        raise ValueError("a job needs at least one span")
    facts = attempt_facts(spans)
    walk = _Walk(facts, job_state(facts[-1], now, window_s), now)
    for i in range(len(facts)):
        walk.attempt(i)
    return _compose(spans, walk)


class _Walk:
    """The attempts in order, and what their segments add up to so far.

    ``cursor`` is where the time so far ends: each attempt's time starts at its allocation or
    there, whichever is later, and the gap between the two is the scheduler's recovery gap.
    """

    def __init__(self, facts: Sequence[AttemptFacts], state: JobState, now: float) -> None:
        self.facts, self.state, self.now = facts, state, now
        n = len(facts)
        self.failed = [is_failed(f, i + 1 < n) for i, f in enumerate(facts)]
        self.cursor = facts[0].alloc
        self.segments: list[Segment] = []
        self.summaries: list[AttemptSummary] = []
        self.at_risk = self.clean = 0.0
        self.checkpoints = 0
        self.intervals: list[float] = []
        self.per_save: list[float] = []
        self.async_saves = 0

    def attempt(self, i: int) -> None:
        """Add attempt ``i``'s segments and summary; move the cursor to its end."""
        f, failed = self.facts[i], self.failed[i]
        live = i == len(self.facts) - 1 and self.state in (
            JobState.RUNNING,
            JobState.PRESUMED_DEAD,
        )
        running = live and self.state == JobState.RUNNING
        end = max(self.now, f.end) if running else f.end
        lo = max(f.alloc, self.cursor)
        if i > 0 and lo > self.cursor:
            self.segments.append(_recovery_gap(f.attempt, self.cursor, lo))
        startup_cat = Category.IDLE if i == 0 else Category.FAILURE
        critical: int | None
        if f.first is None:  # it never trained: all of it is start-up
            hi = max(end, lo)
            cat = Category.FAILURE if failed else startup_cat
            critical = latest_rank(f.spans)
            self.segments += startup_segments(
                f.attempt, f.spans, lo, hi, critical or 0, cat, through_barriers=False
            )
        else:
            critical = f.critical_rank
            progress = end if running else f.progress
            hi = self._trained(i, lo, end, progress, startup_cat, live)
        self.summaries.append(_attempt_summary(f, failed, critical))
        self.cursor = hi

    def _trained(
        self,
        i: int,
        lo: float,
        end: float,
        progress: float | None,
        startup_cat: Category,
        live: bool,
    ) -> float:
        """Start-up to the first batch, training to the last progress, then shutdown to
        ``end``; the training's checkpoint figures added up. Returns where the attempt ends."""
        f, failed = self.facts[i], self.failed[i]
        first = f.first
        assert first is not None
        s_hi = max(first, lo)
        self.segments += startup_segments(
            f.attempt, f.spans, lo, s_hi, f.critical_rank or 0, startup_cat
        )
        t_hi = max(progress or s_hi, s_hi)
        ckpts = checkpoints_of(f.spans)
        restored = restored_step(self.facts[i + 1].spans) if i + 1 < len(self.facts) else None
        snap = unsaved_since(ckpts, f.end, restored)
        tr = training_segments(f.attempt, f.spans, ckpts, s_hi, t_hi, snap, failed)
        self.segments += tr.segments
        self.at_risk += tr.at_risk_s if live else 0.0
        self.clean += tr.clean_s
        self.checkpoints += tr.checkpoints_in_training
        self.intervals += tr.snapshot_intervals
        self.per_save += [c.block_end - c.block_start for c in ckpts]
        self.async_saves += sum(c.is_async for c in ckpts)
        hi = max(end, t_hi)
        self.segments += shutdown_segments(f.attempt, f.spans, t_hi, hi, failed)
        return hi


def _recovery_gap(attempt: int, start: float, end: float) -> Segment:
    """The time between an attempt's end and the next one's allocation: failure, charged to the
    scheduler."""
    return Segment(
        attempt,
        start,
        end,
        Category.FAILURE,
        SegmentKind.RECOVERY_GAP,
        (sc.ComponentValues.SCHEDULER.value,),
    )


def _attempt_summary(f: AttemptFacts, failed: bool, critical: int | None) -> AttemptSummary:
    return AttemptSummary(  # its instants, then how it ended, then its ranks
        attempt=f.attempt,
        alloc=f.alloc,
        first_batch=f.first,
        progress=f.progress,
        end=f.end,
        failed=failed,
        end_reason=f.end_reason,
        failure_cause=failure_cause(f) if failed else None,
        critical_rank=critical,
        ranks=f.ranks,
    )


def _causes(summaries: Sequence[AttemptSummary]) -> dict[str, int]:
    """How many failed attempts each failure cause ended, in the order first seen."""
    causes: dict[str, int] = {}
    for a in summaries:
        if a.failure_cause is not None:
            causes[a.failure_cause] = causes.get(a.failure_cause, 0) + 1
    return causes


def _first_str(spans: Sequence[SpanRecord], key: str) -> str | None:
    for s in spans:
        v = s.attr(key)
        if isinstance(v, str) and v:
            return v
    return None


def _compose(spans: Sequence[SpanRecord], walk: _Walk) -> JobSummary:
    """Put the figures of :func:`summarize` together: ``wall = end − alloc`` of the whole job,
    each category's seconds and share of it, and the checkpoint figures over its attempts."""
    facts, segments = walk.facts, walk.segments
    alloc = facts[0].alloc
    wall = walk.cursor - alloc
    productive = category_seconds(segments, Category.PRODUCTIVE)
    idle = category_seconds(segments, Category.IDLE)
    failure = category_seconds(segments, Category.FAILURE)
    n_failed = sum(walk.failed)
    blocking = kind_component_seconds(segments, SegmentKind.CUTOUT, sc.ComponentValues.CHECKPOINT)
    advice = checkpoint_advice(blocking, walk.checkpoints, walk.clean, n_failed, walk.intervals)
    expected = n_failed * advice.interval_s / 2.0 if advice.interval_s is not None else None
    return JobSummary(
        job_id=spans[0].job_id,
        state=walk.state,
        model=_first_str(spans, sc.MODEL),
        team=_first_str(spans, sc.TEAM),
        alloc=alloc,
        end=walk.cursor,
        wall_s=wall,
        productive_s=productive,
        ett_pct=pct(productive, wall),
        idle_s=idle,
        idle_pct=pct(idle, wall),
        failure_s=failure,
        failure_pct=pct(failure, wall),
        tts_s=tts(facts),
        ttr_s=tuple(ttr(facts, walk.failed)),
        failures=n_failed,
        failure_causes=_causes(walk.summaries),
        unsaved_s=sum(s.duration for s in segments if s.kind == SegmentKind.UNSAVED),
        expected_unsaved_s=expected,
        at_risk_s=walk.at_risk,
        checkpoint_blocking_s=blocking,
        lost_by_component=lost_by_component(segments),
        checkpoint_advice=advice,
        attempts=tuple(walk.summaries),
        segments=tuple(segments),
        span_count=sum(s.count for s in spans),
        last_span_end=max(s.end for s in spans),
        checkpoint_restore_s=checkpoint_restore(segments),
        checkpoint_blocking_stats=blocking_stats(walk.per_save, walk.async_saves),
        blocking_events=blocking_events(spans),
        startup_compile_cache=startup_compile_cache(spans),
        telemetry_lost_spans=telemetry_lost_spans(spans),
        clock_skew_s=barrier_skew_s(spans),
    )
