"""TLS export to a real local HTTPS server (a throwaway CA made with openssl): the CA that the
OTLP settings name is the one the collector's certificate is checked against, and a failed
check is said as one.

``REQUESTS_CA_BUNDLE`` (or ``CURL_CA_BUNDLE``) in a trainer's environment, set for other tools
to the system bundle, replaced ``OTEL_EXPORTER_OTLP_CERTIFICATE``: requests lets the
environment override a session's CA file, every export failed with CERTIFICATE_VERIFY_FAILED,
and the library said only "failed (no answer: collector unreachable?)"."""

from __future__ import annotations

import logging
import ssl
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import certifi
import pytest

import ett
from ett import _errors, semconv
from ett._flush import flush_main
from ett._spool import SpoolWriter, batch_record
from ett._spool_send import Sender
from tests.support.pki import Authority
from tests.support.waits import wait_until
from tests.unit.instrument.test_instrument_spool import _identity

SYSTEM_BUNDLE = ssl.get_default_verify_paths().cafile or certifi.where()


class HttpsCollector:
    """``POST /v1/traces`` over HTTPS with a certificate of ``ca``: 200 to every request."""

    def __init__(self, folder: Path) -> None:
        self.ca = Authority.make(folder, "collector-ca")
        pair = self.ca.issue("collector")
        self.bodies: list[bytes] = []
        bodies = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                bodies.append(self.rfile.read(int(self.headers.get("content-length") or 0)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pair.cert, pair.key)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsCollector]:
    c = HttpsCollector(tmp_path_factory.mktemp("tls"))
    yield c
    c.close()


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA that did not sign the collector's certificate."""
    return Authority.make(tmp_path_factory.mktemp("other"), "other-ca").pair.cert


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "OTEL_EXPORTER_OTLP_CERTIFICATE",
        "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE",
        "ETT_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_errors, "_seen", set())


def _said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("spool", ["on", "off"])
@pytest.mark.parametrize("variable", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_configured_ca_wins_over_the_environments_bundle(
    collector: HttpsCollector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    variable: str,
    spool: str,
) -> None:
    spool_dir = tmp_path / "spool"
    monkeypatch.setenv("ETT_SPOOL_DIR", str(spool_dir) if spool == "on" else "off")
    monkeypatch.setenv(variable, SYSTEM_BUNDLE)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(collector.ca.pair.cert))
    caplog.set_level(logging.WARNING)
    before = len(collector.bodies)
    sess = ett.init(
        job_id=f"tls-{variable}-{spool}", endpoint=collector.url, install_handlers=False
    )
    with sess.eval():
        pass
    sess.end()
    assert sess.dropped_spans == 0
    assert len(collector.bodies) > before
    assert any(semconv.SPAN_ATTEMPT.encode() in body for body in collector.bodies[before:])
    # sent by the exporter itself, not after a failure through the spool's own sender
    assert not any("failed" in line or "spool" in line for line in _said(caplog)), _said(caplog)
    assert not list(spool_dir.glob("**/*.spool"))


@pytest.mark.parametrize("spool", ["on", "off"])
def test_a_certificate_that_does_not_verify_is_said_as_one(
    collector: HttpsCollector,
    other_ca: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    spool: str,
) -> None:
    monkeypatch.setenv("ETT_SPOOL_DIR", str(tmp_path / "spool") if spool == "on" else "off")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(other_ca))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "2")  # the exporter's own retries
    caplog.set_level(logging.WARNING)
    sess = ett.init(job_id=f"untrusted-{spool}", endpoint=collector.url, install_handlers=False)
    with sess.eval():
        pass

    def tls() -> list[str]:
        said = [line for line in _said(caplog) if line.startswith("ETT ")]
        return [line for line in said if "TLS certificate verification failed" in line]

    wait_until(lambda: bool(tls()), 30, "the export's TLS failure said")
    assert str(other_ca) in tls()[0] and "unreachable" not in tls()[0]
    sess.end()


def test_a_certificate_that_does_not_verify_costs_the_exit_no_wait(
    collector: HttpsCollector,
    other_ca: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The collector takes connections, so an exit during the exporter's own retries took it
    for a collector back from a restart and waited the whole flush bound for it."""
    monkeypatch.setenv("ETT_SPOOL_DIR", "off")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(other_ca))
    caplog.set_level(logging.WARNING)
    sess = ett.init(
        job_id="untrusted-exit", endpoint=collector.url, install_handlers=False, flush_timeout_s=10
    )
    with sess.eval():
        pass
    marks = ("CERTIFICATE_VERIFY_FAILED", "TLS certificate verification failed")
    wait_until(
        lambda: any(mark in line for line in _said(caplog) for mark in marks),
        30,
        "the exporter's first failed request",  # said by the exporter (1.45) or by ETT (1.20)
    )
    started = time.monotonic()
    sess.end()
    assert time.monotonic() - started < 5.0


def test_the_spool_sender_and_flush_say_a_tls_failure(
    collector: HttpsCollector,
    other_ca: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = {"OTEL_EXPORTER_OTLP_CERTIFICATE": str(collector.ca.pair.cert)}
    assert Sender(collector.url + "/v1/traces", {}, env=env).send(b"") == 200
    wrong = Sender(
        collector.url + "/v1/traces", {}, env={"OTEL_EXPORTER_OTLP_CERTIFICATE": str(other_ca)}
    )
    assert wrong.send(b"") is None
    assert "TLS certificate verification failed" in wrong.problem and str(other_ca) in wrong.problem

    root = tmp_path / "spool"
    writer = SpoolWriter(root, _identity("left"))
    assert writer.append(batch_record(1, b"x"))
    writer.close()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", str(other_ca))
    code = flush_main(["--spool-dir", str(root), "--endpoint", collector.url, "--timeout", "10"])
    err = capsys.readouterr().err
    assert code == 1
    assert "TLS certificate verification failed" in err and "did not answer" not in err
