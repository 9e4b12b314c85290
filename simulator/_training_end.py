"""How one attempt's training ends: it completes (a final save, the exit), or a failure strikes
(a silent kill, a hang until a timeout, a preemption, or one rank raising), and which checkpoint
the next attempt restores."""

from __future__ import annotations

from typing import NamedTuple

from ett import semconv as sc

from ._loop_spans import CKPT, Loop, LoopRun, emit_training
from ._plan import AttemptPlan, Checkpoint, Draw
from ._startup import error_type
from .wire import RankSpans

_OTHER = sc.ComponentValues.OTHER.value
_SILENT = "killed"
_HANGS = {"nccl_timeout": "nccl_timeout_s", "hang": "watchdog_s"}
_FAILED = sc.EndReasonValues.FAILED.value
_PREEMPTED = sc.EndReasonValues.PREEMPTED.value


class Training(NamedTuple):
    """One attempt's training as its loop left it: the draws, the ranks, the plan, the loop's
    parameters and what it planted."""

    draw: Draw
    ranks: list[RankSpans]
    plan: AttemptPlan
    loop: Loop
    run: LoopRun


_Ending = tuple[int, str, list[str], list[int]]
"""How the ranks of a failed attempt end: when progress died, the cause, each rank's end reason
and each rank's exit instant."""


def newest_committed(run: LoopRun, attempt: int, by: int) -> Checkpoint | None:
    """The save with the latest snapshot that every rank committed (persisted, or for a sync
    save blocked through) by ``by``; None when there is none."""
    best: Checkpoint | None = None
    for step, s, blocks, persists in run.saves:
        committed = max(persists) if persists else max(blocks)
        if committed <= by and (best is None or s > best.snapshot):
            best = Checkpoint(step, s, max(blocks), committed, attempt)
    return best


