"""The read vocabulary: the JSON shapes of a job, an attempt, a segment, a job row and a lost-time
row (docs/metrics.md, "What a user can ask"), and the functions that make them.

One module, so the HTTP API, the CLI, the stored summaries, the dashboard and Grafana read the same
names. Pure: it imports only the domain's model (no I/O, no SQL, no HTTP), so views may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import fields
from typing import Any, NotRequired, TypedDict, cast

from ett_collector.domain.model import (
    AttemptSummary,
    BlockingEvent,
    BlockingStats,
    CheckpointAdvice,
    GroupBy,
    JobState,
    JobSummary,
    Segment,
)

STATES: tuple[str, ...] = tuple(s.value for s in JobState)
"""Every job state, as the API spells it."""

MAX_LIST = 1_000_000
"""The largest ``limit`` of a list (jobs, alerts): a larger one overflowed SQL's integer (a 500)."""

LIVE_STATES: tuple[str, ...] = (JobState.RUNNING.value, JobState.PRESUMED_DEAD.value)
"""States of a job that is (or may be) still running: its figures move with the clock."""

GROUP_BYS: tuple[str, ...] = tuple(g.value for g in GroupBy)
"""What lost time can be grouped by."""


# kept alike: each TypedDict below spells its domain.model record's fields again (a type checker
# cannot derive a TypedDict from a dataclass); tests/unit/collector/test_schema_fields.py checks
# that both name the same fields in the same order.


class AttemptJSON(TypedDict):
    """One attempt of a job."""

    attempt: int
    alloc: float
    first_batch: float | None
    end: float
    progress: float | None
    end_reason: str | None
    failed: bool
    failure_cause: str | None
    critical_rank: int | None
    ranks: list[int]


NO_LABEL = "(none)"
"""How a job without a model or team is named wherever a name must stand: ``/metrics`` labels,
alerts, Grafana's variables and legends, the dashboard and the command tables (the read API
keeps ``null``). One word everywhere, so a model's figures agree between them (``/metrics``
said ``unknown`` and Grafana ``(none)``, and a model really named ``unknown`` was merged)."""

MIN_ADVICE_FAILURES = 3
"""Fewer failures than this give too rough a failure rate to state an optimal interval. The one
rule of every reader: ``ett report``, ``ett checkpoint-advice``, the API (``min_failures``,
``advice_ok``) and the dashboard withhold Young's optimum below it."""


def advice_ok(failures: int) -> bool:
    """Whether ``failures`` are enough evidence to state Young's optimum."""
    return failures >= MIN_ADVICE_FAILURES


CLOCK_SKEW_NOTE_S = 2.0
"""A job whose ranks' clocks put one barrier's end this many seconds apart or more
(``clock_skew_s``) is said to have disagreeing clocks, by every reader (``ett report``, the Job
page). Every rank leaves a barrier at one instant, so the spread is exit jitter (the reference
trainer's ``pg_init`` ends within milliseconds) plus clock skew; the spec's figures assume
clocks that agree, and skew moves time between start-up, training and checkpoint blocking."""


LOOP_COVERAGE_NOTE = 0.5
"""A job whose loop figures read windows over less than this share of its productive time
(``loop_s / productive_s``) is said to have partial loop figures, by every reader (``ett
report``, the Job page). The windows cover training and the saves inside it, so a whole job reads
1 or a little more; an upgrade probe's job whose windows were folded before migration 0008 (no
step series) read 0.016, with nothing said."""


def loop_coverage(loop_s: float | None, productive_s: float | None) -> float | None:
    """The share of a job's productive time its loop figures read windows over, when it is
    below :data:`LOOP_COVERAGE_NOTE` (None otherwise, or without the figures)."""
    if loop_s is None or not productive_s or productive_s <= 0:
        return None
    share = float(loop_s) / float(productive_s)
    return share if share < LOOP_COVERAGE_NOTE else None


def clock_skew_noted(skew_s: float | None) -> bool:
    """Whether a job's ``clock_skew_s`` is large enough to say."""
    return skew_s is not None and skew_s >= CLOCK_SKEW_NOTE_S


