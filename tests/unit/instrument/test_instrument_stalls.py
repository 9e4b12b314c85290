"""Data stalls (``sess.data_wait()``, ``sess.batches()``) and user-named blocking events
(``sess.blocking()``) through the public API, into memory."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from opentelemetry.trace import StatusCode

import ett
from ett import semconv

if TYPE_CHECKING:
    from conftest import Recorder


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


def _loader(delays: list[float]) -> Iterator[int]:
    for i, delay in enumerate(delays):
        time.sleep(delay)
        yield i


def test_batches_yields_every_item_and_times_a_stall(recorder: Recorder) -> None:
    sess = recorder.start()

    got = list(sess.batches(_loader([0.0, 0.03, 0.0])))

    assert got == [0, 1, 2]
    waits = recorder.named(semconv.SPAN_DATA_WAIT)  # the others only on a very busy machine
    slept = [w for w in waits if w.end_time - w.start_time >= 30_000_000]  # the 30 ms sleep
    assert len(slept) == 1
    assert all(attrs(w) == {semconv.COMPONENT: "data"} for w in waits)


def test_a_wait_shorter_than_the_threshold_costs_no_span(recorder: Recorder) -> None:
    sess = recorder.start()

    assert list(sess.batches(range(100), min_s=60.0)) == list(range(100))
    with sess.data_wait(min_s=60.0):
        pass

    assert recorder.named(semconv.SPAN_DATA_WAIT) == []


def test_data_wait_emits_every_wait_at_or_above_min_s(recorder: Recorder) -> None:
    sess = recorder.start()
    items = iter(range(3))

    for _ in range(3):
        with sess.data_wait(min_s=0.0):
            next(items)

    assert len(recorder.named(semconv.SPAN_DATA_WAIT)) == 3


def test_a_loader_error_propagates_and_is_recorded_on_its_wait(recorder: Recorder) -> None:
    sess = recorder.start()

    def broken() -> Iterator[int]:
        yield 1
        raise OSError("shard unreadable")

    with pytest.raises(OSError, match="shard unreadable"):
        for _ in sess.batches(broken(), min_s=0.0):
            pass

    last = recorder.named(semconv.SPAN_DATA_WAIT)[-1]
    assert last.status.status_code == StatusCode.ERROR


def test_blocking_names_the_event_and_its_component(recorder: Recorder) -> None:
    sess = recorder.start()

    with sess.blocking("sdc_check", component="model"):
        pass

    span = recorder.one(semconv.SPAN_BLOCKING)
    assert attrs(span) == {semconv.BLOCKING_NAME: "sdc_check", semconv.COMPONENT: "model"}


def test_blocking_defaults_to_other_and_works_as_a_decorator(recorder: Recorder) -> None:
    sess = recorder.start()

    @sess.blocking("health_probe")
    def probe() -> str:
        return "ok"

    assert probe() == probe() == "ok"
    spans = recorder.named(semconv.SPAN_BLOCKING)
    assert [attrs(s)[semconv.COMPONENT] for s in spans] == ["other", "other"]


def test_blocking_with_an_unknown_component_keeps_it_and_warns(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    sess = recorder.start()

    with (
        caplog.at_level(logging.WARNING, logger=ett.LOGGER_NAME),
        sess.blocking("sdc_check", component="sdc"),
    ):
        pass

    assert attrs(recorder.one(semconv.SPAN_BLOCKING))[semconv.COMPONENT] == "sdc"
    assert "charges this event to 'other'" in caplog.text


def test_an_error_in_a_blocking_event_propagates(recorder: Recorder) -> None:
    sess = recorder.start()

    with pytest.raises(ValueError, match="bad"), sess.blocking("sdc_check", component="model"):
        raise ValueError("bad")

    assert recorder.one(semconv.SPAN_BLOCKING).status.status_code == StatusCode.ERROR


def test_a_disabled_session_still_yields_and_records_nothing(recorder: Recorder) -> None:
    sess = recorder.start(enabled=False)

    assert list(sess.batches(_loader([0.0, 0.01]), min_s=0.0)) == [0, 1]
    with sess.blocking("sdc_check"):
        pass

    assert recorder.spans() == []
