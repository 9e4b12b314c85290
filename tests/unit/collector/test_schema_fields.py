"""One field list per record: the wire shapes of ``ett_collector.schemas`` name the fields of the
domain's dataclasses (a TypedDict cannot be derived from a dataclass, so the two spellings are
checked here), ``job_json`` writes them in the TypedDict's order, and the simulator's truth
uses the read API's names."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from ett_collector.domain.model import (
    AttemptSummary,
    BlockingEvent,
    BlockingStats,
    Category,
    CheckpointAdvice,
    JobState,
    JobSummary,
    Segment,
    SegmentKind,
    TimeSplit,
)
from ett_collector.schemas import (
    JOB_ROW_FIELDS,
    AttemptJSON,
    BlockingEventJSON,
    BlockingStatsJSON,
    CheckpointAdviceJSON,
    JobJSON,
    SegmentJSON,
    TimeSplitJSON,
    advice_json,
    attempt_json,
    blocking_event_json,
    blocking_stats_json,
    job_json,
    segment_json,
)
from ett_simulator.truth import Truth

ADDED_ON_READ = ("computed_at", "fresh", "error", "performance")
"""Fields of ``JobJSON`` that the read side adds to the stored figures (``performance``: from
the job's loop facts)."""
SIMULATOR_ONLY = ("world_size", "standalone_publish", "train_s", "phase_s")
"""Fields of the truth that the read API does not have."""


def _summary() -> JobSummary:
    attempt = AttemptSummary(0, 1.0, 2.0, 9.0, 9.0, "completed", False, None, 0, (0, 1))
    return JobSummary(
        job_id="j",
        state=JobState.COMPLETED,
        model="m",
        team="t",
        alloc=1.0,
        end=9.0,
        wall_s=8.0,
        productive_s=6.0,
        idle_s=2.0,
        failure_s=0.0,
        ett_pct=75.0,
        idle_pct=25.0,
        failure_pct=0.0,
        tts_s=1.0,
        ttr_s=(),
        failures=0,
        failure_causes={},
        unsaved_s=0.0,
        expected_unsaved_s=None,
        at_risk_s=0.0,
        checkpoint_blocking_s=0.0,
        lost_by_component={"scheduler": 2.0},
        checkpoint_advice=CheckpointAdvice(None, None, None, None, 0),
        attempts=(attempt,),
        segments=(),
        span_count=4,
        last_span_end=9.0,
    )


RECORDS: list[tuple[Any, Any, Any, Any, tuple[str, ...]]] = [
    # (record, its JSON function, its TypedDict, a record, the TypedDict's extra fields)
    (AttemptSummary, attempt_json, AttemptJSON, _summary().attempts[0], ()),
    (
        CheckpointAdvice,
        advice_json,
        CheckpointAdviceJSON,
        CheckpointAdvice(1.0, 2.0, 3.0, 4.0, 5),
        ("min_failures",),
    ),
    (
        BlockingStats,
        blocking_stats_json,
        BlockingStatsJSON,
        BlockingStats(2, 1.0, 1.5, 2.0, 2.0),
        (),
    ),
    (
        BlockingEvent,
        blocking_event_json,
        BlockingEventJSON,
        BlockingEvent("gc", "other", 3, 1.5),
        (),
    ),
]


@pytest.mark.parametrize(("record", "to_json", "shape", "value", "extra"), RECORDS)
def test_each_record_and_its_wire_shape_name_the_same_fields_in_order(
    record: Any, to_json: Any, shape: Any, value: Any, extra: tuple[str, ...]
) -> None:
    names = [f.name for f in fields(record)]
    assert list(shape.__annotations__) == [*names, *extra]
    out = to_json(value)
    assert list(out) == [*names, *extra]
    assert all(out[n] == getattr(value, n) or out[n] == list(getattr(value, n)) for n in names)


def test_a_segment_is_its_fields_and_its_duration() -> None:
    seg = Segment(0, 1.0, 3.5, Category.IDLE, SegmentKind.STARTUP, ("comms", "model"))
    names = [f.name for f in fields(Segment)]
    assert list(SegmentJSON.__annotations__) == [*names[:3], "duration_s", *names[3:]]
    assert segment_json(seg) == {
        "attempt": 0,
        "start": 1.0,
        "end": 3.5,
        "duration_s": 2.5,
        "category": "idle",
        "kind": "startup",
        "components": ["comms", "model"],
    }


def test_the_time_split_has_one_field_list_on_both_sides() -> None:
    assert list(TimeSplitJSON.__annotations__) == [f.name for f in fields(TimeSplit)]
    assert issubclass(JobSummary, TimeSplit) and issubclass(Truth, TimeSplit)


def test_job_json_names_the_summary_fields() -> None:
    wire = set(JobJSON.__annotations__) - set(ADDED_ON_READ)
    assert wire == {f.name for f in fields(JobSummary)}


def test_job_json_writes_the_typed_dicts_order() -> None:
    order = [k for k in JobJSON.__annotations__ if k not in (*ADDED_ON_READ, "segments")]
    assert list(job_json(_summary())) == order
    assert list(job_json(_summary(), with_segments=True)) == [*order, "segments"]
    assert order[:6] == ["job_id", "state", "model", "team", "alloc", "end"]
    assert order[6:13] == list(TimeSplitJSON.__annotations__)


def test_job_rows_keep_their_columns() -> None:
    head = ("job_id", "state", "model", "team", "alloc", "end", "wall_s")
    assert list(JOB_ROW_FIELDS) == [
        *head,
        "ett_pct",
        "idle_pct",
        "failure_pct",
        "failures",
        "computed_at",
    ]


def test_the_truth_uses_the_read_apis_names_in_its_own_order() -> None:
    names = [f.name for f in fields(Truth)]
    assert set(names) - set(SIMULATOR_ONLY) <= set(JobJSON.__annotations__)
    split = [f.name for f in fields(TimeSplit)]
    truth = Truth(
        wall_s=1.0,
        productive_s=1.0,
        idle_s=0.0,
        failure_s=0.0,
        ett_pct=100.0,
        idle_pct=0.0,
        failure_pct=0.0,
        job_id="j",
        model="m",
        team="t",
        state="completed",
        tts_s=None,
        ttr_s=[],
        failures=0,
        failure_causes={},
        unsaved_s=0.0,
        checkpoint_blocking_s=0.0,
        lost_by_component={},
        attempts=[],
        world_size=1,
        standalone_publish=False,
    )
    line = list(truth.to_json())
    assert line[:11] == ["job_id", "model", "team", "state", *split]
    assert line[11:] == [
        n for n in names if n not in (*split, "job_id", "model", "team", "state", "phase_s")
    ]
