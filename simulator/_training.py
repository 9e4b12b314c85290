"""The training loop of one attempt, job level then per rank: clean stretches of steps broken by
checkpoint saves, evals and recompiles, until the job's steps are done or a failure strikes.

Failures are a Poisson process over clean training time (its rate stretched by a ``failure``
regression from its instant on). Every interruption is synchronous (all ranks), so the planted
cut-outs never overlap. Windows tile ``[first, progress]`` as the library emits them: one per
window length, ending at the last progress instant, none while nothing moves.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

from ett import semconv as sc

from ._pace import Pace
from ._plan import AttemptPlan, Checkpoint, Draw, Interval
from ._startup import error_type
from .wire import Attrs, RankSpans, SimSpan

_CKPT = sc.ComponentValues.CHECKPOINT.value
_OTHER = sc.ComponentValues.OTHER.value
_SILENT = "killed"
_HANGS = {"nccl_timeout": "nccl_timeout_s", "hang": "watchdog_s"}


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
class _Run:
    stretches: list[tuple[int, int, float]] = field(default_factory=list)  # start, end, work before
    starts: list[int] = field(default_factory=list)
    saves: list[tuple[int, int, list[int], list[int]]] = field(default_factory=list)
    others: list[Interval] = field(default_factory=list)  # evals and recompiles


def _rate_breaks(draw: Draw) -> list[int]:
    return sorted({int(r.at * 1000) for r in draw.regressions if r.component == "failure"})


def _time_to_hazard(draw: Draw, t: int, budget: float, base: float, breaks: list[int]) -> float:
    """Clean ms from ``t`` until ``budget`` of hazard is used (rate per ms, piecewise)."""
    cursor, used = t, 0.0
    for bp in breaks:
        if bp <= cursor:
            continue
        rate = base * draw.k("failure", cursor)
        if rate > 0 and used + rate * (bp - cursor) >= budget:
            return cursor - t + (budget - used) / rate
        used += rate * (bp - cursor)
        cursor = bp
    rate = base * draw.k("failure", cursor)
    return math.inf if rate <= 0 else cursor - t + (budget - used) / rate


def _hazard(draw: Draw, a: int, b: int, base: float, breaks: list[int]) -> float:
    total, cursor = 0.0, a
    for bp in [*[x for x in breaks if a < x < b], b]:
        total += base * draw.k("failure", cursor) * (bp - cursor)
        cursor = bp
    return total


def run_training(
    draw: Draw, ranks: list[RankSpans], plan: AttemptPlan, loop: Loop
) -> Checkpoint | None:
    """Plant the training and the end of ``plan``; returns the newest checkpoint committed before
    the attempt died (None when it committed none). ``plan`` is complete afterwards."""
    prof = draw.profile
    rng = draw.rng
    assert plan.first is not None
    world = len(ranks)
    run = _Run()
    t, clean = plan.first, 0.0 if loop.pace is not None and loop.pace.at else 0
    target_clean = max(1, (loop.target_step - loop.start_step) * loop.step_ms)
    since_ckpt = since_eval = 0
    base_rate = prof["failures.rate_per_hour"] / 3_600_000.0
    breaks = _rate_breaks(draw)
    hazard = rng.expovariate(1.0)
    recompile_rate = prof["compile.recompile_per_hour"] / 3_600_000.0
    recompile_budget = rng.expovariate(1.0)
    last_step = -1
    outcome = "finish"
    while True:
        options = [
            (loop.span(t, target_clean - clean), 0, "finish"),
            (_time_to_hazard(draw, t, hazard, base_rate, breaks), 1, "failure"),
            (loop.ckpt_ms - since_ckpt, 2, "ckpt"),
        ]
        if loop.eval_ms > 0:
            options.append((loop.eval_ms - since_eval, 3, "eval"))
        if recompile_rate > 0:
            options.append((recompile_budget / recompile_rate, 4, "recompile"))
        gap, _, event = min(options)
        d = max(1, math.ceil(gap if gap < math.inf else loop.span(t, target_clean - clean)))
        run.stretches.append((t, t + d, clean))
        run.starts.append(t)
        hazard -= _hazard(draw, t, t + d, base_rate, breaks)
        recompile_budget -= recompile_rate * d
        clean += loop.work(t, t + d)
        t += d
        since_ckpt += d
        since_eval += d
        if event in ("finish", "failure"):
            outcome = event
            break
        if event == "ckpt":
            since_ckpt = 0
            step = loop.start_step + int(clean) // loop.step_ms
            if step == last_step:
                continue
            last_step = step
            dist = prof[
                "checkpoint.async_blocking" if loop.is_async else "checkpoint.sync_blocking"
            ]
            blocks = [
                t + max(1, round(draw.seconds(dist, _CKPT, t) * draw.jitter() * 1000))
                for _ in range(world)
            ]
            persists = (
                [b + draw.ms(prof["checkpoint.persist"], _CKPT, t, draw.jitter()) for b in blocks]
                if loop.is_async
                else []
            )
            run.saves.append((step, t, blocks, persists))
            t = max(blocks)
        elif event == "eval":
            since_eval = 0
            e = t + draw.ms(prof["eval.duration"], "eval", t)
            run.others.append((t, e, "eval"))
            t = e
        else:
            recompile_budget = rng.expovariate(1.0)
            e = t + draw.ms(prof["compile.recompile"], "compile", t)
            run.others.append((t, e, "compile"))
            t = e
    step_now = loop.start_step + int(clean) // loop.step_ms
    if outcome == "finish":
        return _complete(draw, ranks, plan, loop, run, t, step_now)
    return _fail(draw, ranks, plan, loop, run, t, step_now)


def _cutouts(run: _Run) -> list[Interval]:
    out = [(s, max(blocks), _CKPT) for _, s, blocks, _ in run.saves]
    return sorted(out + run.others)


def _last_progress(run: _Run, b: int) -> int:
    i = bisect.bisect_right(run.starts, b) - 1
    if i < 0:
        return run.starts[0] if run.starts else b
    e = run.stretches[i][1]
    return min(b, e)


def _step_at(run: _Run, loop: Loop, t: int) -> int:
    i = bisect.bisect_right(run.starts, t) - 1
    if i < 0:
        return loop.start_step
    s, e, before = run.stretches[i]
    return loop.start_step + int(before + loop.work(s, min(t, e))) // loop.step_ms


def _windows(run: _Run, loop: Loop, first: int, stop: int, flush: bool) -> list[tuple[int, int]]:
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


def _emit(
    draw: Draw,
    ranks: list[RankSpans],
    loop: Loop,
    run: _Run,
    plan: AttemptPlan,
    stop: int,
    flush: bool,
    dead_at: int | None,
) -> None:
    """Every rank's training spans; with ``dead_at``, only those that ended by then."""
    assert plan.first is not None
    windows = _windows(run, loop, plan.first, stop, flush)
    limit = dead_at if dead_at is not None else 1 << 62
    mode = (
        sc.CheckpointModeValues.ASYNC.value if loop.is_async else sc.CheckpointModeValues.SYNC.value
    )
    nbytes = draw.profile["checkpoint.bytes"]
    window_spans: list[SimSpan] = []
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
        window_spans.append((sc.SPAN_TRAIN_WINDOW, a, b, attrs))
        starts.append((a, last_step - first_step + 1))
    pace = loop.pace
    clean = _clean_ms(windows, _cutouts(run)) if pace is not None and pace.timed else []
    for r, rank in enumerate(ranks):
        if pace is None or not pace.timed:
            rank.spans += window_spans
        else:  # each rank's own wait (ett.window.wait_s)
            rank.spans += [
                (name, a, b, (*attrs, (sc.WINDOW_WAIT_S, pace.wait_s(r, t, n, c))))
                for (name, a, b, attrs), (t, n), c in zip(window_spans, starts, clean, strict=True)
            ]
        for step, s, blocks, persists in run.saves:
            if blocks[r] <= limit:
                attrs = (
                    (sc.CHECKPOINT_STEP, step),
                    (sc.CHECKPOINT_MODE, mode),
                    (sc.CHECKPOINT_BYTES, nbytes // len(ranks)),
                )
                rank.add(sc.SPAN_CHECKPOINT_SAVE, s, blocks[r], attrs)
            if persists and persists[r] <= limit:
                rank.add(
                    sc.SPAN_CHECKPOINT_PERSIST,
                    blocks[r],
                    persists[r],
                    ((sc.CHECKPOINT_STEP, step),),
                )
        for s, e, comp in run.others:
            if comp == "eval":
                rank.add(sc.SPAN_EVAL, s, e)
            else:
                rank.add(sc.SPAN_COMPILE, s, e, ((sc.COMPILE_CACHE, "miss"),))
    plan.progress = windows[-1][1] if windows else plan.first
    plan.cutouts = _cutouts(run)


def _clean_ms(windows: list[tuple[int, int]], cutouts: list[Interval]) -> list[int]:
    """Each window's milliseconds outside the cut-outs (both sorted, cut-outs disjoint)."""
    out, i = [], 0
    for a, b in windows:
        while i < len(cutouts) and cutouts[i][1] <= a:
            i += 1
        cut, j = 0, i
        while j < len(cutouts) and cutouts[j][0] < b:
            cut += max(0, min(b, cutouts[j][1]) - max(a, cutouts[j][0]))
            j += 1
        out.append(b - a - cut)
    return out


def _newest_committed(run: _Run, attempt: int, by: int) -> Checkpoint | None:
    best: Checkpoint | None = None
    for step, s, blocks, persists in run.saves:
        committed = max(persists) if persists else max(blocks)
        if committed <= by and (best is None or s > best.snapshot):
            best = Checkpoint(step, s, max(blocks), committed, attempt)
    return best


def _complete(
    draw: Draw, ranks: list[RankSpans], plan: AttemptPlan, loop: Loop, run: _Run, t: int, step: int
) -> Checkpoint | None:
    prof = draw.profile
    _emit(draw, ranks, loop, run, plan, t, True, None)
    final_end = t
    last_saved = run.saves[-1][0] if run.saves else None
    if prof["checkpoint.final_save"] and step != last_saved:
        dist = prof["checkpoint.sync_blocking"]
        blocks = [
            t + max(1, round(draw.seconds(dist, _CKPT, t) * draw.jitter() * 1000)) for _ in ranks
        ]
        for r, rank in enumerate(ranks):
            attrs = (
                (sc.CHECKPOINT_STEP, step),
                (sc.CHECKPOINT_MODE, "sync"),
                (sc.CHECKPOINT_BYTES, prof["checkpoint.bytes"] // len(ranks)),
            )
            rank.add(sc.SPAN_CHECKPOINT_SAVE, t, blocks[r], attrs)
        final_end = max(blocks)
        plan.shutdown.append((t, final_end, _CKPT))
        run.saves.append((step, t, blocks, []))
    ready = max([final_end, *(p for *_, ps in run.saves for p in ps)])
    ends = [ready + draw.ms(prof["failures.exit"], _OTHER, ready) for _ in ranks]
    for r, rank in enumerate(ranks):
        rank.add(
            sc.SPAN_ATTEMPT,
            plan.alloc,
            ends[r],
            ((sc.ATTEMPT_END_REASON, sc.EndReasonValues.COMPLETED.value),),
        )
    plan.end = max(ends)
    if plan.end > final_end:
        plan.shutdown.append((final_end, plan.end, _OTHER))
    plan.end_reason = sc.EndReasonValues.COMPLETED.value
    return _newest_committed(run, plan.number, plan.end)


def _fail(
    draw: Draw, ranks: list[RankSpans], plan: AttemptPlan, loop: Loop, run: _Run, t: int, step: int
) -> Checkpoint | None:
    prof = draw.profile
    causes = dict(prof["failures.causes"])
    if not loop.may_die_silently:
        causes.pop(_SILENT, None)
        if sum(causes.values()) <= 0:
            causes = {"exception": 1.0}
    kind = draw.weighted(causes)
    world = len(ranks)
    plan.failed = True
    if kind == _SILENT:  # SIGKILL of every rank: nothing more is sent
        _emit(draw, ranks, loop, run, plan, t, False, t)
        plan.end = max(s[2] for rank in ranks for s in rank.spans)
        plan.cause = "killed"
        return _newest_committed(run, plan.number, t)
    _emit(draw, ranks, loop, run, plan, t, True, None)
    exit_dist = prof["failures.exit"]
    failed = sc.EndReasonValues.FAILED.value
    if kind in _HANGS:  # progress stops at t; every rank fails when the timeout fires
        dead = t + round(prof[f"failures.{_HANGS[kind]}"] * 1000)
        cause = "unknown" if kind == "hang" else kind
        err = "WatchdogTimeout" if kind == "hang" else "torch.distributed.DistBackendError"
        reasons = [failed] * world
        for rank in ranks:
            rank.add(
                sc.SPAN_FAILURE,
                dead,
                dead,
                ((sc.FAILURE_CAUSE, cause), (sc.STEP, step), (sc.ERROR_TYPE, err)),
            )
        ends = [dead + draw.ms(exit_dist, _OTHER, dead) for _ in ranks]
    elif kind == "preemption":
        dead, cause = t, kind
        reasons = [sc.EndReasonValues.PREEMPTED.value] * world
        for rank in ranks:
            rank.add(sc.SPAN_FAILURE, t, t, ((sc.FAILURE_CAUSE, cause), (sc.STEP, step)))
        ends = [t + draw.ms(exit_dist, _OTHER, t) for _ in ranks]
    else:  # one rank raises; torchrun stops the others with SIGTERM
        dead, cause = t, kind
        failing = draw.rng.randrange(world)
        reasons = [sc.EndReasonValues.PREEMPTED.value] * world
        reasons[failing] = failed
        ranks[failing].add(
            sc.SPAN_FAILURE,
            t,
            t,
            ((sc.FAILURE_CAUSE, cause), (sc.STEP, step), (sc.ERROR_TYPE, error_type(kind))),
        )
        term = t + draw.ms(exit_dist, _OTHER, t)
        ends = [
            term + (0 if r == failing else draw.ms(exit_dist, _OTHER, term)) for r in range(world)
        ]
    _drop_late_persists(ranks, dead)
    for r, rank in enumerate(ranks):
        said = cause if reasons[r] == failed else "preemption"
        rank.add(
            sc.SPAN_ATTEMPT,
            plan.alloc,
            ends[r],
            ((sc.ATTEMPT_END_REASON, reasons[r]), (sc.FAILURE_CAUSE, said)),
        )
    plan.end = max(ends)
    plan.end_reason = failed if failed in reasons else reasons[0]
    plan.cause = cause
    return _newest_committed(run, plan.number, dead)


def _drop_late_persists(ranks: list[RankSpans], dead: int) -> None:
    """Persists still running when the process died never end: their spans are not sent."""
    for rank in ranks:
        rank.spans = [s for s in rank.spans if s[0] != sc.SPAN_CHECKPOINT_PERSIST or s[2] <= dead]
