"""What one attempt's training loop planted (:class:`LoopRun`), and the spans every rank sends
for it: windows tiling ``[first, progress]`` as the library emits them (one per window length,
ending at the last progress instant, none while nothing moves), saves, persists, evals and
recompiles."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from ett import semconv as sc

from ._pace import Pace
from ._plan import AttemptPlan, Draw, Interval
from .wire import Attrs, RankSpans, SimSpan

CKPT = sc.ComponentValues.CHECKPOINT.value

Save = tuple[int, int, list[int], list[int]]
"""One checkpoint save: its step, its start, each rank's block end, each rank's persist end
(empty for a synchronous save)."""


@dataclass(slots=True)
class Loop:
    """Parameters of one attempt's loop (milliseconds)."""

    step_ms: int
    batch: int
    start_step: int
    target_step: int
    ckpt_ms: int
    eval_ms: int
    window_ms: int
    is_async: bool
    may_die_silently: bool
    pace: Pace | None = None
    """The step time and waits (None: ``step_ms`` throughout and no waits)."""

    def work(self, a: int, b: int) -> float:
        """Work (unstretched clean ms) over the clean interval ``[a, b]``."""
        return b - a if self.pace is None else self.pace.work(a, b)

    def span(self, a: int, work: float) -> float:
        """Clean ms from ``a`` until ``work`` is done."""
        return work if self.pace is None else self.pace.span(a, work)


@dataclass(slots=True)
class LoopRun:
    """What the loop planted at job level (unix ms): the clean stretches of steps (start, end,
    the work done before it), their starts, the saves, and the evals and recompiles."""

    stretches: list[tuple[int, int, float]] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    saves: list[Save] = field(default_factory=list)
    others: list[Interval] = field(default_factory=list)


def cutouts(run: LoopRun) -> list[Interval]:
    """The planted cut-outs, sorted: each save's blocking (to its slowest rank), evals and
    recompiles."""
    out = [(s, max(blocks), CKPT) for _, s, blocks, _ in run.saves]
    return sorted(out + run.others)


def _last_progress(run: LoopRun, b: int) -> int:
    i = bisect.bisect_right(run.starts, b) - 1
    if i < 0:
        return run.starts[0] if run.starts else b
    e = run.stretches[i][1]
    return min(b, e)


def _step_at(run: LoopRun, loop: Loop, t: int) -> int:
    i = bisect.bisect_right(run.starts, t) - 1
    if i < 0:
        return loop.start_step
    s, e, before = run.stretches[i]
    return loop.start_step + int(before + loop.work(s, min(t, e))) // loop.step_ms


def _windows(run: LoopRun, loop: Loop, first: int, stop: int, flush: bool) -> list[tuple[int, int]]:
    """Window intervals over ``[first, stop]`` (the last one only with ``flush``)."""
    out: list[tuple[int, int]] = []
    ws = first
    b = ws + loop.window_ms
    while b < stop:
        lp = _last_progress(run, b)
        if lp > ws:
            out.append((ws, lp))
            ws = lp
            b = ws + loop.window_ms
        else:  # nothing moved since ws: the next poll after steps resume emits
            i = bisect.bisect_right(run.starts, b)
            if i >= len(run.starts):
                break
            b = run.starts[i] + 1
    if flush and stop > ws:
        out.append((ws, stop))
    return out


def _window_spans(
    run: LoopRun, loop: Loop, windows: list[tuple[int, int]]
) -> tuple[list[SimSpan], list[tuple[int, int]]]:
    """The window spans (steps and samples, the same on every rank) and each window's
    ``(start, steps)``."""
    spans: list[SimSpan] = []
    starts: list[tuple[int, int]] = []
    for a, b in windows:
        first_step = _step_at(run, loop, a)
        last_step = max(first_step, _step_at(run, loop, b) - 1)
        samples = (last_step - first_step + 1) * loop.batch
        attrs: Attrs = (
            (sc.STEP_FIRST, first_step),
            (sc.STEP_LAST, last_step),
            (sc.SAMPLES, samples),
        )
        spans.append((sc.SPAN_TRAIN_WINDOW, a, b, attrs))
        starts.append((a, last_step - first_step + 1))
    return spans, starts


def emit_training(
    draw: Draw,
    ranks: list[RankSpans],
    loop: Loop,
    run: LoopRun,
    plan: AttemptPlan,
    stop: int,
    flush: bool,
    dead_at: int | None,
) -> None:
    """Every rank's training spans; with ``dead_at``, only those that ended by then. Sets
    ``plan.progress`` (the last window's end) and ``plan.cutouts``."""
    assert plan.first is not None
    windows = _windows(run, loop, plan.first, stop, flush)
    window_spans, starts = _window_spans(run, loop, windows)
    pace = loop.pace
    clean = _clean_ms(windows, cutouts(run)) if pace is not None and pace.timed else []
    for r, rank in enumerate(ranks):
        if pace is None or not pace.timed:
            rank.spans += window_spans
        else:  # each rank's own wait (ett.window.wait_s)
            rank.spans += [
                (name, a, b, (*attrs, (sc.WINDOW_WAIT_S, pace.wait_s(r, t, n, c))))
                for (name, a, b, attrs), (t, n), c in zip(window_spans, starts, clean, strict=True)
            ]
        _add_saves(draw, rank, r, len(ranks), loop, run, dead_at)
        for s, e, comp in run.others:
            if comp == "eval":
                rank.add(sc.SPAN_EVAL, s, e)
            else:
                rank.add(sc.SPAN_COMPILE, s, e, ((sc.COMPILE_CACHE, "miss"),))
    plan.progress = windows[-1][1] if windows else plan.first
    plan.cutouts = cutouts(run)


def _add_saves(
    draw: Draw, rank: RankSpans, r: int, world: int, loop: Loop, run: LoopRun, dead_at: int | None
) -> None:
    """Rank ``r``'s save and persist spans (with ``dead_at``, only those that ended by then);
    each save writes ``checkpoint.bytes / world`` bytes."""
    limit = dead_at if dead_at is not None else 1 << 62
    mode = (
        sc.CheckpointModeValues.ASYNC.value if loop.is_async else sc.CheckpointModeValues.SYNC.value
    )
    nbytes = draw.profile["checkpoint.bytes"]
    for step, s, blocks, persists in run.saves:
        if blocks[r] <= limit:
            attrs = (
                (sc.CHECKPOINT_STEP, step),
                (sc.CHECKPOINT_MODE, mode),
                (sc.CHECKPOINT_BYTES, nbytes // world),
            )
            rank.add(sc.SPAN_CHECKPOINT_SAVE, s, blocks[r], attrs)
        if persists and persists[r] <= limit:
            rank.add(
                sc.SPAN_CHECKPOINT_PERSIST,
                blocks[r],
                persists[r],
                ((sc.CHECKPOINT_STEP, step),),
            )


def _clean_ms(windows: list[tuple[int, int]], cuts: list[Interval]) -> list[int]:
    """Each window's milliseconds outside the cut-outs (both sorted, cut-outs disjoint)."""
    out, i = [], 0
    for a, b in windows:
        while i < len(cuts) and cuts[i][1] <= a:
            i += 1
        cut, j = 0, i
        while j < len(cuts) and cuts[j][0] < b:
            cut += max(0, min(b, cuts[j][1]) - max(a, cuts[j][0]))
            j += 1
        out.append(b - a - cut)
    return out