class CheckpointAdviceJSON(TypedDict):
    """Young's checkpoint interval advice (``min_failures``: the failures the optimum needs
    before it is shown; absent from summaries stored before it was added)."""

    interval_s: float | None
    optimal_interval_s: float | None
    saving_s: float | None
    mean_blocking_s: float | None
    checkpoints: int
    min_failures: NotRequired[int]


class BlockingStatsJSON(TypedDict):
    """Checkpoint blocking per save, over every save of the job, each from the earliest start
    to the latest end of its saves over ranks (None without a save)."""

    count: int
    min_s: float | None
    mean_s: float | None
    max_s: float | None
    p95_s: float | None
    async_count: int


class BlockingEventJSON(TypedDict):
    """User-named blocking events of one name and charged component."""

    name: str
    component: str
    count: int
    seconds: float


class SegmentJSON(TypedDict):
    """One segment of a job's wall time; its seconds are split evenly between ``components``."""

    attempt: int
    start: float
    end: float
    duration_s: float
    category: str
    kind: str
    components: list[str]


class _JobHeadJSON(TypedDict):
    """The fields that open both a job's figures and a job row: who the job is, and when."""

    job_id: str
    state: str
    model: str | None
    team: str | None
    alloc: float
    end: float


class TimeSplitJSON(TypedDict):
    """Where a job's wall time went: the wire shape of the domain's ``TimeSplit``."""

    wall_s: float
    productive_s: float
    idle_s: float
    failure_s: float
    ett_pct: float
    idle_pct: float
    failure_pct: float


class JobJSON(_JobHeadJSON, TimeSplitJSON):
    """One job's figures (``GET /api/v1/jobs/{id}``, ``ett report --json``): the head, the
    :class:`TimeSplitJSON` and the fields below, in this order.

    ``computed_at`` (unix seconds) is when the figures were derived; ``fresh`` is False when
    spans arrived since then that the figures do not include yet (both added on read).
    ``checkpoint_restore_s`` (start-up seconds charged to checkpoint: the restores),
    ``checkpoint_blocking_stats`` (per save), ``blocking_events`` (user-named, by name) and
    ``startup_compile_cache`` (the first attempt's start-up compiles: ``hit``, ``miss``,
    ``partial``, ``off``; None without one) are always written; figures stored before they
    existed lack them until ``ett recompute``.
    """

    tts_s: float | None
    ttr_s: list[float | None]
    failures: int
    failure_causes: dict[str, int]
    unsaved_s: float
    expected_unsaved_s: float | None
    at_risk_s: float
    checkpoint_blocking_s: float
    lost_by_component: dict[str, float]
    checkpoint_advice: CheckpointAdviceJSON
    attempts: list[AttemptJSON]
    span_count: int
    last_span_end: float
    checkpoint_restore_s: NotRequired[float]
    checkpoint_blocking_stats: NotRequired[BlockingStatsJSON]
    blocking_events: NotRequired[list[BlockingEventJSON]]
    startup_compile_cache: NotRequired[str | None]
    telemetry_lost_spans: NotRequired[int]
    """Spans the job's emitters said they lost: with any, its figures miss what those spans
    said, and are incomplete."""
    clock_skew_s: NotRequired[float | None]
    """How far apart the ranks' clocks put one barrier's end; see :func:`clock_skew_noted`."""
    segments: NotRequired[list[SegmentJSON]]
    computed_at: NotRequired[float]
    fresh: NotRequired[bool]
    error: NotRequired[str]
    """Present when the job's last recompute failed: why (the figures are older)."""
    performance: NotRequired[dict[str, Any]]
    """Inside the loop (issue 26): the job's ideal and slow step time, throughput and straggler,
    as of its last loop facts (``collector/write/_job_loop.py``); absent without training
    windows. The per-rank scores and the series: ``GET /api/v1/jobs/{id}/performance``."""


class JobRowJSON(_JobHeadJSON):
    """One job of a list (``GET /api/v1/jobs``, ``ett jobs --json``): the compact figures (the
    head's fields, then these)."""

    wall_s: float
    ett_pct: float
    idle_pct: float
    failure_pct: float
    failures: int
    computed_at: float


JOB_ROW_FIELDS: tuple[str, ...] = tuple(JobRowJSON.__annotations__)
"""The fields of :class:`JobRowJSON`, in order (the columns the store selects)."""


