"""Checkpoints of an attempt (docs/metrics.md): blocking, snapshot and commit instants, the
step the next attempt restored, where unsaved time starts, and per-save blocking statistics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ett import semconv as sc

from .model import BlockingStats, SpanRecord


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One checkpoint of an attempt: blocking interval over ranks, snapshot and commit instants."""

    step: int | None
    block_start: float
    block_end: float
    committed_at: float | None
    is_async: bool = False
    """Whether a save of it says ``ett.checkpoint.mode = async``."""

    @property
    def snapshot(self) -> float:
        """The snapshot instant: the start of its (earliest) ``ett.checkpoint.save``."""
        return self.block_start


def checkpoints_of(spans: Sequence[SpanRecord]) -> list[Checkpoint]:
    """The attempt's checkpoints, grouped by ``ett.checkpoint.step`` over ranks.

    Blocking is ``[earliest start, latest end]`` of the step's saves. A checkpoint is committed at
    the latest end of its ``ett.checkpoint.persist`` spans once every rank that saved it has
    persisted it; a sync save (or one whose mode is unknown) with no persist span is committed at
    the latest end of its saves; an async save is not committed until its persists arrive.

    A rank that saves one step more than once (a step counter that did not move between saves,
    saves keyed by epoch) made more than one checkpoint: its ``k``-th save of the step joins the
    other ranks' ``k``-th, and so do the persists (docs/spec-notes.md). Grouped by the step
    alone, two saves 100 s apart read as one save blocking all 100 s of training between them.
    """
    saves = _by_step_and_turn(spans, sc.SPAN_CHECKPOINT_SAVE)
    persists = _by_step_and_turn(spans, sc.SPAN_CHECKPOINT_PERSIST)
    out: list[Checkpoint] = []
    for key, group in saves.items():
        step = key[0] if isinstance(key[0], int) else None
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
                is_async=is_async,
            )
        )
    out.sort(key=lambda c: c.block_start)
    return out


def _by_step_and_turn(
    spans: Sequence[SpanRecord], name: str
) -> dict[tuple[object, int], list[SpanRecord]]:
    """The spans called ``name`` grouped by ``(step, turn)``: a rank's ``turn``-th span of the
    step, in start order (0 for the first). A span without a step is a group of its own."""
    by_rank: dict[tuple[object, int], list[SpanRecord]] = {}
    for s in spans:
        if s.name == name:
            step = s.attr(sc.CHECKPOINT_STEP, ("span", s.span_id))
            by_rank.setdefault((step, s.rank), []).append(s)
    groups: dict[tuple[object, int], list[SpanRecord]] = {}
    for (step, _rank), own in by_rank.items():
        if len(own) > 1:
            own.sort(key=lambda s: (s.start, s.end, s.span_id))
        for turn, s in enumerate(own):
            groups.setdefault((step, turn), []).append(s)
    return groups


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


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0 < q <= 1) by the nearest-rank rule: the smallest value such that at
    least ``q`` of the values are at most it, i.e. ``sorted(values)[ceil(q·n) − 1]``."""
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def blocking_stats(per_save: Sequence[float], async_count: int = 0) -> BlockingStats:
    """Count, min, mean, max and p95 (nearest rank) of the blocking seconds of each save, and
    how many of the saves were async; the figures are None when there was no save."""
    if not per_save:
        return BlockingStats(0, None, None, None, None)
    return BlockingStats(
        async_count=async_count,
        count=len(per_save),
        min_s=min(per_save),
        mean_s=sum(per_save) / len(per_save),
        max_s=max(per_save),
        p95_s=nearest_rank(per_save, 0.95),
    )
