"""The compile tracker waits for dynamo's late metrics record, without torch: the record list
and the timers are fakes driven by the test, so the order of events is the test's choice."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pytest

from ett import _compile, semconv
from ett._session import span_sink

if TYPE_CHECKING:
    from conftest import Recorder


class Timers:
    """``threading.Timer`` stand-in: armed timers wait in a list until the test fires them."""

    def __init__(self) -> None:
        self.armed: list[tuple[float, Any, tuple[Any, ...]]] = []

    def __call__(self, delay: float, fn: Any, args: tuple[Any, ...] = ()) -> Any:
        armed = self.armed
        return SimpleNamespace(daemon=False, start=lambda: armed.append((delay, fn, args)))

    def fire(self) -> float:
        delay, fn, args = self.armed.pop(0)
        fn(*args)
        return delay


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Any], Timers]:
    records: list[Any] = []
    timers = Timers()
    monkeypatch.setattr(_compile, "_metrics", lambda: list(records))
    monkeypatch.setattr(_compile.threading, "Timer", timers)
    return records, timers


def frame() -> Any:
    return SimpleNamespace(frame_key="f", inductor_fx_local_cache_hit_count=1)


def test_a_late_record_is_waited_for(recorder: Recorder, fakes: Any) -> None:
    records, timers = fakes
    tracker = _compile.CompileTracker(span_sink(recorder.start()))
    records.append(frame())  # an earlier compilation's record: not this one's
    tracker.on_start(None)
    tracker.on_end(None)
    assert timers.fire() == _compile._FINALIZE_DELAY_S  # no record yet: looks again, later
    assert timers.fire() == 2 * _compile._FINALIZE_DELAY_S
    assert recorder.named(semconv.SPAN_COMPILE) == []
    records.append(frame())
    timers.fire()
    assert timers.armed == []
    (span,) = recorder.named(semconv.SPAN_COMPILE)
    assert dict(span.attributes or {})[semconv.COMPILE_FRAMES] == 1
    assert dict(span.attributes or {})[semconv.COMPILE_CACHE] == "hit"


def test_patience_runs_out_and_the_span_still_ends(recorder: Recorder, fakes: Any) -> None:
    _, timers = fakes
    tracker = _compile.CompileTracker(span_sink(recorder.start()))
    tracker.on_start(None)
    tracker.on_end(None)
    waited = 0.0
    while timers.armed:
        waited += timers.fire()
    assert waited == pytest.approx(_compile._FINALIZE_PATIENCE_S)
    (span,) = recorder.named(semconv.SPAN_COMPILE)
    assert dict(span.attributes or {})[semconv.COMPILE_FRAMES] == 0


def test_a_stale_timer_leaves_the_next_compilation_alone(recorder: Recorder, fakes: Any) -> None:
    records, timers = fakes
    tracker = _compile.CompileTracker(span_sink(recorder.start()))
    tracker.on_start(None)
    tracker.on_end(None)
    records.append(frame())
    tracker.on_start(None)  # the next compilation ends the first span itself
    assert len(recorder.named(semconv.SPAN_COMPILE)) == 1
    tracker.on_end(None)
    timers.fire()  # the first span's timer: nothing of its own is pending
    assert len(recorder.named(semconv.SPAN_COMPILE)) == 1
    records.append(frame())
    timers.fire()
    first, second = sorted(recorder.named(semconv.SPAN_COMPILE), key=lambda s: s.start_time)
    assert dict(first.attributes or {})[semconv.COMPILE_FRAMES] == 1
    assert dict(second.attributes or {})[semconv.COMPILE_FRAMES] == 1
