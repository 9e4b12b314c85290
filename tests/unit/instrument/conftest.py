"""Fixtures for the instrument tests: sessions that export into memory, and a clean slate."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ett
from ett import _setup


@pytest.fixture(autouse=True)
def _no_global_session(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts without an active session and without identity from the environment."""
    for name in (
        "ETT_JOB_ID",
        "ETT_MODEL",
        "ETT_TEAM",
        "ETT_ATTEMPT",
        "ETT_ALLOCATED_AT",
        "ETT_DISABLED",
        "OTEL_SDK_DISABLED",
        "OTEL_TRACES_EXPORTER",
        "ETT_FLUSH_TIMEOUT_S",
        "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_RUN_ID",
        "SLURM_JOB_ID",
        "RANK",
        "WORLD_SIZE",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_SERVICE_NAME",
    ):
        monkeypatch.delenv(name, raising=False)
    # a failed end arms the exit watchdog, which would end pytest itself: tests that want it
    # pass exit_timeout_s or run a child process
    monkeypatch.setenv("ETT_EXIT_TIMEOUT_S", "0")
    _setup._current = None
    yield
    session = _setup._current
    if session is not None and not session.ended:
        session.end()
    _setup._current = None


class Recorder:
    """A session whose spans go through the library's own pipeline into memory."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.session: ett.Session | None = None

    def start(self, **kwargs: Any) -> ett.Session:
        defaults: dict[str, Any] = {
            "job_id": "job-1",
            "model": "dlrm",
            "team": "ranking",
            "rank": 0,
            "world_size": 1,
            "install_handlers": False,
        }
        defaults.update(kwargs)
        self.session = ett.init(exporter=self.exporter, **defaults)
        return self.session

    def spans(self) -> list[ReadableSpan]:
        """Spans exported so far (flushing the session's queue first)."""
        if self.session is not None and not self.session.ended:
            self.session.flush(5.0)
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{name}: {len(found)} spans"
        return found[0]


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
def attrs() -> Callable[[ReadableSpan], dict[str, Any]]:
    return lambda span: dict(span.attributes or {})
