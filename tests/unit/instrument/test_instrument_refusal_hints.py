"""A refused token is named as the library used it: the variable (or the token file's path) it
came from, the scoped write tokens a collector holds, and the collector's own reason.

The warning said ``set ETT_TOKEN ... (ett serve --token)`` whatever the trainer used (a token
file, a scoped collector), and ``ett-instrument flush`` with a read token (403, "this is a
read token") said "wrong or missing token"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from google.rpc.status_pb2 import Status

import ett
from ett import _errors
from ett._answers import refusal, refusal_reason
from ett._flush import flush_main
from ett._spool import SpoolWriter, batch_record
from tests.support.otlp_receiver import OtlpReceiver
from tests.unit.instrument.test_instrument_spool import _identity

WRONG = "wrong bearer token"
READ = "this is a read token; this route needs a write token"


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ETT_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_errors, "_seen", set())


def _status(message: str) -> bytes:
    return bytes(Status(code=16, message=message).SerializeToString())


def test_the_collectors_reason_is_read_from_its_answer() -> None:
    assert refusal_reason(_status(WRONG), "application/x-protobuf") == WRONG
    assert refusal_reason(b'{"code": 7, "message": "%s"}' % READ.encode(), "application/json") == (
        READ
    )
    assert refusal_reason(b"<h1>Forbidden</h1>\n", "text/html") == "<h1>Forbidden</h1>"
    assert refusal_reason(b"\xff\x00junk", "application/x-protobuf") == ""
    assert refusal_reason(b"", "application/json") == ""


def test_the_hint_names_the_token_used_and_scoped_write_tokens() -> None:
    url = "http://c:4318/v1/traces"
    by_file = refusal(url, 401, origin="ETT_TOKEN_FILE /etc/ett/write.token", reason=WRONG)
    assert "/etc/ett/write.token" in by_file and WRONG in by_file
    assert "--write-tokens" in by_file and "ETT_TOKEN_FILE" in by_file
    assert "no token was sent" in refusal(url, 401)
    read = refusal(url, 403, origin="ETT_TOKEN", reason=READ)
    assert READ in read and "the token from ETT_TOKEN" in read and "write token" in read


@pytest.mark.parametrize("spool", ["on", "off"])
def test_a_session_names_its_token_file_and_the_collectors_reason(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    spool: str,
) -> None:
    if spool == "off":
        monkeypatch.setenv("ETT_SPOOL_DIR", "off")
    caplog.set_level(logging.WARNING)
    token = tmp_path / "write.token"
    token.write_text("w-0123456789abcdef\n")
    monkeypatch.setenv("ETT_TOKEN_FILE", str(token))
    with OtlpReceiver(status=401, body=_status(WRONG)) as rx:
        sess = ett.init(job_id="j", endpoint=rx.url, install_handlers=False)
        sess.flush(5.0)
        sess.end()
    said = [r.getMessage() for r in caplog.records if "HTTP 401" in r.getMessage()]
    assert len(said) == 1, said
    assert f"ETT_TOKEN_FILE {token}" in said[0] and WRONG in said[0]
    assert "--write-tokens" in said[0] and "w-0123456789abcdef" not in said[0]


def test_flush_with_a_read_token_prints_the_collectors_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "spool"
    writer = SpoolWriter(root, _identity("left"))
    assert writer.append(batch_record(1, b"x"))
    writer.close()
    monkeypatch.setenv("ETT_TOKEN", "r-0123456789abcdef")
    with OtlpReceiver(status=403, body=_status(READ)) as rx:
        code = flush_main(["--spool-dir", str(root), "--endpoint", rx.url, "--timeout", "10"])
    err = capsys.readouterr().err
    assert code == 1
    assert "HTTP 403" in err and READ in err and "the token from ETT_TOKEN" in err
    assert "wrong or missing token" not in err and "r-0123456789abcdef" not in err
    assert list(root.glob("left/*.spool"))  # kept for a flush with a write token


def test_a_success_that_is_not_an_otlp_answer_is_recognised() -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    from ett._answers import not_otlp

    answer = ExportTraceServiceResponse().SerializeToString()
    assert not_otlp(answer, "application/x-protobuf") == ""
    assert not_otlp(b"", "application/x-protobuf") == ""
    assert not_otlp(b'{"partialSuccess": {}}', "application/json") == ""
    assert not_otlp(b"{}", "application/json; charset=utf-8") == ""
    html = b"<html><body>hello</body></html>"
    assert "HTML page" in not_otlp(html, "text/html; charset=utf-8")
    assert "HTML page" in not_otlp(b"", "text/html")
    assert "not an OTLP answer" in not_otlp(html, "application/x-protobuf")
    assert "not an OTLP answer" in not_otlp(b"ok", "text/plain")
    assert "not an OTLP answer" in not_otlp(b"[1]", "application/json")


@pytest.mark.parametrize("spool", ["on", "off"])
def test_an_endpoint_answering_200_with_html_is_said_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    spool: str,
) -> None:
    """A web server at the endpoint (a proxy's page, a wrong port) answered 200 with HTML: the
    spans counted as delivered, without a word, and were lost."""
    monkeypatch.setenv("ETT_SPOOL_DIR", str(tmp_path / "spool") if spool == "on" else "off")
    caplog.set_level(logging.WARNING)
    page = b"<html><body>hello</body></html>"
    with OtlpReceiver(status=200, body=page, content_type="text/html") as rx:
        sess = ett.init(job_id="j", endpoint=rx.url, install_handlers=False)
        sess.flush(5.0)
        with sess.eval():
            pass
        sess.end()
        assert len(rx.requests) >= 2
    said = [r.getMessage() for r in caplog.records if "OTLP collector" in r.getMessage()]
    assert len(said) == 1, said
    assert "answered HTTP 200 with an HTML page (Content-Type text/html)" in said[0]
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in said[0]


def test_an_otlp_answer_is_not_said(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ETT_SPOOL_DIR", "off")
    caplog.set_level(logging.WARNING)
    with OtlpReceiver(status=200) as rx:
        sess = ett.init(job_id="j", endpoint=rx.url, install_handlers=False)
        sess.end()
        assert rx.requests
    assert "OTLP collector" not in caplog.text
