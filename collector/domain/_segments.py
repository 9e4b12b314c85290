"""The segments of one attempt (start-up, training, shutdown): docs/metrics.md, "Segments, in
order"."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ett import semconv as sc

from ._charges import cutout_component, phase_component, settle, shutdown_component
from ._checkpoints import Checkpoint
from ._critical import critical_path
from ._sweep import Piece, split_at, sweep
from .model import Category, Segment, SegmentKind, SpanRecord

_OTHER = sc.ComponentValues.OTHER.value
_FAILURE = sc.ComponentValues.FAILURE.value
_CHECKPOINT = sc.ComponentValues.CHECKPOINT.value


@dataclass(frozen=True, slots=True)
class TrainingResult:
    """The segments of a training interval and the quantities read off its pieces."""

    segments: list[Segment]
    at_risk_s: float
    clean_s: float
    checkpoints_in_training: int
    snapshot_intervals: list[float]


def _phases(spans: Sequence[SpanRecord], rank: int) -> list[tuple[float, float, str]]:
    """``rank``'s start-up phases as ``(start, end, component)``."""
    phases: list[tuple[float, float, str]] = []
    for s in spans:
        if s.rank != rank:
            continue
        comp = phase_component(s)
        if comp is not None:
            phases.append((s.start, s.end, comp))
    return phases


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

    def follow(a: float, b: float, along: int) -> list[Segment]:
        """``[a, b]`` attributed along rank ``along``'s phases, split evenly where they
        overlap; instants in no phase go to ``other``."""
        return [
            Segment(attempt, x, y, category, SegmentKind.STARTUP, labels or (_OTHER,))
            for x, y, labels in sweep(a, b, _phases(spans, along))
        ]

    if not through_barriers:
        return follow(lo, hi, rank)
    out: list[Segment] = []
    for piece in critical_path(spans, lo, hi, rank):
        if piece.rank is not None:
            out += follow(piece.start, piece.end, piece.rank)
        else:
            comp = piece.component or _OTHER
            out.append(
                Segment(attempt, piece.start, piece.end, category, SegmentKind.STARTUP, (comp,))
            )
    return out


def _cutouts(
    spans: Sequence[SpanRecord], checkpoints: Sequence[Checkpoint]
) -> list[tuple[float, float, str]]:
    """Intervals cut out of training as idle, over all ranks, with their components: each
    checkpoint's blocking, then every span :func:`cutout_component` names."""
    out = [(c.block_start, c.block_end, _CHECKPOINT) for c in checkpoints]
    for s in spans:
        comp = cutout_component(s)
        if comp is not None:
            out.append((s.start, s.end, comp))
    return out


def _settled(pieces: Sequence[Piece]) -> list[Piece]:
    """The pieces with their labels :func:`settle`-d (a data stall yields to other cut-outs),
    neighbours with the same labels merged."""
    out: list[Piece] = []
    for a, b, labels in pieces:
        settled = settle(labels)
        if out and out[-1][2] == settled and out[-1][1] == a:
            out[-1] = (out[-1][0], b, settled)
        else:
            out.append((a, b, settled))
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
    pieces = _settled(sweep(lo, hi, _cutouts(spans, checkpoints)))
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
    to the spans in it (:func:`shutdown_component`: its ``ett.shutdown.<step>`` spans, a final
    checkpoint save or persist, the training cut-outs), the rest ``other``."""
    if hi <= lo:
        return []
    if failed:
        return [Segment(attempt, lo, hi, Category.FAILURE, SegmentKind.SHUTDOWN, (_FAILURE,))]
    intervals = [
        (s.start, s.end, comp) for s in spans if (comp := shutdown_component(s)) is not None
    ]
    return [
        Segment(attempt, a, b, Category.IDLE, SegmentKind.SHUTDOWN, labels or (_OTHER,))
        for a, b, labels in _settled(sweep(lo, hi, intervals))
    ]
