"""Plain values of the ETT domain: spans in, segments and figures out (frozen dataclasses).

``ett_collector.schemas`` spells the wire shape (a TypedDict) of each record that the read API
returns, with the same fields in the same order: tests/unit/collector/test_schema_fields.py
checks them, so a field added here is added there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

AttrValue = str | bool | int | float | list[Any] | dict[str, Any] | None


# kept alike: instrument/semconv.py's enumerations have this shape too; the words differ (these
# are the domain's own, those the wire's).
class Category(StrEnum):
    """What a second of wall time was: training on new data, waiting, or lost to a failure."""

    PRODUCTIVE = "productive"
    IDLE = "idle"
    FAILURE = "failure"


class SegmentKind(StrEnum):
    """Which rule of docs/metrics.md, "Segments, in order", produced a segment."""

    STARTUP = "startup"
    TRAINING = "training"
    CUTOUT = "cutout"
    UNSAVED = "unsaved"
    SHUTDOWN = "shutdown"
    RECOVERY_GAP = "recovery_gap"


class JobState(StrEnum):
    """The state of a job as the read API reports it."""

    RUNNING = "running"
    PRESUMED_DEAD = "presumed_dead"
    COMPLETED = "completed"
    FAILED = "failed"


class GroupBy(StrEnum):
    """What lost time can be grouped by (``ett lost-time --by``, ``?group_by=``)."""

    COMPONENT = "component"
    JOB = "job"
    MODEL = "model"
    TEAM = "team"


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span, with identity resolved (resource attributes merged, span ones win).

    Times are unix seconds (floats). ``attributes`` holds the merged attributes.
    """

    trace_id: str
    span_id: str
    name: str
    start: float
    end: float
    job_id: str
    attempt: int
    rank: int
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    count: int = 1
    """How many spans of the wire this record stands for: 1, or the windows of a run of
    contiguous ``ett.train.window`` spans that storage folded into one window record."""

    def attr(self, key: str, default: Any = None) -> Any:
        """The attribute ``key``, or ``default``."""
        return self.attributes.get(key, default)


@dataclass(frozen=True, slots=True)
class Segment:
    """An interval of the job's wall time. Its seconds are split evenly between ``components``.

    Productive segments have no components. Segments of a job never overlap and tile its wall time.
    """

    attempt: int
    start: float
    end: float
    category: Category
    kind: SegmentKind
    components: tuple[str, ...] = ()

    @property
    def duration(self) -> float:
        """Length in seconds."""
        return self.end - self.start

    def shares(self) -> dict[str, float]:
        """Seconds per component (empty for productive segments)."""
        if not self.components:
            return {}
        part = self.duration / len(self.components)
        return {c: part for c in self.components}


@dataclass(frozen=True, slots=True)
class AttemptSummary:
    """What the collector knows of one attempt."""

    attempt: int
    alloc: float
    first_batch: float | None
    end: float
    progress: float | None
    end_reason: str | None
    failed: bool
    failure_cause: str | None
    critical_rank: int | None
    ranks: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CheckpointAdvice:
    """Young's checkpoint interval advice (docs/metrics.md, "Figures")."""

    interval_s: float | None
    optimal_interval_s: float | None
    saving_s: float | None
    mean_blocking_s: float | None
    checkpoints: int


@dataclass(frozen=True, slots=True)
class BlockingStats:
    """Checkpoint blocking per save, over every save of the job (a checkpoint step of an
    attempt): its blocking interval, the earliest start to the latest end of its
    ``ett.checkpoint.save`` spans over ranks, whether it fell in training or in a shutdown.
    The figures are None without a save; p95 is the nearest-rank 95th percentile."""

    count: int
    min_s: float | None
    mean_s: float | None
    max_s: float | None
    p95_s: float | None
    async_count: int = 0
    """Saves whose mode is ``async`` (``ett.checkpoint.mode``); the rest are sync or unsaid."""


@dataclass(frozen=True, slots=True)
class BlockingEvent:
    """User-named blocking events (``ett.blocking``) of one name and charged component: their
    span count over ranks and attempts, and the seconds at least one rank was inside one."""

    name: str
    component: str
    count: int
    seconds: float


@dataclass(frozen=True, slots=True)
class TimeSplit:
    """Where a job's wall time went (docs/metrics.md, Figures): ``wall_s`` = ``productive_s`` +
    ``idle_s`` + ``failure_s`` seconds, and each share of it in percent (``ett_pct`` = 100 x
    productive / wall; 0 when the wall time is 0). The one field list of the collector's figures
    (:class:`JobSummary`) and the simulator's truth (``ett_simulator.truth.Truth``)."""

    wall_s: float
    productive_s: float
    idle_s: float
    failure_s: float
    ett_pct: float
    idle_pct: float
    failure_pct: float


@dataclass(frozen=True, slots=True)
class JobSummary(TimeSplit):
    """Every figure of one job (docs/metrics.md, "Figures" and "What a user can ask"): the
    :class:`TimeSplit` and the fields below; ``ett_collector.schemas.job_json`` is its JSON
    object (``JobJSON``, whose fields a unit test keeps equal to these)."""

    job_id: str
    state: JobState
    model: str | None
    team: str | None
    alloc: float
    end: float
    tts_s: float | None
    ttr_s: tuple[float | None, ...]
    failures: int
    failure_causes: Mapping[str, int]
    unsaved_s: float
    expected_unsaved_s: float | None
    at_risk_s: float
    checkpoint_blocking_s: float
    lost_by_component: Mapping[str, float]
    checkpoint_advice: CheckpointAdvice
    attempts: tuple[AttemptSummary, ...]
    segments: tuple[Segment, ...]
    span_count: int
    last_span_end: float
    checkpoint_restore_s: float = 0.0
    """Seconds of start-up charged to ``checkpoint``: the restores (``checkpoint_load``)."""
    checkpoint_blocking_stats: BlockingStats = BlockingStats(0, None, None, None, None)
    """Per-save checkpoint blocking (count, min, mean, max, p95)."""
    blocking_events: tuple[BlockingEvent, ...] = ()
    """The user-named blocking events, by name and component, most seconds first."""
    startup_compile_cache: str | None = None
    """The first attempt's start-up compiles' cache outcome: ``hit``, ``miss``, ``partial`` (a
    mix) or ``off`` (no lookup); None without a start-up compile."""
    telemetry_lost_spans: int = 0
    """Spans the job's emitters said they lost (``ett.telemetry.dropped_spans`` and
    ``spool_dropped_spans``): with any, the figures miss what those spans said (a lost save
    reads as training, lost windows at an attempt's end as its shutdown)."""
    clock_skew_s: float | None = None
    """How far apart the ranks' clocks put one barrier's end (``_critical.barrier_skew_s``);
    None without a barrier seen on two ranks."""
