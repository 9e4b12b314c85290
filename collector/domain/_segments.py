"""ETT-SPEC section 3: the segments of one attempt (start-up, training, shutdown)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from instrument import semconv as sc

from ._critical import critical_path
from ._sweep import Piece, split_at, sweep
from .model import Category, Segment, SegmentKind, SpanRecord

_OTHER = sc.ComponentValues.OTHER.value
_FAILURE = sc.ComponentValues.FAILURE.value
_CHECKPOINT = sc.ComponentValues.CHECKPOINT.value


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of an attempt: blocking interval over ranks, snapshot and commit instants."""

    step: int | None
    block_start: float
    block_end: float
    committed_at: float | None

    @property
    def snapshot(self) -> float:
        """The snapshot instant: the start of its (earliest) ``ett.checkpoint.save``."""
        return self.block_start


@dataclass(frozen=True, slots=True)
class TrainingResult:
    """The segments of a training interval and the quantities read off its pieces."""

    segments: list[Segment]
    at_risk_s: float
    clean_s: float
    checkpoints_in_training: int
    snapshot_intervals: list[float]


def _phase_component(span: SpanRecord) -> str | None:
    """The component a span charges during start-up, or None when it is no start-up phase."""
    phase = sc.startup_phase(span.name)
    if phase is not None:
        comp = span.attr(sc.COMPONENT)
        return comp if isinstance(comp, str) and comp else sc.default_component(phase)
    if span.name == sc.SPAN_COMPILE:
        return sc.ComponentValues.COMPILE.value
    if span.name == sc.SPAN_PUBLISH:  # a standalone publishing job never trains
        return sc.ComponentValues.PUBLISH.value
    return None


def _follow(
    attempt: int,
    spans: Sequence[SpanRecord],
    lo: float,
    hi: float,
    rank: int,
    category: Category,
) -> list[Segment]:
    """``[lo, hi]`` attributed along ``rank``'s phases, split evenly where they overlap;
    instants in no phase go to ``other``."""
    phases: list[tuple[float, float, str]] = []
    for s in spans:
        if s.rank != rank:
            continue
        comp = _phase_component(s)
        if comp is not None:
            phases.append((s.start, s.end, comp))
    return [
        Segment(attempt, a, b, category, SegmentKind.STARTUP, labels or (_OTHER,))
        for a, b, labels in sweep(lo, hi, phases)
    ]


def startup_segments(
    attempt: int,
    spans: Sequence[SpanRecord],
    lo: float,
    hi: float,
    rank: int,
    category: Category,
    through_barriers: bool = True,
) -> list[Segment]:
    """Start-up ``[lo, hi]`` along the critical path (:func:`critical_path`) with ``rank`` the
    critical rank; with ``through_barriers`` False, the whole of it along ``rank``."""
    if not through_barriers:
        return _follow(attempt, spans, lo, hi, rank, category)
    out: list[Segment] = []
    for piece in critical_path(spans, lo, hi, rank):
        if piece.rank is not None:
            out += _follow(attempt, spans, piece.start, piece.end, piece.rank, category)
        else:
            comp = piece.component or _OTHER
            out.append(
                Segment(attempt, piece.start, piece.end, category, SegmentKind.STARTUP, (comp,))
            )
    return out


def checkpoints_of(spans: Sequence[SpanRecord]) -> list[Checkpoint]:
    """The attempt's checkpoints, grouped by ``ett.checkpoint.step`` over ranks.

    Blocking is ``[earliest start, latest end]`` of the step's saves. A checkpoint is committed at
    the latest end of its ``ett.checkpoint.persist`` spans once every rank that saved it has
    persisted it; a sync save (or one whose mode is unknown) with no persist span is committed at
    the latest end of its saves; an async save is not committed until its persists arrive.
    """
    saves: dict[object, list[SpanRecord]] = {}
    persists: dict[object, list[SpanRecord]] = {}
    for s in spans:
        if s.name == sc.SPAN_CHECKPOINT_SAVE:
            saves.setdefault(s.attr(sc.CHECKPOINT_STEP, ("span", s.span_id)), []).append(s)
        elif s.name == sc.SPAN_CHECKPOINT_PERSIST:
            persists.setdefault(s.attr(sc.CHECKPOINT_STEP), []).append(s)
    out: list[Checkpoint] = []
    for key, group in saves.items():
        step = key if isinstance(key, int) else None
        done = persists.get(key, []) if step is not None else []
        is_async = any(
            s.attr(sc.CHECKPOINT_MODE) == sc.CheckpointModeValues.ASYNC.value for s in group
        )
        committed: float | None
        if done:
            saved_ranks = {s.rank for s in group}
            persisted_ranks = {s.rank for s in done}
            committed = max(s.end for s in done) if saved_ranks <= persisted_ranks else None
        elif not is_async:
            committed = max(s.end for s in group)
        else:
            committed = None
        out.append(
            Checkpoint(
                step=step,
                block_start=min(s.start for s in group),
                block_end=max(s.end for s in group),
                committed_at=committed,
            )
        )
    out.sort(key=lambda c: c.block_start)
    return out


