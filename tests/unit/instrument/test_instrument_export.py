"""The export queue: bounded, off the training thread, drops counted; a dead collector costs
the loop nothing."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

import ett
from ett import semconv
from ett._export import ExportQueue
from tests.support.ports import free_port
from tests.support.waits import wait_until


class BlockingExporter(SpanExporter):
    """Holds every export until released; records what it got."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.release = threading.Event()
        self.result = result
        self.spans: list[ReadableSpan] = []
        self.threads: set[str] = set()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.threads.add(threading.current_thread().name)
        self.release.wait(10)
        self.spans.extend(spans)
        return self.result


def test_full_queue_drops_newest_and_counts() -> None:
    exporter = BlockingExporter()
    sess = ett.init(job_id="j", exporter=exporter, max_queue_size=5, install_handlers=False)
    for step in range(50):
        with sess.checkpoint_save(step):
            pass
    assert sess.dropped_spans >= 40
    exporter.release.set()
    sess.end()
    steps = [
        dict(s.attributes or {})[semconv.CHECKPOINT_STEP]
        for s in exporter.spans
        if s.name == semconv.SPAN_CHECKPOINT_SAVE
    ]
    assert steps == sorted(steps)
    assert steps[0] == 0  # the oldest spans are kept
    attempt = next(s for s in exporter.spans if s.name == semconv.SPAN_ATTEMPT)
    assert dict(attempt.attributes or {})[semconv.TELEMETRY_DROPPED_SPANS] >= 40
    assert exporter.threads == {"ett-export"}


class FlakyExporter(SpanExporter):
    """Fails the first ``failures`` exports (a collector that is down), then takes everything."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.names: list[str] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        if self.calls <= self.failures:
            return SpanExportResult.FAILURE
        self.names.extend(s.name for s in spans)
        return SpanExportResult.SUCCESS


def pipeline(exporter: SpanExporter, **kwargs: Any) -> tuple[ExportQueue, Any]:
    queue = ExportQueue(exporter, schedule_delay_s=0.01, min_backoff_s=0.05, **kwargs)
    provider = TracerProvider()
    provider.add_span_processor(queue)
    return queue, provider.get_tracer("t")


def test_undelivered_batches_are_retried_in_order() -> None:
    exporter = FlakyExporter(failures=3)
    queue, tracer = pipeline(exporter)
    for i in range(5):
        tracer.start_span(f"s{i}").end()
    wait_until(lambda: len(exporter.names) >= 5, 5, "5 spans delivered", interval=0.01)
    assert exporter.names == [f"s{i}" for i in range(5)]
    assert exporter.calls == 4
    assert queue.dropped == 0
    queue.shutdown(1000)


def test_a_batch_failing_past_its_budget_is_dropped() -> None:
    exporter = FlakyExporter(failures=10**9)
    queue, tracer = pipeline(exporter, retry_budget_s=0.1)
    for i in range(3):
        tracer.start_span(f"s{i}").end()
    wait_until(lambda: queue.dropped >= 3, 5, "3 spans dropped", interval=0.01)
    assert queue.dropped == 3
    queue.shutdown(1000)


def test_shutdown_counts_what_was_not_delivered() -> None:
    exporter = FlakyExporter(failures=10**9)
    queue, tracer = pipeline(exporter)
    for i in range(4):
        tracer.start_span(f"s{i}").end()
    assert queue.force_flush(500) is False
    queue.shutdown(200)
    assert queue.dropped == 4


def test_flush_and_end_honour_their_timeout() -> None:
    exporter = BlockingExporter()  # a collector that never answers
    sess = ett.init(job_id="j", exporter=exporter, install_handlers=False, flush_timeout_s=0.3)
    with sess.eval():
        pass
    start = time.monotonic()
    sess.flush(0.2)
    sess.end()
    assert time.monotonic() - start < 2.0
    exporter.release.set()


def test_end_waits_one_flush_bound_for_a_collector_that_never_answers(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector that takes the connection and never answers (overloaded, wedged) held the
    end of every rank for flush_timeout_s + 1 s: a completed end flushes twice, and the second
    flush and the shutdown waited on their own. Both now share the one bound."""
    monkeypatch.setenv("ETT_SPOOL_DIR", str(tmp_path / "spool"))
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    threading.Thread(
        target=lambda: [held.append(server.accept()[0]) for _ in range(64)], daemon=True
    ).start()
    endpoint = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        sess = ett.init(job_id="j", endpoint=endpoint, install_handlers=False, flush_timeout_s=2.0)
        sess.first_batch()
        sess.step()
        start = time.monotonic()
        sess.end()
        took = time.monotonic() - start
    finally:
        server.close()
        for conn in held:
            conn.close()
    assert 1.9 <= took < 2.6, took  # 3.0 s before
    assert sess.dropped_spans == 0  # what was not delivered waits in the spool


