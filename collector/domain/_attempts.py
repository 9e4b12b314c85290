"""Per-attempt facts from spans: alloc(a), first(a), end(a), progress(a), end reason, cause."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ett import semconv as sc

from .model import SpanRecord

_COMPLETED = sc.EndReasonValues.COMPLETED.value
_PREEMPTED = sc.EndReasonValues.PREEMPTED.value
_PREEMPTION = sc.FailureCauseValues.PREEMPTION.value
_UNKNOWN = sc.FailureCauseValues.UNKNOWN.value
_VAGUE = frozenset(
    {_PREEMPTION, sc.FailureCauseValues.UNKNOWN.value, sc.FailureCauseValues.KILLED.value}
)

_REASON_RANK = {
    sc.EndReasonValues.FAILED.value: 3,
    sc.EndReasonValues.PREEMPTED.value: 2,
    sc.EndReasonValues.COMPLETED.value: 1,
}


@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """The instants docs/metrics.md defines for one attempt, before live-ness is applied."""

    attempt: int
    spans: tuple[SpanRecord, ...]
    alloc: float
    first: float | None
    end: float
    progress: float | None
    end_reason: str | None
    reported_cause: str | None
    critical_rank: int | None
    ranks: tuple[int, ...]


def alloc_of(spans: Sequence[SpanRecord]) -> float:
    """``alloc(a)``: the earliest start of any ``ett.attempt`` or ``ett.startup.*`` span.

    An attempt with neither (its start-up spans were lost) falls back to its earliest span start.
    """
    starts = [
        s.start for s in spans if s.name == sc.SPAN_ATTEMPT or sc.startup_phase(s.name) is not None
    ]
    return min(starts) if starts else min(s.start for s in spans)


def first_batch_of(spans: Sequence[SpanRecord]) -> tuple[float | None, int | None]:
    """``first(a)``: the latest end of ``ett.first_batch`` over ranks, and the critical rank.

    The critical rank is the rank whose first batch is latest; on a tie, the lowest rank.
    ``(None, None)`` when no rank trained.
    """
    per_rank: dict[int, float] = {}
    for s in spans:
        if s.name == sc.SPAN_FIRST_BATCH:
            per_rank[s.rank] = min(per_rank.get(s.rank, s.end), s.end)
    if not per_rank:
        return None, None
    latest = max(per_rank.values())
    return latest, min(r for r, t in per_rank.items() if t == latest)


def end_of(spans: Sequence[SpanRecord]) -> float:
    """``end(a)``: the latest end of any span of the attempt."""
    return max(s.end for s in spans)


def progress_of(spans: Sequence[SpanRecord], first: float | None) -> float | None:
    """``progress(a)``: the latest end of an ``ett.train.window`` (no window: ``first(a)``)."""
    ends = [s.end for s in spans if s.name == sc.SPAN_TRAIN_WINDOW]
    if not ends:
        return first
    latest = max(ends)
    return latest if first is None else max(latest, first)


def end_reason_of(spans: Sequence[SpanRecord]) -> tuple[str | None, str | None]:
    """The attempt's end reason over its ranks' ``ett.attempt`` spans, and its failure cause.

    Reason: a rank that failed outranks one that was preempted, which outranks one that completed
    (the synchronous job ended the worst way any of its ranks did); when some rank of the attempt
    never ended its attempt span (it died silently) and another did not complete, the attempt
    failed. Cause, for an attempt that did not complete:

    1. the earliest specific cause (``exception``, ``oom``, ``nccl_timeout``, ``hardware``, ...)
       that an ``ett.failure`` or a failed ``ett.attempt`` span reported;
    2. else, when a rank went silent, its own cause if it said one before dying (``preemption``),
       else ``killed``: the ranks that spoke only saw their peer vanish (torchrun stops them with
       SIGTERM, or their collective fails with a lost peer, which the library reports as
       ``unknown``), and a lost peer never names the cause;
    3. else ``preemption`` when a rank was preempted or said so;
    4. else ``unknown`` if any rank said so; None when nothing was said (the caller infers).
    """
    reason: str | None = None
    reported: set[int] = set()
    said: list[tuple[float, str, int]] = []
    for s in spans:
        if s.name == sc.SPAN_ATTEMPT:
            r = s.attr(sc.ATTEMPT_END_REASON)
            if isinstance(r, str) and r in _REASON_RANK:
                reported.add(s.rank)
                if reason is None or _REASON_RANK[r] > _REASON_RANK[reason]:
                    reason = r
                c = s.attr(sc.FAILURE_CAUSE)
                if isinstance(c, str) and r != _COMPLETED:
                    said.append((s.end, c, s.rank))
                elif r == _PREEMPTED:
                    said.append((s.end, _PREEMPTION, s.rank))
        elif s.name == sc.SPAN_FAILURE:
            c = s.attr(sc.FAILURE_CAUSE)
            if isinstance(c, str):
                said.append((s.end, c, s.rank))
    expected = {s.rank for s in spans}
    sizes = [s.attr(sc.WORLD_SIZE) for s in spans]
    world = max((w for w in sizes if isinstance(w, int) and not isinstance(w, bool)), default=0)
    silent = bool(expected - reported) or len(reported) < world
    if reason is not None and reason != _COMPLETED and silent:
        reason = sc.EndReasonValues.FAILED.value
    said.sort()
    specific = [c for _, c, _ in said if c not in _VAGUE]
    if specific:
        return reason, specific[0]
    if silent and (reason is not None or said):
        own = [c for _, c, r in said if r not in reported and c != _UNKNOWN]
        return reason, own[0] if own else sc.FailureCauseValues.KILLED.value
    causes = {c for _, c, _ in said}
    if _PREEMPTION in causes:
        return reason, _PREEMPTION
    if causes:
        return reason, sc.FailureCauseValues.UNKNOWN.value
    return reason, None


def latest_rank(spans: Sequence[SpanRecord]) -> int:
    """The rank with the latest span end (on a tie, the lowest): the critical rank of an attempt
    that never trained."""
    per_rank: dict[int, float] = {}
    for s in spans:
        per_rank[s.rank] = max(per_rank.get(s.rank, s.end), s.end)
    latest = max(per_rank.values())
    return min(r for r, t in per_rank.items() if t == latest)


def attempt_facts(spans: Sequence[SpanRecord]) -> list[AttemptFacts]:
    """Group a job's spans by attempt, in attempt order, with the facts of each."""
    by_attempt: dict[int, list[SpanRecord]] = {}
    for s in spans:
        by_attempt.setdefault(s.attempt, []).append(s)
    out: list[AttemptFacts] = []
    for number in sorted(by_attempt):
        group = by_attempt[number]
        first, critical = first_batch_of(group)
        reason, cause = end_reason_of(group)
        out.append(
            AttemptFacts(
                attempt=number,
                spans=tuple(group),
                alloc=alloc_of(group),
                first=first,
                end=end_of(group),
                progress=progress_of(group, first),
                end_reason=reason,
                reported_cause=cause,
                critical_rank=critical,
                ranks=tuple(sorted({s.rank for s in group})),
            )
        )
    return out
