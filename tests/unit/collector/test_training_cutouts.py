"""Issue 16, training time: data stalls, user-named blocking events, shutdown steps, restores
apart from saves, per-save checkpoint statistics. One small scripted job per rule."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ett import semconv as sc
from ett_collector.commands import _render
from ett_collector.domain import Category, SegmentKind, summarize
from ett_collector.schemas import job_json
from tests.support.spans import (
    attempt_end,
    blocking,
    data_wait,
    first_batch,
    per_component,
    persist,
    phase,
    save,
    shutdown,
    span,
    window,
)
from tests.support.worked_example import worked_example

DONE = sc.EndReasonValues.COMPLETED.value
NOW = 1e6


def _job(*extra, ranks=(0,), end=100.0):
    """Start-up [0, 10] (pg_init on every rank), training [10, 100] (windows on every rank),
    completed at ``end``, plus ``extra`` spans."""
    spans = []
    for r in ranks:
        spans += [
            phase("pg_init", 0, 10, rank=r),
            first_batch(10, rank=r),
            window(10, 100, rank=r),
            attempt_end(0, end, DONE, rank=r),
        ]
    return summarize([*spans, *extra], NOW)


# --- data stalls ------------------------------------------------------------------------------


def test_a_data_stall_is_cut_out_as_idle_data() -> None:
    s = _job(data_wait(20, 23), data_wait(50, 50.5))

    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx({"data": 3.5})
    assert s.productive_s == pytest.approx(90 - 3.5)
    assert s.lost_by_component["data"] == pytest.approx(3.5)


def test_one_rank_waiting_for_data_stalls_the_synchronous_job() -> None:
    s = _job(data_wait(30, 34, rank=1), ranks=(0, 1))

    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx({"data": 4})


def test_a_stall_yields_to_an_eval_it_overlaps() -> None:
    s = _job(data_wait(20, 30), span(sc.SPAN_EVAL, 25, 35))

    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx({"data": 5, "eval": 10})


def test_a_rank_fetching_while_its_peer_still_saves_leaves_the_save_whole() -> None:
    s = _job(
        save(10, 40, 41, rank=1),
        save(10, 40, 44, rank=0),
        data_wait(41, 43, rank=1),  # rank 1 fetched its next batch while rank 0 still saved
        data_wait(44, 45, rank=0),
        ranks=(0, 1),
    )

    assert s.checkpoint_blocking_s == pytest.approx(4)
    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx(
        {"checkpoint": 4, "data": 1}
    )


def test_a_stall_beside_a_blocking_event_charged_to_data_counts_once() -> None:
    s = _job(data_wait(20, 30), blocking("prefetch_sync", 25, 35, "data"))

    cut = [seg for seg in s.segments if seg.kind == SegmentKind.CUTOUT]
    assert [(seg.start, seg.end, seg.components) for seg in cut] == [(20, 35, ("data",))]


def test_a_stall_before_the_first_batch_is_a_start_up_phase_on_its_rank() -> None:
    spans = [
        phase("model_init", 0, 6),
        data_wait(6, 9),
        first_batch(10),
        window(10, 20),
        attempt_end(0, 20, DONE),
    ]
    s = summarize(spans, NOW)

    assert per_component(s.segments, SegmentKind.STARTUP) == pytest.approx(
        {"model": 6, "data": 3, "other": 1}
    )


def test_unsaved_time_never_includes_a_stall() -> None:
    spans = [
        first_batch(0),
        window(0, 100),
        save(1, 40, 42),
        data_wait(60, 70),
        phase("checkpoint_load", 110, 115, attempt=1, **{sc.CHECKPOINT_STEP: 1}),
        first_batch(115, attempt=1),
        window(115, 120, attempt=1),
        attempt_end(110, 120, DONE, attempt=1),
    ]
    s = summarize(spans, NOW)

    assert s.unsaved_s == pytest.approx(100 - 42 - 10)
    assert per_component(s.segments, SegmentKind.CUTOUT, attempt=0) == pytest.approx(
        {"checkpoint": 2, "data": 10}
    )


# --- user-named blocking events ----------------------------------------------------------------


def test_a_blocking_event_is_charged_to_its_component() -> None:
    s = _job(blocking("sdc_check", 40, 46, "model"))

    cut = [seg for seg in s.segments if seg.kind == SegmentKind.CUTOUT]
    assert [(seg.start, seg.end, seg.components) for seg in cut] == [(40, 46, ("model",))]
    assert cut[0].category == Category.IDLE


@pytest.mark.parametrize("component", [None, "sdc", "failure"])
def test_a_blocking_event_without_a_known_component_goes_to_other(component) -> None:
    event = blocking("sdc_check", 40, 46, component)
    s = _job(event)

    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx({"other": 6})
    assert event.attr(sc.BLOCKING_NAME) == "sdc_check"  # the raw span keeps the user's name


def test_overlapping_blocking_events_of_two_ranks_split_evenly() -> None:
    s = _job(
        blocking("sdc_check", 40, 50, "model", rank=0),
        blocking("health", 45, 55, "comms", rank=1),
        ranks=(0, 1),
    )

    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx(
        {"model": 5 + 2.5, "comms": 2.5 + 5}
    )


def test_blocking_events_are_listed_by_name_and_charged_component() -> None:
    s = _job(
        blocking("sdc_check", 40, 46, "model", rank=0),
        blocking("sdc_check", 44, 48, "model", rank=1),  # the same check on the other rank
        blocking("sdc_check", 60, 61, "model", rank=0),
        blocking("probe", 70, 70.5, "sdc", rank=1),
        ranks=(0, 1),
    )

    assert [(e.name, e.component, e.count) for e in s.blocking_events] == [
        ("sdc_check", "model", 3),
        ("probe", "other", 1),
    ]
    assert [e.seconds for e in s.blocking_events] == pytest.approx([8 + 1, 0.5])
    events = job_json(s)["blocking_events"]
    assert events[1] == {"name": "probe", "component": "other", "count": 1, "seconds": 0.5}
    assert "blocking events sdc_check → model: 3×, 9.0s; probe → other: 1×, 0.5s" in _text(
        dict(job_json(s))
    )


# --- shutdown ----------------------------------------------------------------------------------


def test_shutdown_steps_name_the_wait_of_a_completed_attempt() -> None:
    s = _job(
        shutdown("persist_wait", 100, 104),
        shutdown("pg_teardown", 104, 106),
        shutdown("exporter_flush", 106, 107),
        shutdown("my_own_step", 107, 108),
        end=110,
    )

    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx(
        {"checkpoint": 4, "comms": 2, "runtime": 1, "other": 1 + 2}
    )


def test_a_shutdown_step_may_name_its_component() -> None:
    s = _job(shutdown("my_own_step", 100, 105, **{sc.COMPONENT: "publish"}), end=105)

    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx({"publish": 5})


def test_a_final_persist_in_the_shutdown_is_checkpoint() -> None:
    s = _job(save(9, 99, 100, "async"), persist(9, 99, 108), end=110)

    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx(
        {"checkpoint": 8, "other": 2}
    )


def test_a_failed_attempts_shutdown_stays_failure() -> None:
    spans = [
        first_batch(0),
        window(0, 50),
        shutdown("pg_teardown", 50, 60),
        attempt_end(0, 60, sc.EndReasonValues.FAILED.value, "exception"),
    ]
    s = summarize(spans, NOW)

    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx({"failure": 10})


# --- restores apart from saves, per-save statistics ----------------------------------------------


def test_restore_is_reported_apart_fromblocking() -> None:
    s = summarize(worked_example(), NOW)

    assert s.checkpoint_blocking_s == pytest.approx(20)
    assert s.checkpoint_restore_s == pytest.approx(20)
    assert s.lost_by_component["checkpoint"] == pytest.approx(40)


def test_per_save_blocking_statistics() -> None:
    saves = []
    t = 10.0
    for i, secs in enumerate([3.0, 1.0, 2.0, 8.0, 1.5]):
        saves.append(save(i + 1, t, t + secs, rank=0))
        saves.append(save(i + 1, t + 0.5, t + secs + 0.5, rank=1))  # a later rank: + 0.5
        t += 15
    s = _job(*saves, ranks=(0, 1))
    stats = s.checkpoint_blocking_stats
    per_save = [3.5, 1.5, 2.5, 8.5, 2.0]

    assert stats.count == 5
    assert stats.min_s == pytest.approx(1.5)
    assert stats.max_s == pytest.approx(8.5)
    assert stats.mean_s == pytest.approx(sum(per_save) / 5)
    assert stats.p95_s == pytest.approx(8.5)  # nearest rank: ceil(0.95 * 5) = 5th of 5
    assert s.checkpoint_blocking_s == pytest.approx(sum(per_save))
    assert s.checkpoint_advice.mean_blocking_s == pytest.approx(stats.mean_s)


def test_a_final_save_in_the_shutdown_counts_per_save_but_not_asblocking() -> None:
    s = _job(save(5, 40, 42), save(9, 99.5, 103, rank=0), end=105)
    stats = s.checkpoint_blocking_stats

    assert s.checkpoint_blocking_s == pytest.approx(2 + 0.5)  # training ends at 100
    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx(
        {"checkpoint": 3, "other": 2}
    )
    assert (stats.count, stats.min_s, stats.max_s) == (2, pytest.approx(2), pytest.approx(3.5))


def test_p95_of_twenty_saves_is_the_nineteenth() -> None:
    saves = [save(i, 10 + 4 * i, 10 + 4 * i + (i + 1) / 10) for i in range(20)]
    stats = _job(*saves).checkpoint_blocking_stats

    assert stats.count == 20
    assert stats.p95_s == pytest.approx(1.9)


def test_no_save_gives_empty_statistics() -> None:
    stats = _job().checkpoint_blocking_stats

    assert (stats.count, stats.min_s, stats.mean_s, stats.max_s, stats.p95_s) == (0, *[None] * 4)


# --- JSON and the report -----------------------------------------------------------------------


def _text(job: dict) -> str:
    out = io.StringIO()
    _render.print_report(job, Console(file=out, width=200, color_system=None))  # type: ignore[arg-type]
    return " ".join(out.getvalue().replace("│", " ").split())


def test_job_json_and_report_carry_restore_and_per_save_statistics() -> None:
    job = job_json(summarize(worked_example(), NOW))

    assert job["checkpoint_restore_s"] == pytest.approx(20)
    assert job["checkpoint_blocking_stats"] == {
        "count": 2,
        "min_s": 10.0,
        "mean_s": 10.0,
        "max_s": 10.0,
        "p95_s": 10.0,
        "async_count": 0,  # the example's saves say no mode: sync
    }
    text = _text(dict(job))
    assert "checkpoint blocking 20.0s while training" in text
    assert "per save 2 saves, any final one included: min 10.0s, mean 10.0s" in text
    assert "checkpoint restore 20.0s" in text
    assert "checkpoint component 40.0s = blocking 20.0s + restore 20.0s" in text


def test_report_of_figures_stored_before_the_new_fields() -> None:
    job = dict(job_json(summarize(worked_example(), NOW)))
    del job["checkpoint_restore_s"], job["checkpoint_blocking_stats"]

    text = _text(job)
    assert "checkpoint blocking 20.0s (saves only; the checkpoint component below" in text
    assert "checkpoint restore" not in text


# --- the worked example of docs/metrics.md ("Stalls, blocking events, restores, shutdown") ------


def test_the_documented_example() -> None:
    sdc = {sc.BLOCKING_NAME: "sdc_check"}
    spans = [
        *(phase("pg_init", 0, 10, rank=r) for r in (0, 1)),
        *(phase("checkpoint_load", 10, 14, rank=r, **{sc.CHECKPOINT_STEP: 100}) for r in (0, 1)),
        *(first_batch(20, rank=r) for r in (0, 1)),
        *(window(20, 100, rank=r) for r in (0, 1)),
        data_wait(30, 33, rank=1),
        span(sc.SPAN_BLOCKING, 50, 54, rank=0, **sdc, **{sc.COMPONENT: "model"}),
        span(sc.SPAN_BLOCKING, 52, 56, rank=1, **sdc, **{sc.COMPONENT: "sdc"}),
        save(200, 70, 72, rank=0),
        save(200, 70, 73, rank=1),
        data_wait(72, 74, rank=0),
        save(300, 100, 102, "async", rank=0),
        save(300, 100, 101.5, "async", rank=1),
        *(persist(300, 100, 106, rank=r) for r in (0, 1)),
        *(shutdown("pg_teardown", 106, 108, rank=r) for r in (0, 1)),
        shutdown("exporter_flush", 108, 108.5),
        *(attempt_end(0, 109, DONE, rank=r) for r in (0, 1)),
    ]
    s = summarize(spans, NOW)

    assert per_component(s.segments, SegmentKind.STARTUP) == pytest.approx(
        {"comms": 10, "checkpoint": 4, "other": 6}
    )
    assert per_component(s.segments, SegmentKind.CUTOUT) == pytest.approx(
        {"data": 3 + 1, "model": 2 + 1, "other": 1 + 2, "checkpoint": 3}
    )
    assert per_component(s.segments, SegmentKind.SHUTDOWN) == pytest.approx(
        {"checkpoint": 6, "comms": 2, "runtime": 0.5, "other": 0.5}
    )
    assert (s.wall_s, s.productive_s, s.idle_s) == pytest.approx((109, 67, 42))
    assert s.ett_pct == pytest.approx(100 * 67 / 109)
    assert (s.checkpoint_blocking_s, s.checkpoint_restore_s) == pytest.approx((3, 4))
    assert s.lost_by_component == pytest.approx(
        {"checkpoint": 13, "comms": 12, "other": 9.5, "data": 4, "model": 3, "runtime": 0.5}
    )
    stats = s.checkpoint_blocking_stats
    assert (stats.count, stats.min_s, stats.mean_s, stats.max_s, stats.p95_s) == (2, 2, 2.5, 3, 3)
    assert [(e.name, e.component, e.count, e.seconds) for e in s.blocking_events] == [
        ("sdc_check", "model", 1, 4),
        ("sdc_check", "other", 1, 4),
    ]


def test_report_parts_add_up_under_a_second() -> None:
    """A probe's trainer job read 'checkpoint component 0.1s = blocking 0.0s + restore 0.0s'
    (81, 20 and 28 ms, and 32 ms at exit hidden under a 0.05 s threshold)."""
    job = dict(job_json(summarize(worked_example(), NOW)))
    job["checkpoint_blocking_s"], job["checkpoint_restore_s"] = 0.020, 0.028
    job["lost_by_component"] = {**job["lost_by_component"], "checkpoint": 0.081}
    text = _text(job)
    assert "checkpoint component 81 ms = blocking 20 ms + restore 28 ms + 33 ms at exit" in text
