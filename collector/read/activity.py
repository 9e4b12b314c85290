"""What a job's ranks did, read from its raw spans: the detail behind a job's figures.

The figures (ETT-SPEC section 3) say how much time went where; the activity says which rank did
what and when, so a timeline can show the critical rank, the stragglers, each checkpoint's blocking
and persist parts, and each compile with its cache outcome. Pure: spans in, JSON-ready dicts out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ett import semconv as sc

from ..domain import SpanRecord, checkpoints_of


def _phase(span: SpanRecord) -> str | None:
    if span.name.startswith(sc.SPAN_STARTUP_PREFIX):
        return span.name[len(sc.SPAN_STARTUP_PREFIX) :]
    return None


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _commits(spans: Sequence[SpanRecord]) -> dict[tuple[int, int], float | None]:
    """``(attempt, step) -> committed_at`` by the figures' own rule (``checkpoints_of``: once
    every rank that saved the step has persisted it), so the timeline marks a checkpoint
    committed exactly when the figures count it."""
    by_attempt: dict[int, list[SpanRecord]] = {}
    for s in spans:
        by_attempt.setdefault(s.attempt, []).append(s)
    return {
        (attempt, c.step): c.committed_at
        for attempt, group in by_attempt.items()
        for c in checkpoints_of(group)
        if c.step is not None
    }


def activity(spans: Iterable[SpanRecord]) -> dict[str, list[dict[str, Any]]]:
    """The job's start-up phases per rank, first batches, checkpoint saves (blocking, persist,
    committed), restores, compiles (cache hit or miss) and failures, each in time order.

    A checkpoint row merges every rank's spans of one ``(attempt, step)``: blocking is
    ``[earliest save start, latest save end]``; committed is when the figures count it committed
    (:func:`_commits`: the latest persist end once every rank that saved has persisted; the
    save's end for a sync save), as ETT-SPEC section 3 defines them.
    """
    startup: list[dict[str, Any]] = []
    first: list[dict[str, Any]] = []
    saves: dict[tuple[int, int], dict[str, Any]] = {}
    restores: list[dict[str, Any]] = []
    compiles: list[dict[str, Any]] = []
    failures: list[dict[str, Any]] = []
    first_at: dict[tuple[int, int], float] = {}
    all_spans = sorted(spans, key=lambda s: (s.start, s.attempt, s.rank, s.name))
    for s in all_spans:
        if s.name == sc.SPAN_FIRST_BATCH:
            first_at[(s.attempt, s.rank)] = max(first_at.get((s.attempt, s.rank), s.end), s.end)
    for s in all_spans:
        phase = _phase(s)
        if phase is not None:
            component = s.attr(sc.COMPONENT) or sc.default_component(phase)
            startup.append(
                {
                    "attempt": s.attempt,
                    "rank": s.rank,
                    "phase": phase,
                    "component": component,
                    "start": s.start,
                    "end": s.end,
                }
            )
            if phase == sc.StartupPhaseValues.CHECKPOINT_LOAD.value:
                restores.append(
                    {
                        "attempt": s.attempt,
                        "rank": s.rank,
                        "step": _int(s.attr(sc.CHECKPOINT_STEP)),
                        "start": s.start,
                        "end": s.end,
                    }
                )
        elif s.name == sc.SPAN_FIRST_BATCH:
            first.append(
                {"attempt": s.attempt, "rank": s.rank, "at": s.end, "step": _int(s.attr(sc.STEP))}
            )
        elif s.name in (sc.SPAN_CHECKPOINT_SAVE, sc.SPAN_CHECKPOINT_PERSIST):
            step = _int(s.attr(sc.CHECKPOINT_STEP))
            if step is None:
                continue
            row = saves.setdefault(
                (s.attempt, step),
                {
                    "attempt": s.attempt,
                    "step": step,
                    "mode": None,
                    "bytes": None,
                    "save_start": None,
                    "save_end": None,
                    "persist_end": None,
                },
            )
            if s.name == sc.SPAN_CHECKPOINT_SAVE:
                row["save_start"] = min(row["save_start"] or s.start, s.start)
                row["save_end"] = max(row["save_end"] or s.end, s.end)
                row["mode"] = s.attr(sc.CHECKPOINT_MODE) or row["mode"]
                size = _int(s.attr(sc.CHECKPOINT_BYTES))
                if size is not None:
                    row["bytes"] = (row["bytes"] or 0) + size
            else:
                row["persist_end"] = max(row["persist_end"] or s.end, s.end)
        elif s.name == sc.SPAN_COMPILE:
            trained = first_at.get((s.attempt, s.rank))
            compiles.append(
                {
                    "attempt": s.attempt,
                    "rank": s.rank,
                    "start": s.start,
                    "end": s.end,
                    "duration_s": s.end - s.start,
                    "cache": s.attr(sc.COMPILE_CACHE),
                    "frames": _int(s.attr(sc.COMPILE_FRAMES)),
                    "in_startup": trained is None or s.start < trained,
                }
            )
        elif s.name == sc.SPAN_FAILURE:
            failures.append(
                {
                    "attempt": s.attempt,
                    "rank": s.rank,
                    "at": s.start,
                    "cause": s.attr(sc.FAILURE_CAUSE),
                    "step": _int(s.attr(sc.STEP)),
                    "error_type": s.attr(sc.ERROR_TYPE),
                }
            )
    checkpoints = []
    committed_at = _commits(all_spans)
    for row in sorted(saves.values(), key=lambda r: (r["attempt"], r["step"])):
        if row["save_start"] is None:
            continue  # a persist whose save span never arrived: nothing to anchor it
        blocking = row["save_end"] - row["save_start"]
        committed = committed_at.get((row["attempt"], row["step"]))
        checkpoints.append(
            {
                **row,
                "blocking_s": blocking,
                "persist_s": None
                if row["persist_end"] is None
                else row["persist_end"] - row["save_end"],
                "committed_at": committed,
            }
        )
    return {
        "startup": startup,
        "first_batches": first,
        "checkpoints": checkpoints,
        "restores": restores,
        "compiles": compiles,
        "failures": failures,
    }
