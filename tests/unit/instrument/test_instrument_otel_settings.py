"""OpenTelemetry's settings, honoured or refused aloud (issue 17): each test sets what a user
would set and looks at what reaches a collector stand-in (tests.support.otlp_receiver)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

import ett
from ett import _errors, semconv
from ett._config import env_disabled, resolve_flush_timeout, resolve_headers
from tests.support.otlp_receiver import OtlpReceiver
from tests.support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
_SETTINGS = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "ETT_TOKEN",
    "ETT_FLUSH_TIMEOUT_S",
)


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No setting from the outside, and every one-time warning fresh."""
    for name in _SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_errors, "_seen", set())
    yield


def start(url: str, **kwargs: object) -> ett.Session:
    return ett.init(job_id="j", endpoint=url, install_handlers=False, **kwargs)  # type: ignore[arg-type]


def span_names(rx: OtlpReceiver) -> list[str]:
    names = []
    for request in rx.requests:
        message = ExportTraceServiceRequest.FromString(request.body)
        for rs in message.resource_spans:
            for ss in rs.scope_spans:
                names.extend(span.name for span in ss.spans)
    return names


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def test_otel_sdk_disabled_disables_the_session(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env_disabled({"OTEL_SDK_DISABLED": "TRUE"})
    assert not env_disabled({"OTEL_SDK_DISABLED": "false"})
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    ran = []
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        assert not sess.enabled
        with sess.eval():
            ran.append(1)  # training is unaffected
        sess.step()
        sess.end()
    assert ran == [1]
    assert rx.requests == []


def test_traces_exporter_none_sends_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        with sess.eval():
            pass
        sess.end()
    assert not sess.enabled
    assert rx.requests == []
    assert any("OTEL_TRACES_EXPORTER=none" in w for w in warnings(caplog))


def test_traces_exporter_console_prints_the_spans(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        with sess.eval():
            pass
        sess.end()
    assert rx.requests == []
    out = capfd.readouterr().out
    assert semconv.SPAN_EVAL in out and semconv.SPAN_ATTEMPT in out


def test_another_exporter_is_refused_aloud_and_otlp_used(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        sess.end()
    assert semconv.SPAN_ATTEMPT in span_names(rx)
    assert any("zipkin" in w for w in warnings(caplog))


@pytest.mark.parametrize(
    "variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"]
)
@pytest.mark.parametrize("protocol", ["grpc", "http/json", "http/protobuf"])
def test_protocol_other_than_http_protobuf_is_refused_aloud(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variable: str,
    protocol: str,
) -> None:
    monkeypatch.setenv(variable, protocol)
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        sess.end()
    assert semconv.SPAN_ATTEMPT in span_names(rx)
    assert {r.headers["content-type"] for r in rx.requests} == {"application/x-protobuf"}
    refused = [w for w in warnings(caplog) if variable in w]
    if protocol == "http/protobuf":
        assert refused == []
    else:
        assert len(refused) == 1 and protocol in refused[0] and "http/protobuf" in refused[0]


@pytest.mark.parametrize(
    ("status", "names"),
    [
        (401, "ETT_TOKEN"),
        (403, "ETT_TOKEN"),
        (404, "OTEL_EXPORTER_OTLP_ENDPOINT"),
        (400, "does not retry"),
    ],
)
def test_a_final_refusal_is_named_once_and_not_retried(
    caplog: pytest.LogCaptureFixture, status: int, names: str
) -> None:
    with OtlpReceiver(status=status) as rx:
        sess = start(rx.url)
        sess.flush(3.0)  # what init() emits
        requests, dropped = len(rx.requests), sess.dropped_spans
        for n in (1, 2):
            with sess.eval():
                pass
            sess.flush(3.0)
            assert len(rx.requests) == requests + n
            assert sess.dropped_spans == dropped + n  # dropped at once, not put back for a retry
        sess.end()
    said = [w for w in warnings(caplog) if f"HTTP {status}" in w]
    assert len(said) == 1, said
    assert names in said[0] and rx.url in said[0]
    assert not any("retrying" in w for w in warnings(caplog))


def test_a_retryable_status_is_retried(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "0.5")  # the SDK's own retry: short
    with OtlpReceiver(status=503) as rx:
        sess = start(rx.url)
        with sess.eval():
            pass
        sess.flush(1.0)
        assert sess.dropped_spans == 0
        assert rx.requests
        rx.status = 200
        sess.flush(5.0)
        assert semconv.SPAN_EVAL in span_names(rx)
        sess.end()
    assert sess.dropped_spans == 0
    assert any("HTTP 503" in w and "retrying" in w for w in warnings(caplog))


def test_headers_precedence() -> None:
    both = {"ETT_TOKEN": "new", "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=a%20b,Authorization=x"}
    assert resolve_headers(env=both) == {"x-tenant": "a b", "authorization": "Bearer new"}
    assert resolve_headers("arg", env=both)["authorization"] == "Bearer arg"
    only_otel = {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20old"}
    assert resolve_headers(env=only_otel) == {"authorization": "Bearer old"}
    traces = {**only_otel, "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%20t"}
    assert resolve_headers(env=traces) == {"authorization": "Bearer t"}
    assert resolve_headers(env={"OTEL_EXPORTER_OTLP_HEADERS": "bad,k=v"}) == {"k": "v"}


def test_ett_token_beats_otlp_headers_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=a,authorization=Bearer%20old")
    monkeypatch.setenv("ETT_TOKEN", "new")
    with OtlpReceiver() as rx:
        sess = start(rx.url)
        sess.end()
    assert rx.requests
    assert {r.headers["authorization"] for r in rx.requests} == {"Bearer new"}
    assert {r.headers["x-tenant"] for r in rx.requests} == {"a"}
    assert any("ETT_TOKEN" in w and "OTEL_EXPORTER_OTLP_HEADERS" in w for w in warnings(caplog))


def test_a_global_provider_that_samples_drops_no_ett_span() -> None:
    """A program whose global provider samples nothing: ETT's spans still reach the endpoint of
    OTEL_EXPORTER_OTLP_ENDPOINT (a child process: the global provider is set once per process)."""
    code = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
        trace.set_tracer_provider(TracerProvider(sampler=ALWAYS_OFF))
        import ett
        sess = ett.init(job_id="g", install_handlers=False)
        with sess.eval():
            pass
        sess.end()
        """
    )
    with OtlpReceiver() as rx:
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "ETT_EXIT_TIMEOUT_S": "0"}
        for name in _SETTINGS:
            env.pop(name, None)
        run = subprocess.run(
            [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
        )
    assert run.returncode == 0, run.stderr
    assert {semconv.SPAN_EVAL, semconv.SPAN_ATTEMPT} <= set(span_names(rx))
    assert "global TracerProvider" in run.stderr


def test_a_given_provider_that_samples_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=TraceIdRatioBased(0.5))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sess = ett.init(job_id="s", tracer_provider=provider, install_handlers=False)
    sess.end()
    assert any("TraceIdRatioBased" in w and "always-on" in w for w in warnings(caplog))


def test_flush_timeout_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert resolve_flush_timeout(env={}) == 5.0
    assert resolve_flush_timeout(env={"ETT_FLUSH_TIMEOUT_S": "1.5"}) == 1.5
    assert resolve_flush_timeout(2.0, env={"ETT_FLUSH_TIMEOUT_S": "1.5"}) == 2.0
    assert resolve_flush_timeout(env={"ETT_FLUSH_TIMEOUT_S": "soon"}) == 5.0


_EXIT_CHILD = textwrap.dedent(
    """
    import sys, time
    import ett
    sess = ett.init(job_id="x", install_handlers=True)
    with sess.eval():
        pass
    print(time.time(), flush=True)
    """
)


def exit_seconds(endpoint: str, flush_timeout_s: float) -> float:
    """Seconds from the end of the child's program to the end of its process (the atexit end
    flushes), the endpoint being dead or silent."""
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "ETT_FLUSH_TIMEOUT_S": str(flush_timeout_s),
        "ETT_EXIT_TIMEOUT_S": "0",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", _EXIT_CHILD], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    ended_program = float(child.stdout.readline())
    assert child.wait(timeout=60) == 0
    return time.time() - ended_program


def test_exit_with_a_dead_collector_waits_at_most_half_a_second_more() -> None:
    waited = exit_seconds(f"http://127.0.0.1:{free_port()}", flush_timeout_s=5.0)
    assert waited < 0.5 + 2.0, waited  # the bound + 2 s of margin (without the cap: 5 s)


def test_exit_with_a_silent_collector_honours_the_flush_bound() -> None:
    import socket

    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        waited = exit_seconds(f"http://127.0.0.1:{silent.getsockname()[1]}", 1.0)
    # end() flushes twice (ett.shutdown.exporter_flush, then the attempt span): the first waits
    # the bound, then the collector counts as unreachable and the second waits at most 0.5 s
    assert waited < 1.0 + 0.5 + 2.0, waited