def last_committed_snapshot(checkpoints: Iterable[Checkpoint], end: float) -> float | None:
    """Snapshot instant of the last checkpoint committed by ``end`` (None: no committed one)."""
    snaps = [
        c.snapshot for c in checkpoints if c.committed_at is not None and c.committed_at <= end
    ]
    return max(snaps) if snaps else None


def restored_step(next_spans: Sequence[SpanRecord]) -> int | None:
    """The step the next attempt restored: ``ett.checkpoint.step`` of its
    ``ett.startup.checkpoint_load`` spans (the lowest, should ranks disagree); None if none says."""
    steps = [
        v
        for s in next_spans
        if sc.startup_phase(s.name) == sc.StartupPhaseValues.CHECKPOINT_LOAD
        and isinstance(v := s.attr(sc.CHECKPOINT_STEP), int)
        and not isinstance(v, bool)
    ]
    return min(steps) if steps else None


def unsaved_since(
    checkpoints: Sequence[Checkpoint], end: float, restored: int | None
) -> float | None:
    """Where a failed attempt's unsaved time starts (None: from ``first(a)``).

    v1.2: the snapshot instant of the checkpoint the next attempt restored, when its save is
    known in this attempt (the restore is the ground truth, even when a persist span was lost);
    else the snapshot of the last checkpoint committed by ``end``.
    """
    if restored is not None:
        snaps = [c.snapshot for c in checkpoints if c.step == restored]
        if snaps:
            return min(snaps)
    return last_committed_snapshot(checkpoints, end)


def _cutouts(
    spans: Sequence[SpanRecord], checkpoints: Sequence[Checkpoint]
) -> list[tuple[float, float, str]]:
    """Intervals cut out of training as idle, over all ranks, with their components."""
    out = [(c.block_start, c.block_end, _CHECKPOINT) for c in checkpoints]
    for s in spans:
        if s.name == sc.SPAN_EVAL:
            out.append((s.start, s.end, sc.ComponentValues.EVAL.value))
        elif s.name == sc.SPAN_PUBLISH and s.attr(sc.PUBLISH_STANDALONE) is not True:
            out.append((s.start, s.end, sc.ComponentValues.PUBLISH.value))
        elif s.name == sc.SPAN_COMPILE:
            out.append((s.start, s.end, sc.ComponentValues.COMPILE.value))
    return out


def _clean_between(pieces: Sequence[Piece], a: float, b: float) -> float:
    """Seconds of pieces with no cut-out between instants ``a`` and ``b``."""
    total = 0.0
    for s, e, labels in pieces:
        if not labels:
            total += max(0.0, min(e, b) - max(s, a))
    return total


def training_segments(
    attempt: int,
    spans: Sequence[SpanRecord],
    checkpoints: Sequence[Checkpoint],
    lo: float,
    hi: float,
    snapshot: float | None,
    failed: bool,
) -> TrainingResult:
    """Training ``[lo, hi]``: cut-outs → idle; for a failed attempt, the clean time after the
    last committed snapshot (or all of it when there is none) → unsaved failure; rest productive.

    For an attempt that has not failed, that same time is returned as ``at_risk_s``.
    """
    pieces = sweep(lo, hi, _cutouts(spans, checkpoints))
    since = lo if snapshot is None else max(lo, snapshot)
    pieces = split_at(pieces, since)
    segments: list[Segment] = []
    at_risk = 0.0
    clean = 0.0
    for a, b, labels in pieces:
        if labels:
            segments.append(Segment(attempt, a, b, Category.IDLE, SegmentKind.CUTOUT, labels))
            continue
        clean += b - a
        if a >= since and failed:
            segments.append(
                Segment(attempt, a, b, Category.FAILURE, SegmentKind.UNSAVED, (_FAILURE,))
            )
            continue
        if a >= since:
            at_risk += b - a
        segments.append(Segment(attempt, a, b, Category.PRODUCTIVE, SegmentKind.TRAINING))
    snaps = sorted(c.snapshot for c in checkpoints if lo <= c.snapshot < hi)
    intervals = [_clean_between(pieces, x, y) for x, y in itertools.pairwise(snaps)]
    in_training = sum(1 for c in checkpoints if c.block_end > lo and c.block_start < hi)
    return TrainingResult(segments, at_risk, clean, in_training, intervals)


def shutdown_segments(
    attempt: int, spans: Sequence[SpanRecord], lo: float, hi: float, failed: bool
) -> list[Segment]:
    """Shutdown ``[lo, hi]``: failed → failure (component ``failure``); completed → idle charged
    to the spans in it (publish, a final checkpoint save, eval, compile), the rest ``other``."""
    if hi <= lo:
        return []
    if failed:
        return [Segment(attempt, lo, hi, Category.FAILURE, SegmentKind.SHUTDOWN, (_FAILURE,))]
    intervals = [(s.start, s.end, _CHECKPOINT) for s in spans if s.name == sc.SPAN_CHECKPOINT_SAVE]
    intervals += _cutouts(spans, [])
    return [
        Segment(attempt, a, b, Category.IDLE, SegmentKind.SHUTDOWN, labels or (_OTHER,))
        for a, b, labels in sweep(lo, hi, intervals)
    ]