def complete(tr: Training, t: int, step: int) -> Checkpoint | None:
    """The attempt's steps are done at ``t``: a final sync save (unless ``step`` is saved), the
    persists, then every rank exits; ``plan`` ends completed. The shutdown is checkpoint until
    the last persist ends (an ``ett.checkpoint.persist`` in it is checkpoint, docs/metrics.md),
    then other."""
    draw, ranks, plan, loop, run = tr
    prof = draw.profile
    emit_training(draw, ranks, loop, run, plan, t, True, None)
    final_end = t
    last_saved = run.saves[-1][0] if run.saves else None
    if prof["checkpoint.final_save"] and step != last_saved:
        dist = prof["checkpoint.sync_blocking"]
        blocks = [
            t + max(1, round(draw.seconds(dist, CKPT, t) * draw.jitter() * 1000)) for _ in ranks
        ]
        for r, rank in enumerate(ranks):
            attrs = (
                (sc.CHECKPOINT_STEP, step),
                (sc.CHECKPOINT_MODE, "sync"),
                (sc.CHECKPOINT_BYTES, prof["checkpoint.bytes"] // len(ranks)),
            )
            rank.add(sc.SPAN_CHECKPOINT_SAVE, t, blocks[r], attrs)
        final_end = max(blocks)
        plan.shutdown.append((t, final_end, CKPT))
        run.saves.append((step, t, blocks, []))
    ready = max([final_end, *(p for *_, ps in run.saves for p in ps)])
    if ready > final_end:  # the exit waits for the persists: checkpoint, as a persist in it is
        plan.shutdown.append((final_end, ready, CKPT))
    ends = [ready + draw.ms(prof["failures.exit"], _OTHER, ready) for _ in ranks]
    for r, rank in enumerate(ranks):
        rank.add(
            sc.SPAN_ATTEMPT,
            plan.alloc,
            ends[r],
            ((sc.ATTEMPT_END_REASON, sc.EndReasonValues.COMPLETED.value),),
        )
    plan.end = max(ends)
    if plan.end > ready:
        plan.shutdown.append((ready, plan.end, _OTHER))
    plan.end_reason = sc.EndReasonValues.COMPLETED.value
    return newest_committed(run, plan.number, plan.end)


def fail(tr: Training, t: int, step: int) -> Checkpoint | None:
    """A failure strikes at ``t`` (at step ``step``), its kind drawn from ``failures.causes``
    (no silent kill on the last attempt a job may have); ``plan`` ends failed."""
    draw, ranks, plan, loop, run = tr
    causes = dict(draw.profile["failures.causes"])
    if not loop.may_die_silently:
        causes.pop(_SILENT, None)
        if sum(causes.values()) <= 0:
            causes = {"exception": 1.0}
    kind = draw.weighted(causes)
    plan.failed = True
    if kind == _SILENT:  # SIGKILL of every rank: nothing more is sent
        emit_training(draw, ranks, loop, run, plan, t, False, t)
        plan.end = max(s[2] for rank in ranks for s in rank.spans)
        plan.cause = "killed"
        return newest_committed(run, plan.number, t)
    emit_training(draw, ranks, loop, run, plan, t, True, None)
    if kind in _HANGS:
        dead, cause, reasons, ends = _hang(draw, ranks, kind, t, step)
    elif kind == "preemption":
        dead, cause, reasons, ends = _preempted(draw, ranks, t, step)
    else:
        dead, cause, reasons, ends = _raised(draw, ranks, kind, t, step)
    _drop_late_persists(ranks, dead)
    for r, rank in enumerate(ranks):
        said = cause if reasons[r] == _FAILED else "preemption"
        rank.add(
            sc.SPAN_ATTEMPT,
            plan.alloc,
            ends[r],
            ((sc.ATTEMPT_END_REASON, reasons[r]), (sc.FAILURE_CAUSE, said)),
        )
    plan.end = max(ends)
    plan.end_reason = _FAILED if _FAILED in reasons else reasons[0]
    plan.cause = cause
    return newest_committed(run, plan.number, dead)


def _hang(draw: Draw, ranks: list[RankSpans], kind: str, t: int, step: int) -> _Ending:
    """Progress stops at ``t``; every rank fails when the timeout (``failures.<kind>_s``) fires."""
    prof = draw.profile
    dead = t + round(prof[f"failures.{_HANGS[kind]}"] * 1000)
    cause = "unknown" if kind == "hang" else kind
    err = "WatchdogTimeout" if kind == "hang" else "torch.distributed.DistBackendError"
    for rank in ranks:
        rank.add(
            sc.SPAN_FAILURE,
            dead,
            dead,
            ((sc.FAILURE_CAUSE, cause), (sc.STEP, step), (sc.ERROR_TYPE, err)),
        )
    ends = [dead + draw.ms(prof["failures.exit"], _OTHER, dead) for _ in ranks]
    return dead, cause, [_FAILED] * len(ranks), ends


def _preempted(draw: Draw, ranks: list[RankSpans], t: int, step: int) -> _Ending:
    """The scheduler preempts every rank at ``t``."""
    cause = "preemption"
    for rank in ranks:
        rank.add(sc.SPAN_FAILURE, t, t, ((sc.FAILURE_CAUSE, cause), (sc.STEP, step)))
    ends = [t + draw.ms(draw.profile["failures.exit"], _OTHER, t) for _ in ranks]
    return t, cause, [_PREEMPTED] * len(ranks), ends


def _raised(draw: Draw, ranks: list[RankSpans], kind: str, t: int, step: int) -> _Ending:
    """One rank raises at ``t``; torchrun stops the others with SIGTERM once it has exited."""
    world = len(ranks)
    exit_dist = draw.profile["failures.exit"]
    failing = draw.rng.randrange(world)
    reasons = [_PREEMPTED] * world
    reasons[failing] = _FAILED
    ranks[failing].add(
        sc.SPAN_FAILURE,
        t,
        t,
        ((sc.FAILURE_CAUSE, kind), (sc.STEP, step), (sc.ERROR_TYPE, error_type(kind))),
    )
    term = t + draw.ms(exit_dist, _OTHER, t)
    ends = [term + (0 if r == failing else draw.ms(exit_dist, _OTHER, term)) for r in range(world)]
    return t, kind, reasons, ends


def _drop_late_persists(ranks: list[RankSpans], dead: int) -> None:
    """Persists still running when the process died never end: their spans are not sent."""
    for rank in ranks:
        rank.spans = [s for s in rank.spans if s[0] != sc.SPAN_CHECKPOINT_PERSIST or s[2] <= dead]
