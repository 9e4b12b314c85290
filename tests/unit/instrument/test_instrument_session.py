"""Every span and attribute of docs/metrics.md, "The spans it reads", produced through the
public API."""

from __future__ import annotations

import concurrent.futures
import itertools
import time
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import ett
from ett import semconv
from tests.support.waits import wait_until

if TYPE_CHECKING:
    from conftest import Recorder


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_resource_carries_the_identity(recorder: Recorder) -> None:
    sess = recorder.start(attempt=2, rank=3, world_size=8, allocated_at=1000.0)
    sess.end()
    span = recorder.one(semconv.SPAN_ATTEMPT)
    res = dict(span.resource.attributes)
    assert res[semconv.JOB_ID] == "job-1"
    assert res[semconv.ATTEMPT] == 2
    assert res[semconv.RANK] == 3
    assert res[semconv.WORLD_SIZE] == 8
    assert res[semconv.MODEL] == "dlrm"
    assert res[semconv.TEAM] == "ranking"
    assert res[semconv.SERVICE_NAME] == "ett-trainer"
    assert res[semconv.HOST_NAME]
    assert span.start_time == 1000 * 10**9


def test_attempt_span_completed_with_dropped_count(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.end()
    sess.end("failed", "oom")  # only the first end counts
    span = recorder.one(semconv.SPAN_ATTEMPT)
    assert attrs(span)[semconv.ATTEMPT_END_REASON] == "completed"
    assert semconv.FAILURE_CAUSE not in attrs(span)
    assert attrs(span)[semconv.TELEMETRY_DROPPED_SPANS] == 0
    assert sess.ended


@pytest.mark.parametrize(
    ("reason", "cause", "expected"),
    [("failed", "oom", "oom"), ("failed", None, "unknown"), ("preempted", None, "preemption")],
)
def test_attempt_span_not_completed_has_cause(
    recorder: Recorder, reason: str, cause: str | None, expected: str
) -> None:
    recorder.start().end(reason, cause)
    span = recorder.one(semconv.SPAN_ATTEMPT)
    assert attrs(span)[semconv.ATTEMPT_END_REASON] == reason
    assert attrs(span)[semconv.FAILURE_CAUSE] == expected


def test_startup_phases_default_components_and_override(recorder: Recorder) -> None:
    sess = recorder.start()
    for phase in semconv.StartupPhaseValues:
        with sess.startup(phase):
            pass
    with sess.startup("warmup"):
        pass
    with sess.startup("model_init", component="sharding"):
        pass
    sess.end()
    by_name: dict[str, dict[str, Any]] = {}
    for span in sorted(recorder.spans(), key=lambda s: s.start_time):
        by_name.setdefault(span.name, attrs(span))
    for phase in semconv.StartupPhaseValues:
        name = semconv.startup_span_name(phase)
        assert by_name[name][semconv.COMPONENT] == semconv.default_component(phase)
    assert by_name[semconv.startup_span_name("warmup")][semconv.COMPONENT] == "other"
    overridden = recorder.named(semconv.startup_span_name("model_init"))
    assert {attrs(s)[semconv.COMPONENT] for s in overridden} == {"model", "sharding"}


def test_startup_as_decorator_makes_one_span_per_call(recorder: Recorder) -> None:
    sess = recorder.start()

    @sess.startup("dataloader_init")
    def build(n: int) -> int:
        time.sleep(0.01)
        return n * 2

    assert build(2) == 4
    assert build(3) == 6
    sess.end()
    spans = recorder.named(semconv.startup_span_name("dataloader_init"))
    assert len(spans) == 2
    assert all(s.end_time - s.start_time >= 10_000_000 for s in spans)


def test_first_batch_ends_now_and_starts_at_allocation(recorder: Recorder) -> None:
    sess = recorder.start(allocated_at=time.time() - 5)
    before = time.time_ns()
    sess.first_batch(step=1200)
    after = time.time_ns()
    sess.first_batch(step=7)  # ignored
    sess.end()
    span = recorder.one(semconv.SPAN_FIRST_BATCH)
    assert attrs(span)[semconv.STEP] == 1200
    assert before <= span.end_time <= after
    assert span.start_time == recorder.one(semconv.SPAN_ATTEMPT).start_time


def test_windows_count_steps_and_samples(recorder: Recorder) -> None:
    sess = recorder.start(window_s=0.05)
    sess.first_batch(step=100)
    for _ in range(30):
        sess.step(samples=8)
        time.sleep(0.005)
    sess.end()
    windows = sorted(recorder.named(semconv.SPAN_TRAIN_WINDOW), key=lambda s: s.start_time)
    assert len(windows) >= 2
    assert attrs(windows[0])[semconv.STEP_FIRST] == 100
    assert attrs(windows[-1])[semconv.STEP_LAST] == 129
    assert sum(attrs(w)[semconv.SAMPLES] for w in windows) == 240
    for prev, nxt in itertools.pairwise(windows):
        assert attrs(nxt)[semconv.STEP_FIRST] == attrs(prev)[semconv.STEP_LAST] + 1
        assert nxt.start_time == prev.end_time  # windows tile the training time
    assert all(semconv.TELEMETRY_DROPPED_SPANS in attrs(w) for w in windows)
    assert windows[0].start_time == recorder.one(semconv.SPAN_FIRST_BATCH).end_time


def test_no_window_without_steps(recorder: Recorder) -> None:
    sess = recorder.start(window_s=0.02)
    sess.first_batch()
    time.sleep(0.15)  # elapsed time, not a wait: 7 windows' time, no step in any
    sess.end()
    assert recorder.named(semconv.SPAN_TRAIN_WINDOW) == []


def test_step_without_first_batch_marks_it(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.step(samples=4)
    sess.step(samples=4)
    assert sess.steps == 2
    assert sess.current_step == 2
    sess.end()
    assert attrs(recorder.one(semconv.SPAN_FIRST_BATCH))[semconv.STEP] == 0
    window = recorder.one(semconv.SPAN_TRAIN_WINDOW)
    assert attrs(window)[semconv.STEP_FIRST] == 0
    assert attrs(window)[semconv.STEP_LAST] == 1
    assert attrs(window)[semconv.SAMPLES] == 8


def test_step_never_raises(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.first_batch()
    sess.step(samples=None)  # type: ignore[arg-type]
    sess.step(samples="x")  # type: ignore[arg-type]
    sess.step()
    sess.end()
    sess.step()  # after the end too


def test_span_blocks_with_bad_arguments_never_stop_the_users_block(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """A span method given bad arguments (found by a new user's probe: ``startup(None)`` and a
    loaded step of ``"x"`` raised out of the user's ``with``) records no span, logs once, and
    the block runs; the spans around it are recorded as usual."""
    sess = recorder.start()
    ran = []
    with sess.startup(None):  # type: ignore[arg-type]
        ran.append("startup")
    with sess.checkpoint_load() as load:
        load.set_step("x")  # type: ignore[arg-type]
        ran.append("load")
    with sess.checkpoint_save("x") as save:  # type: ignore[arg-type]
        save.set_bytes("many")  # type: ignore[arg-type]
        save.persist(concurrent.futures.Future())
        ran.append("save")
    with sess.data_wait(min_s="x"):  # type: ignore[arg-type]
        ran.append("wait")
    with sess.shutdown(None):  # type: ignore[arg-type]
        ran.append("shutdown")

    @sess.blocking(None)  # type: ignore[arg-type]
    def work() -> str:
        return "done"

    assert work() == "done"
    with sess.eval():
        ran.append("eval")
    sess.end()
    assert ran == ["startup", "load", "save", "wait", "shutdown", "eval"]
    recorder.one(semconv.SPAN_EVAL)
    assert recorder.named(semconv.SPAN_CHECKPOINT_SAVE) == []
    assert "ETT instrumentation error in Session.startup (ignored: no span)" in caplog.text


def test_checkpoint_load_compile_eval_publish(recorder: Recorder) -> None:
    sess = recorder.start()
    with sess.checkpoint_load(step=900):
        pass
    with sess.checkpoint_load() as load:
        load.set_step(901)
    with sess.compile(cache="hit", frames=3):
        pass
    with sess.eval():
        pass
    with sess.publish():
        pass
    with sess.publish(standalone=True):
        pass
    sess.end()
    loads = recorder.named(semconv.startup_span_name("checkpoint_load"))
    assert sorted(attrs(s)[semconv.CHECKPOINT_STEP] for s in loads) == [900, 901]
    assert all(attrs(s)[semconv.COMPONENT] == "checkpoint" for s in loads)
    compile_span = recorder.one(semconv.SPAN_COMPILE)
    assert attrs(compile_span)[semconv.COMPILE_CACHE] == "hit"
    assert attrs(compile_span)[semconv.COMPILE_FRAMES] == 3
    recorder.one(semconv.SPAN_EVAL)
    publishes = recorder.named(semconv.SPAN_PUBLISH)
    assert sorted(attrs(s)[semconv.PUBLISH_STANDALONE] for s in publishes) == [False, True]


def test_a_failure_with_a_step_that_is_not_a_number_is_still_recorded(
    recorder: Recorder, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``failure(cause, step="x")`` printed a library traceback and dropped the failure."""
    from ett import _errors

    monkeypatch.setattr(_errors, "_seen", set())
    sess = recorder.start()
    sess.failure("exception", step="x", error_type="ValueError")  # type: ignore[arg-type]
    sess.end()
    failure = recorder.one(semconv.SPAN_FAILURE)
    assert dict(failure.attributes or {}) == {
        semconv.FAILURE_CAUSE: "exception",
        semconv.ERROR_TYPE: "ValueError",
    }
    said = [r.getMessage() for r in caplog.records]
    assert said == ["failure(step='x'): not an integer step; the failure is recorded without one"]
    assert "Traceback" not in caplog.text


def test_failure_span_is_zero_length(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.first_batch(step=10)
    sess.step()
    sess.failure("nccl_timeout", error_type="DistBackendError")
    sess.failure(MemoryError("boom"), step=3)
    sess.end()
    failures = sorted(recorder.named(semconv.SPAN_FAILURE), key=lambda s: s.start_time)
    assert [s.end_time - s.start_time for s in failures] == [0, 0]
    first, second = (attrs(s) for s in failures)
    assert first == {
        semconv.FAILURE_CAUSE: "nccl_timeout",
        semconv.STEP: 11,
        semconv.ERROR_TYPE: "DistBackendError",
    }
    assert second == {
        semconv.FAILURE_CAUSE: "oom",
        semconv.STEP: 3,
        semconv.ERROR_TYPE: "MemoryError",
    }


def test_block_exception_is_recorded_and_reraised_unchanged(recorder: Recorder) -> None:
    sess = recorder.start()
    error = ValueError("bad shard")
    with pytest.raises(ValueError) as caught, sess.startup("sharding_plan"):
        raise error
    assert caught.value is error
    sess.end()
    span = recorder.one(semconv.startup_span_name("sharding_plan"))
    assert span.status.status_code is StatusCode.ERROR
    assert span.events[0].name == "exception"


def test_guard_fails_the_attempt_and_reraises(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.first_batch(step=0)
    error = RuntimeError("CUDA out of memory. Tried to allocate 2 GiB")
    with pytest.raises(RuntimeError) as caught, sess.guard():
        raise error
    assert caught.value is error
    assert sess.ended
    attempt = recorder.one(semconv.SPAN_ATTEMPT)
    assert attrs(attempt)[semconv.ATTEMPT_END_REASON] == "failed"
    assert attrs(attempt)[semconv.FAILURE_CAUSE] == "oom"
    failure = attrs(recorder.one(semconv.SPAN_FAILURE))
    assert failure == {
        semconv.FAILURE_CAUSE: "oom",
        semconv.STEP: 0,
        semconv.ERROR_TYPE: "RuntimeError",
    }


def test_guard_ignores_clean_system_exit(recorder: Recorder) -> None:
    sess = recorder.start()
    with pytest.raises(SystemExit), sess.guard():
        raise SystemExit(0)
    assert not sess.ended


def test_attempt_scope_completes_or_fails() -> None:
    exporter = InMemorySpanExporter()
    with ett.attempt(job_id="j", exporter=exporter, install_handlers=False) as sess:
        sess.step()
    assert sess.ended
    error = KeyError("x")
    exporter2 = InMemorySpanExporter()
    with (
        pytest.raises(KeyError) as caught,
        ett.attempt(job_id="j", exporter=exporter2, install_handlers=False),
    ):
        raise error
    assert caught.value is error
    reasons = [
        attrs(s)[semconv.ATTEMPT_END_REASON]
        for exp in (exporter, exporter2)
        for s in exp.get_finished_spans()
        if s.name == semconv.SPAN_ATTEMPT
    ]
    assert reasons == ["completed", "failed"]


def test_init_is_idempotent_and_current_finds_the_session(recorder: Recorder) -> None:
    assert not ett.current().enabled  # none active: a disabled stand-in
    sess = recorder.start()
    assert ett.init(job_id="other") is sess
    assert ett.current() is sess
    sess.end()
    assert ett.current() is not sess


def test_user_tracer_provider_gets_identity_as_span_attributes() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sess = ett.init(job_id="j9", rank=1, tracer_provider=provider, install_handlers=False)
    with sess.eval():
        pass
    sess.end()
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert attrs(spans[semconv.SPAN_EVAL])[semconv.JOB_ID] == "j9"
    assert attrs(spans[semconv.SPAN_EVAL])[semconv.RANK] == 1
    assert semconv.TELEMETRY_DROPPED_SPANS not in attrs(spans[semconv.SPAN_ATTEMPT])
    # every span of the attempt is in one trace, under the attempt span
    attempt = spans[semconv.SPAN_ATTEMPT]
    assert spans[semconv.SPAN_EVAL].parent is not None
    assert spans[semconv.SPAN_EVAL].parent.span_id == attempt.context.span_id
    assert spans[semconv.SPAN_EVAL].context.trace_id == attempt.context.trace_id


def test_ranks_of_one_attempt_share_a_trace() -> None:
    ids = []
    for rank in (0, 1):
        exporter = InMemorySpanExporter()
        sess = ett.init(
            job_id="jt", attempt=4, rank=rank, exporter=exporter, install_handlers=False
        )
        sess.end()
        ids.append(exporter.get_finished_spans()[0].context.trace_id)
    assert ids[0] == ids[1]


def test_disabled_session_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_DISABLED", "1")
    exporter = InMemorySpanExporter()
    sess = ett.init(job_id="j", exporter=exporter, install_handlers=False)
    assert not sess.enabled
    with sess.startup("pg_init"), sess.checkpoint_save(1) as ck:
        ck.persist(concurrent.futures.Future())
    sess.first_batch()
    sess.step()
    sess.failure("oom")
    sess.end()
    assert exporter.get_finished_spans() == ()


def test_first_step_marks_the_first_batch_within_a_poll(recorder: Recorder) -> None:
    sess = recorder.start()
    before = time.time_ns()
    sess.step(samples=2)
    wait_until(  # marked by the window thread, not by end()
        lambda: recorder.named(semconv.SPAN_FIRST_BATCH), 60, "the window thread's first batch"
    )
    span = recorder.one(semconv.SPAN_FIRST_BATCH)
    assert before <= span.end_time <= before + 100_000_000
    assert attrs(span)[semconv.STEP] == 0
    sess.end()


def test_init_after_an_ended_attempt_records_the_next_attempt(recorder: Recorder) -> None:
    """An in-process retry (catch the failure, init() again) resolved to the same attempt and
    allocation, so the retry's spans were merged into the failed attempt: one attempt, failed,
    ETT 0 %. It is now the next attempt, allocated when it starts."""
    first = recorder.start()
    with pytest.raises(RuntimeError), first.guard():
        raise RuntimeError("boom")
    ended = time.time()
    second = recorder.start()
    assert second is not first
    assert second.identity.attempt == first.identity.attempt + 1
    assert second.identity.allocated_at >= ended
    second.end()
    third = recorder.start(attempt=7)  # a number of the caller's own wins
    assert third.identity.attempt == 7
    third.end()
    other = recorder.start(job_id="another-job")  # another job starts from its own count
    assert other.identity.attempt == 0


def test_a_loop_faster_than_the_poll_is_training_time(recorder: Recorder) -> None:
    """Without first_batch(), a loop done before the window thread's first poll was marked
    after its last step: one window of zero length, ETT 0 %, no throughput."""
    sess = recorder.start()
    first = time.time_ns()
    for _ in range(20_000):
        sess.step()
    last = time.time_ns()
    sess.end()
    marked = recorder.one(semconv.SPAN_FIRST_BATCH)
    assert first <= marked.end_time <= last
    (window,) = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    assert window.start_time == marked.end_time and window.end_time > window.start_time
    assert attrs(window)[semconv.STEP_LAST] == 19_999


def test_a_sample_count_out_of_range_spoils_one_window_only(recorder: Recorder) -> None:
    """step(samples=10**30) made every later window's ett.samples fail to encode (the
    running total past int64): only the window that holds it goes without a count."""
    sess = recorder.start(window_s=0.05)
    sess.first_batch()
    sess.step(samples=10**30)
    wait_until(lambda: recorder.named(semconv.SPAN_TRAIN_WINDOW), 60, "the first window")
    sess.step(samples=3)
    sess.step(samples=4)
    sess.end()
    windows = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    assert semconv.SAMPLES not in attrs(windows[0])
    assert [attrs(w)[semconv.SAMPLES] for w in windows[1:]] == [7]


def test_a_step_past_int64_is_said_once_and_every_span_still_encodes(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """first_batch(step=2**63 - 8): the windows counting on from it passed 2**63, which the OTLP
    exporter cannot encode: a traceback per window, and the job's windows lost their step
    numbers (a probe). Such a step is said once and recorded as 0."""
    sess = recorder.start(window_s=0.05)
    sess.first_batch(step=2**63 - 8)
    for _ in range(20):
        sess.step(samples=2)
    wait_until(lambda: recorder.named(semconv.SPAN_TRAIN_WINDOW), 60, "a window")
    with sess.checkpoint_save(2**64, mode="sync"):
        pass
    sess.end()
    assert attrs(recorder.one(semconv.SPAN_FIRST_BATCH))[semconv.STEP] == 0
    windows = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    assert (
        sum(attrs(w)[semconv.STEP_LAST] - attrs(w)[semconv.STEP_FIRST] + 1 for w in windows) == 20
    )
    assert attrs(recorder.one(semconv.SPAN_CHECKPOINT_SAVE))[semconv.CHECKPOINT_STEP] == 0
    encode_spans(recorder.exporter.get_finished_spans())  # raised ValueError: out of range
    assert "first_batch(step=9223372036854775800)" in caplog.text
    assert "checkpoint_save(step=18446744073709551616)" in caplog.text


def test_unknown_end_reasons_modes_and_sizes_are_said(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    sess = recorder.start()
    with sess.checkpoint_save(3, mode="bogus", nbytes=-7):
        pass
    sess.first_batch(step=-3)
    sess.end("weird-reason")
    save = attrs(recorder.one(semconv.SPAN_CHECKPOINT_SAVE))
    assert save[semconv.CHECKPOINT_MODE] == "sync" and semconv.CHECKPOINT_BYTES not in save
    attempt = attrs(recorder.one(semconv.SPAN_ATTEMPT))
    assert attempt[semconv.ATTEMPT_END_REASON] == "failed"
    for said in ("mode='bogus'", "nbytes=-7", "first_batch(step=-3)", "end('weird-reason')"):
        assert said in caplog.text


def test_ctrl_c_ends_the_attempt_preempted(recorder: Recorder) -> None:
    """Ctrl-C was a failure of cause ``exception``, counted with the job's faults (and in the
    checkpoint advice's failures); it is a stop from outside, like SIGTERM."""
    sess = recorder.start()
    with pytest.raises(KeyboardInterrupt), sess.guard():
        raise KeyboardInterrupt
    attempt = attrs(recorder.one(semconv.SPAN_ATTEMPT))
    assert attempt[semconv.ATTEMPT_END_REASON] == "preempted"
    assert attempt[semconv.FAILURE_CAUSE] == "preemption"
    failure = attrs(recorder.one(semconv.SPAN_FAILURE))
    assert failure[semconv.ERROR_TYPE] == "KeyboardInterrupt"