class LostTimeJSON(TypedDict):
    """Lost seconds of one key (``GET /api/v1/lost-time``, ``ett lost-time --json``).

    ``key`` is None for time without a component, or jobs without a model or team.
    """

    key: str | None
    idle_s: float
    failure_s: float
    lost_s: float


def _flat_json(record: Any) -> dict[str, Any]:
    """A flat record of the domain (a dataclass of plain values) as a JSON object: its fields
    in their declared order, tuples as lists. Its TypedDict names the same fields in the same
    order (checked by tests/unit/collector/test_schema_fields.py)."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


def attempt_json(a: AttemptSummary) -> AttemptJSON:
    """The JSON object of one attempt."""
    return cast(AttemptJSON, _flat_json(a))


def advice_json(adv: CheckpointAdvice) -> CheckpointAdviceJSON:
    """The JSON object of the checkpoint advice, with the failures the optimum needs."""
    return cast(CheckpointAdviceJSON, {**_flat_json(adv), "min_failures": MIN_ADVICE_FAILURES})


def blocking_stats_json(b: BlockingStats) -> BlockingStatsJSON:
    """The JSON object of the per-save checkpoint blocking statistics."""
    return cast(BlockingStatsJSON, _flat_json(b))


def blocking_event_json(e: BlockingEvent) -> BlockingEventJSON:
    """The JSON object of the user-named blocking events of one name and component."""
    return cast(BlockingEventJSON, _flat_json(e))


def segment_json_of(
    attempt: int, start: float, end: float, category: str, kind: str, components: Sequence[str]
) -> SegmentJSON:
    """The JSON object of a segment given by its parts (as stored in rows)."""
    return {
        "attempt": attempt,
        "start": start,
        "end": end,
        "duration_s": end - start,
        "category": str(category),
        "kind": str(kind),
        "components": list(components),
    }


def segment_json(s: Segment) -> SegmentJSON:
    """The JSON object of one segment."""
    return segment_json_of(s.attempt, s.start, s.end, s.category, s.kind, s.components)


def job_json(s: JobSummary, with_segments: bool = False) -> JobJSON:
    """The JSON object of one job's figures (without ``computed_at``, which storage adds)."""
    out: JobJSON = {
        "job_id": s.job_id,
        "state": s.state.value,
        "model": s.model,
        "team": s.team,
        "alloc": s.alloc,
        "end": s.end,
        "wall_s": s.wall_s,
        "productive_s": s.productive_s,
        "idle_s": s.idle_s,
        "failure_s": s.failure_s,
        "ett_pct": s.ett_pct,
        "idle_pct": s.idle_pct,
        "failure_pct": s.failure_pct,
        "tts_s": s.tts_s,
        "ttr_s": list(s.ttr_s),
        "failures": s.failures,
        "failure_causes": dict(s.failure_causes),
        "unsaved_s": s.unsaved_s,
        "expected_unsaved_s": s.expected_unsaved_s,
        "at_risk_s": s.at_risk_s,
        "checkpoint_blocking_s": s.checkpoint_blocking_s,
        "lost_by_component": dict(s.lost_by_component),
        "checkpoint_advice": advice_json(s.checkpoint_advice),
        "attempts": [attempt_json(a) for a in s.attempts],
        "span_count": s.span_count,
        "last_span_end": s.last_span_end,
        "checkpoint_restore_s": s.checkpoint_restore_s,
        "checkpoint_blocking_stats": blocking_stats_json(s.checkpoint_blocking_stats),
        "blocking_events": [blocking_event_json(e) for e in s.blocking_events],
        "startup_compile_cache": s.startup_compile_cache,
        "telemetry_lost_spans": s.telemetry_lost_spans,
        "clock_skew_s": s.clock_skew_s,
    }
    if with_segments:
        out["segments"] = [segment_json(seg) for seg in s.segments]
    return out


def lost_time_json(key: str | None, idle_s: float, failure_s: float) -> LostTimeJSON:
    """The lost-time row of one key."""
    return {"key": key, "idle_s": idle_s, "failure_s": failure_s, "lost_s": idle_s + failure_s}


def largest_first(rows: Iterable[LostTimeJSON]) -> list[LostTimeJSON]:
    """Lost-time rows, largest ``lost_s`` first; ties by key, None last."""
    return sorted(rows, key=lambda r: (-r["lost_s"], r["key"] is None, r["key"] or ""))