def test_queue_counts_spans_ended_after_shutdown() -> None:
    exporter = BlockingExporter()
    exporter.release.set()
    queue = ExportQueue(exporter)
    provider = TracerProvider()
    provider.add_span_processor(queue)
    queue.shutdown(1000)
    assert queue.force_flush(100) is False
    provider.get_tracer("t").start_span("late").end()
    assert queue.dropped == 1
    assert exporter.spans == []


def test_dead_collector_costs_the_loop_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_SPOOL_DIR", "off")  # no spool: what is not delivered is dropped
    endpoint = f"http://127.0.0.1:{free_port()}"
    sess = ett.init(
        job_id="j", endpoint=endpoint, window_s=0.05, install_handlers=False, flush_timeout_s=1.0
    )
    sess.first_batch()
    n = 200_000
    start = time.perf_counter()
    for i in range(n):
        sess.step(samples=1)
        if i % 10_000 == 0:
            with sess.checkpoint_save(i):
                pass
        if i % 50_000 == 0:
            time.sleep(0.1)  # let windows and export attempts happen meanwhile
    per_step = (time.perf_counter() - start - 0.4) / n
    assert per_step < 5e-6  # ~0.1-0.3 µs normally: nothing waits for the collector
    t0 = time.monotonic()
    sess.end()
    assert time.monotonic() - t0 < 5.0  # a bounded exit although nothing can be delivered
    assert sess.dropped_spans > 0
    assert sess.steps == n


class RetryingExporter(SpanExporter):
    """An exporter inside its own retry loop: the first request got no answer (connection
    refused), then it sleeps its back-off until ``wake`` is set and asks again, answered
    ``answer`` (200: the collector is back)."""

    def __init__(self, status: Any, answer: int | None) -> None:
        self.status = status
        self.answer = answer
        self.asleep = threading.Event()
        self.wake = threading.Event()
        self.done = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.status.record(None)  # connection refused
        self.asleep.set()
        self.wake.wait(30)  # the exporter's own back-off
        self.status.record(self.answer)
        self.done.set()
        if self.answer == 200:
            self.spans.extend(spans)
            return SpanExportResult.SUCCESS
        return SpanExportResult.FAILURE


def _flush_during_the_back_off(
    endpoint: str, answer: int | None, back_off_s: float
) -> tuple[bool, bool, RetryingExporter]:
    """Flush while the export sleeps its back-off (``back_off_s`` from the flush): whether it
    delivered, and whether the retry had ended when it returned."""
    from ett._answers import HttpStatus

    status = HttpStatus()
    exporter = RetryingExporter(status, answer)
    queue = ExportQueue(exporter, status=status, endpoint=f"{endpoint}/v1/traces")
    provider = TracerProvider()
    provider.add_span_processor(queue)
    provider.get_tracer("t").start_span("backlog").end()
    queue.force_flush(0)  # the export starts now; its first request finds no collector
    assert exporter.asleep.wait(30)
    waker = threading.Timer(back_off_s, exporter.wake.set)
    waker.start()
    try:
        delivered = queue.force_flush(20_000)
        return delivered, exporter.done.is_set(), exporter
    finally:
        waker.cancel()
        exporter.wake.set()
        queue.shutdown(1000)


def test_a_flush_waits_for_a_collector_back_while_the_exporter_sleeps_its_retry() -> None:
    with socket.socket() as collector:  # restarted: it accepts connections again
        collector.bind(("127.0.0.1", 0))
        collector.listen(8)
        # the back-off ends after the cap of an unreachable collector (0.5 s) has passed: the
        # flush gave up then and the shutdown after it lost the backlog
        delivered, _, exporter = _flush_during_the_back_off(
            f"http://127.0.0.1:{collector.getsockname()[1]}", 200, back_off_s=1.0
        )
    assert delivered and [s.name for s in exporter.spans] == ["backlog"]


def test_a_flush_gives_up_on_a_collector_still_down_without_waiting_for_the_retry() -> None:
    delivered, retried, _ = _flush_during_the_back_off(
        f"http://127.0.0.1:{free_port()}", None, back_off_s=10.0
    )
    assert not delivered
    assert not retried  # it kept the 0.5 s cap: it did not wait 10 s for the exporter's retry
