"""The end of an attempt, however it ends: persists in flight are waited for (bounded) and
emitted with their real end, the last window ends at the last ``step()``, and a completed
attempt's shutdown names what it waited for (``ett.shutdown.<step>``)."""

from __future__ import annotations

import concurrent.futures
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from ett import semconv
from ett._persist import DEFAULT_PERSIST_WAIT_S, resolve_persist_wait

if TYPE_CHECKING:
    from conftest import Recorder

PERSIST_WAIT = semconv.shutdown_span_name(semconv.ShutdownStepValues.PERSIST_WAIT)
EXPORTER_FLUSH = semconv.shutdown_span_name(semconv.ShutdownStepValues.EXPORTER_FLUSH)
PG_TEARDOWN = semconv.shutdown_span_name(semconv.ShutdownStepValues.PG_TEARDOWN)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def complete_later(future: concurrent.futures.Future[None], delay_s: float) -> list[int]:
    """Complete ``future`` from another thread after ``delay_s``; the list gets the instant."""
    done_at: list[int] = []

    def run() -> None:
        time.sleep(delay_s)
        done_at.append(time.time_ns())
        future.set_result(None)

    threading.Thread(target=run, daemon=True).start()
    return done_at


def async_save_in_flight(recorder: Recorder, step: int) -> concurrent.futures.Future[None]:
    sess = recorder.session
    assert sess is not None
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    with sess.checkpoint_save(step, mode="async") as ck:
        ck.persist(future)
    return future


@pytest.mark.parametrize("ending", ["end", "fail", "preempted"])
def test_a_persist_in_flight_at_the_end_is_emitted_with_its_real_end(
    recorder: Recorder, ending: str
) -> None:
    sess = recorder.start()
    future = async_save_in_flight(recorder, 400)
    done_at = complete_later(future, 0.3)
    called = time.time_ns()
    if ending == "end":
        sess.end()
    elif ending == "fail":
        sess.fail(RuntimeError("rank 1 raised right after an async save"))
    else:
        sess.end("preempted")
    persist = recorder.one(semconv.SPAN_CHECKPOINT_PERSIST)
    assert attrs(persist)[semconv.CHECKPOINT_STEP] == 400
    assert persist.end_time is not None and done_at
    assert done_at[0] <= persist.end_time < done_at[0] + 50_000_000  # its real end
    wait = recorder.one(PERSIST_WAIT)
    assert attrs(wait)[semconv.COMPONENT] == "checkpoint"
    assert wait.start_time is not None and wait.end_time is not None
    assert called <= wait.start_time and wait.end_time >= persist.end_time
    attempt = recorder.one(semconv.SPAN_ATTEMPT)
    assert attempt.end_time is not None and attempt.end_time >= persist.end_time


def test_the_wait_is_bounded_and_a_persist_that_never_completes_is_not_emitted(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETT_PERSIST_WAIT_S", "0.2")
    sess = recorder.start()
    async_save_in_flight(recorder, 7)  # never completes
    sess.fail(RuntimeError("boom"))
    assert recorder.named(semconv.SPAN_CHECKPOINT_PERSIST) == []
    wait = recorder.one(PERSIST_WAIT)
    assert wait.start_time is not None and wait.end_time is not None
    waited_s = (wait.end_time - wait.start_time) / 1e9
    assert 0.2 <= waited_s < DEFAULT_PERSIST_WAIT_S  # the configured bound, not the default


def test_no_persist_in_flight_means_no_wait_span(recorder: Recorder) -> None:
    sess = recorder.start()
    future = async_save_in_flight(recorder, 3)
    future.set_result(None)
    sess.end()
    assert len(recorder.named(semconv.SPAN_CHECKPOINT_PERSIST)) == 1
    assert recorder.named(PERSIST_WAIT) == []


def test_persist_wait_setting() -> None:
    assert resolve_persist_wait(env={}) == DEFAULT_PERSIST_WAIT_S
    assert resolve_persist_wait(env={"ETT_PERSIST_WAIT_S": "2.5"}) == 2.5
    assert resolve_persist_wait(env={"ETT_PERSIST_WAIT_S": "0"}) == 0.0
    assert resolve_persist_wait(env={"ETT_PERSIST_WAIT_S": "soon"}) == DEFAULT_PERSIST_WAIT_S
    assert resolve_persist_wait(1.5, env={"ETT_PERSIST_WAIT_S": "9"}) == 1.5


def test_the_last_window_ends_at_the_last_step_not_at_the_next_poll(recorder: Recorder) -> None:
    sess = recorder.start(window_s=10.0)  # the window thread polls once a second
    sess.first_batch(step=0)
    for _ in range(5):
        time.sleep(0.01)
        sess.step(samples=4)
    before = time.time_ns()
    sess.step(samples=4)
    after = time.time_ns()
    time.sleep(0.3)  # a tail after the loop: not training
    sess.end()
    windows = sorted(recorder.named(semconv.SPAN_TRAIN_WINDOW), key=lambda s: s.start_time)
    last = windows[-1]
    assert attrs(last)[semconv.STEP_LAST] == 5
    assert last.end_time is not None and before <= last.end_time <= after
    attempt = recorder.one(semconv.SPAN_ATTEMPT)
    assert attempt.end_time is not None and attempt.end_time - last.end_time >= 300_000_000


def test_every_window_ends_at_a_step_instant_to_within_one_step(recorder: Recorder) -> None:
    sess = recorder.start(window_s=0.1)
    sess.first_batch(step=0)
    instants = []
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        time.sleep(0.005)
        sess.step()
        instants.append(time.time_ns())
    sess.end()
    windows = recorder.named(semconv.SPAN_TRAIN_WINDOW)
    assert len(windows) >= 2
    for window in windows:
        last = attrs(window)[semconv.STEP_LAST]
        assert window.end_time is not None
        # a step instant, to within one step (the poll may land between a step's clock read
        # and its count), never a poll's own instant in between
        before = instants[last - 1] if last > 0 else 0
        after = instants[min(last + 1, len(instants) - 1)]
        assert before <= window.end_time <= after


def test_a_completed_shutdown_names_teardown_and_exporter_flush(recorder: Recorder) -> None:
    sess = recorder.start()
    sess.first_batch()
    sess.step()
    with sess.shutdown(semconv.ShutdownStepValues.PG_TEARDOWN):
        time.sleep(0.05)
    with sess.shutdown("drain_queue", component="data"):
        pass
    sess.end()
    teardown = recorder.one(PG_TEARDOWN)
    assert attrs(teardown)[semconv.COMPONENT] == "comms"
    assert attrs(recorder.one("ett.shutdown.drain_queue"))[semconv.COMPONENT] == "data"
    flush = recorder.one(EXPORTER_FLUSH)
    assert attrs(flush)[semconv.COMPONENT] == "runtime"
    attempt = recorder.one(semconv.SPAN_ATTEMPT)
    assert flush.end_time is not None and attempt.end_time is not None
    assert teardown.end_time is not None and teardown.end_time <= flush.start_time
    assert flush.end_time <= attempt.end_time


def test_a_failed_end_has_no_exporter_flush_span(recorder: Recorder) -> None:
    recorder.start().end("failed", "oom")
    assert recorder.named(EXPORTER_FLUSH) == []
