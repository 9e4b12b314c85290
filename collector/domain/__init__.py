"""The ETT math: spans in, segments and figures out. Pure functions over frozen dataclasses."""

from ._activity import Activity, job_activity
from ._checkpoints import checkpoints_of
from ._figures import (
    DEFAULT_WINDOW_S,
    checkpoint_advice,
    checkpoint_loss,
    failure_cause,
    is_failed,
    job_state,
    lost_by_component,
    ttr,
    tts,
    young_interval,
)
from ._summary import summarize
from ._sweep import sweep
from ._young import young_training
from .model import (
    AttemptSummary,
    Category,
    CheckpointAdvice,
    GroupBy,
    JobState,
    JobSummary,
    Segment,
    SegmentKind,
    SpanRecord,
)

__all__ = [
    "DEFAULT_WINDOW_S",
    "Activity",
    "AttemptSummary",
    "Category",
    "CheckpointAdvice",
    "GroupBy",
    "JobState",
    "JobSummary",
    "Segment",
    "SegmentKind",
    "SpanRecord",
    "checkpoint_advice",
    "checkpoint_loss",
    "checkpoints_of",
    "failure_cause",
    "is_failed",
    "job_activity",
    "job_state",
    "lost_by_component",
    "summarize",
    "sweep",
    "ttr",
    "tts",
    "young_interval",
    "young_training",
]
