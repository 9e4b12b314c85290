"""A real `ett serve --token` refuses a wrong token (401) and a wrong path (404): the library
says so once, naming the setting to fix, and does not retry what cannot succeed (issue 17)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import ett
from ett import _errors
from tests.support.collector_process import Collector, start_collector

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    c = start_collector(tmp_path_factory.mktemp("refusals") / "home", token="right")
    yield c
    c.stop()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ETT_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ETT_EXIT_TIMEOUT_S", "0")
    monkeypatch.setattr(_errors, "_seen", set())


def refused_requests(collector: Collector, code: str) -> float:
    text = collector.get("/metrics").text
    match = re.search(rf'^ett_ingest_requests_total{{code="{code}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def said(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and text in r.getMessage()
    ]


def test_wrong_token_is_named_once_and_not_retried(
    collector: Collector, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETT_TOKEN", "wrong")
    before = refused_requests(collector, "401")
    sess = ett.init(job_id="refused-token", endpoint=collector.url, install_handlers=False)
    with sess.eval():
        pass
    sess.flush(60.0)  # returns once the export is answered; the bound is for a loaded machine
    assert sess.dropped_spans >= 1  # dropped at once, not queued again
    # a retried batch would come back after the 1 s back-off: wait past two of them
    time.sleep(2.5)
    assert refused_requests(collector, "401") == before + 1
    sess.end()
    warnings = said(caplog, "HTTP 401")
    assert len(warnings) == 1 and "ETT_TOKEN" in warnings[0] and collector.url in warnings[0]
    assert collector.get("/api/v1/jobs/refused-token").status_code == 404


def test_right_token_is_taken(collector: Collector, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20right")
    sess = ett.init(job_id="taken-token", endpoint=collector.url, install_handlers=False)
    sess.end()
    assert sess.dropped_spans == 0
    collector.wait_computed()
    assert collector.job("taken-token")["job_id"] == "taken-token"


def test_wrong_path_is_named_once(
    collector: Collector, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    sess = ett.init(
        job_id="refused-path",
        endpoint=collector.url + "/v1/trace",  # a typo: no such route
        token="right",
        install_handlers=False,
    )
    sess.flush(60.0)  # returns once the export is answered; the bound is for a loaded machine
    sess.end()
    assert sess.dropped_spans >= 1
    warnings = said(caplog, "HTTP 404")
    assert len(warnings) == 1 and "OTEL_EXPORTER_OTLP_ENDPOINT" in warnings[0]


def test_spans_the_collector_rejects_are_said_once_and_counted(
    collector: Collector, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OTLP partial success: the collector took the batch but rejected some of its spans (here
    windows with a NaN sample count, which JSON and jsonb cannot hold). The library read only
    the status code, so the loss went unsaid and uncounted."""
    monkeypatch.setenv("ETT_TOKEN", "right")
    sess = ett.init(job_id="partly-rejected", endpoint=collector.url, install_handlers=False)
    now = time.time_ns()
    for i in range(3):
        attrs = {"ett.step.first": i, "ett.step.last": i, "ett.samples": float("nan")}
        sess._spans.instant("ett.train.window", attrs, now - 10**9, now)
    sess.flush(60.0)
    assert sess.dropped_spans == 3
    with sess.eval():  # a batch with nothing rejected adds nothing
        pass
    sess.flush(60.0)
    assert sess.dropped_spans == 3
    lines = said(caplog, "rejected")
    assert len(lines) == 1, lines
    assert "rejected 3 span(s)" in lines[0] and "ett.samples" in lines[0]
    sess.end()
