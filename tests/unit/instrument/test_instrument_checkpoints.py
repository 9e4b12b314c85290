"""Checkpoint spans: the blocking save, the asynchronous persist (from a future), the load."""

from __future__ import annotations

import concurrent.futures
import time
from typing import TYPE_CHECKING, Any

from ett import semconv

if TYPE_CHECKING:
    from conftest import Recorder


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def test_checkpoint_save_sync(recorder: Recorder) -> None:
    sess = recorder.start()
    with sess.checkpoint_save(100, nbytes=4096):
        time.sleep(0.01)
    with sess.checkpoint_save(200) as ck:
        ck.set_bytes(10)
    sess.end()
    saves = sorted(recorder.named(semconv.SPAN_CHECKPOINT_SAVE), key=lambda s: s.start_time)
    assert [attrs(s)[semconv.CHECKPOINT_STEP] for s in saves] == [100, 200]
    assert attrs(saves[0])[semconv.CHECKPOINT_MODE] == "sync"
    assert attrs(saves[0])[semconv.CHECKPOINT_BYTES] == 4096
    assert attrs(saves[1])[semconv.CHECKPOINT_BYTES] == 10
    assert recorder.named(semconv.SPAN_CHECKPOINT_PERSIST) == []


def test_checkpoint_async_persist_ends_when_the_future_completes(recorder: Recorder) -> None:
    sess = recorder.start()
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    with sess.checkpoint_save(300, mode="async") as ck:
        ck.persist(future)
    time.sleep(0.05)  # elapsed time, not a wait: a persist span ended early would be out by now
    assert recorder.named(semconv.SPAN_CHECKPOINT_PERSIST) == []
    future.set_result(None)
    done = time.time_ns()
    sess.end()
    save = recorder.one(semconv.SPAN_CHECKPOINT_SAVE)
    persist = recorder.one(semconv.SPAN_CHECKPOINT_PERSIST)
    assert attrs(save)[semconv.CHECKPOINT_MODE] == "async"
    assert attrs(persist)[semconv.CHECKPOINT_STEP] == 300
    assert persist.start_time == save.start_time
    assert save.end_time < persist.end_time <= done


class ThenOnlyFuture:
    """A future with only ``then`` (like some torch futures)."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def then(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def value(self) -> None:
        return None

    def complete(self) -> None:
        for callback in self.callbacks:
            callback(self)


class Response:
    """Shaped like DCP's ``AsyncSaveResponse``."""

    def __init__(self) -> None:
        self.staging_completion: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.upload_completion: concurrent.futures.Future[None] = concurrent.futures.Future()


def test_checkpoint_persist_accepts_then_futures_and_save_responses(recorder: Recorder) -> None:
    sess = recorder.start()
    with sess.checkpoint_save(1, mode="async"):
        pass
    then_future = ThenOnlyFuture()
    sess.checkpoint_persist(1, then_future)
    response = Response()
    with sess.checkpoint_save(2, mode="async") as ck:
        ck.persist(response)
    response.staging_completion.set_result(None)
    assert recorder.named(semconv.SPAN_CHECKPOINT_PERSIST) == []
    then_future.complete()
    response.upload_completion.set_result(None)
    sess.end()
    persists = recorder.named(semconv.SPAN_CHECKPOINT_PERSIST)
    assert sorted(attrs(p)[semconv.CHECKPOINT_STEP] for p in persists) == [1, 2]
    saves = {
        attrs(s)[semconv.CHECKPOINT_STEP]: s for s in recorder.named(semconv.SPAN_CHECKPOINT_SAVE)
    }
    for persist in persists:
        assert persist.start_time == saves[attrs(persist)[semconv.CHECKPOINT_STEP]].start_time


def test_failed_persist_emits_no_persist_span(recorder: Recorder) -> None:
    sess = recorder.start()
    future: concurrent.futures.Future[None] = concurrent.futures.Future()
    with sess.checkpoint_save(5, mode="async") as ck:
        ck.persist(future)
    future.set_exception(OSError("disk full"))
    sess.checkpoint_persist(6, object())  # not a future: logged, ignored
    sess.end()
    assert recorder.named(semconv.SPAN_CHECKPOINT_PERSIST) == []


class LateCallbackFuture:
    """Done, but its callbacks have not run yet (as right after ``Future.set_result`` wakes the
    waiting thread, before the setter thread runs the callbacks)."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def add_done_callback(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def done(self) -> bool:
        return True

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return None


def test_end_finishes_a_persist_whose_callback_is_late(recorder: Recorder) -> None:
    sess = recorder.start()
    future = LateCallbackFuture()
    with sess.checkpoint_save(7, mode="async") as ck:
        ck.persist(future)
    sess.end()
    for callback in future.callbacks:  # the late callback changes nothing
        callback(future)
    assert attrs(recorder.one(semconv.SPAN_CHECKPOINT_PERSIST))[semconv.CHECKPOINT_STEP] == 7
    attempt = recorder.one(semconv.SPAN_ATTEMPT)
    assert recorder.one(semconv.SPAN_CHECKPOINT_PERSIST).end_time <= attempt.end_time
