"""A token rotated while the job runs (docs/collector.md: the collector takes the new token, the
trainers' ``ETT_TOKEN_FILE`` gets it, the old one is removed): no span is lost.

The library read the file once at ``init()``: after the old token was removed the trainer kept
sending it, got 401 and dropped every later batch (a probe's job showed 504 of 1000 steps)."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import ett
from ett import _errors
from ett._backlog import FAILED, Backlog
from ett._credentials import Credentials
from ett._export import is_priority
from ett._spool import SpoolWriter
from ett._spool_send import Sender
from tests.unit.instrument.test_instrument_spool import _identity, _spans

OLD, NEW = "w-old-0123456789abcdef", "w-new-0123456789abcdef"


@dataclass
class TokenCollector:
    """A stand-in for the collector's ``POST /v1/traces`` behind its token check: 401 for a
    token it does not hold (now), else 200. Records the token of every request."""

    tokens: set[str] = field(default_factory=set)
    seen: list[tuple[str, int]] = field(default_factory=list)
    url: str = ""

    def taken(self) -> int:
        return sum(1 for _, code in self.seen if code == 200)


@pytest.fixture
def collector() -> Iterator[TokenCollector]:
    state = TokenCollector({OLD})

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            token = (self.headers.get("authorization") or "").removeprefix("Bearer ")
            code = 200 if token in state.tokens else 401
            state.seen.append((token, code))
            body = b"" if code == 200 else b'{"code": 16, "message": "wrong bearer token"}'
            self.send_response(code)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ETT_TOKEN", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(_errors, "_seen", set())


def _token_file(tmp_path: Path, token: str) -> Path:
    path = tmp_path / "write.token"
    path.write_text(f"# the trainers' write token\n{token}\n")
    path.chmod(0o600)
    return path


def _rotate(path: Path, token: str, *, same_stamp: bool = False) -> None:
    """Write ``token`` into the file in place; with ``same_stamp`` its modification time stays
    what it was (a change within the file system's timestamp resolution)."""
    before = os.stat(path)
    path.write_text(f"# the trainers' write token\n{token}\n")
    if same_stamp:
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


@pytest.mark.parametrize("spool", ["on", "off"])
@pytest.mark.parametrize("same_stamp", [False, True], ids=["new-mtime", "same-mtime"])
def test_a_documented_rotation_loses_no_span(
    collector: TokenCollector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spool: str,
    same_stamp: bool,
) -> None:
    if spool == "off":
        monkeypatch.setenv("ETT_SPOOL_DIR", "off")
    path = _token_file(tmp_path, OLD)
    monkeypatch.setenv("ETT_TOKEN_FILE", str(path))
    sess = ett.init(job_id="rotated", endpoint=collector.url, install_handlers=False)
    sess.flush(10.0)
    with sess.eval():
        pass
    sess.flush(10.0)
    collector.tokens.add(NEW)  # 1. the collector takes the new token
    _rotate(path, NEW, same_stamp=same_stamp)  # 2. the trainers' file gets it
    collector.tokens.discard(OLD)  # 3. the old one is removed
    for _ in range(3):
        with sess.eval():
            pass
        sess.flush(10.0)
    sess.end()
    assert sess.dropped_spans == 0
    assert collector.seen[-1] == (NEW, 200)
    refused = [seen for seen in collector.seen if seen[1] != 200]
    # a new mtime is seen before the next export; the same one costs one 401, then a retry
    assert refused == ([(OLD, 401)] if same_stamp else [])


def test_a_refused_token_that_did_not_change_is_dropped_once_and_said_once(
    collector: TokenCollector,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Today's behaviour for a wrong token stays: no retry (the request is sent once), the
    batch counted as dropped, one warning."""
    caplog.set_level(logging.WARNING)
    collector.tokens = {NEW}
    monkeypatch.setenv("ETT_TOKEN_FILE", str(_token_file(tmp_path, OLD)))
    sess = ett.init(job_id="wrong", endpoint=collector.url, install_handlers=False)
    sess.flush(10.0)
    requests, dropped = len(collector.seen), sess.dropped_spans
    with sess.eval():
        pass
    sess.flush(10.0)
    assert len(collector.seen) == requests + 1
    assert sess.dropped_spans == dropped + 1
    sess.end()
    said = [r.getMessage() for r in caplog.records if "HTTP 401" in r.getMessage()]
    assert len(said) == 1 and OLD not in said[0]


def test_the_spool_sender_follows_the_token_file(collector: TokenCollector, tmp_path: Path) -> None:
    """``ett-instrument flush`` and the spool's delivery send with the file's token as it is
    now, and once again after a 401 when the file changed."""
    path = _token_file(tmp_path, OLD)
    sender = Sender(
        collector.url + "/v1/traces", Credentials.resolve(env={"ETT_TOKEN_FILE": str(path)})
    )
    assert sender.send(b"") == 200
    collector.tokens = {NEW}
    _rotate(path, NEW, same_stamp=True)
    assert sender.send(b"") == 200
    assert collector.seen == [(OLD, 200), (OLD, 401), (NEW, 200)]
    assert sender.send(b"") == 200 and collector.seen[-1] == (NEW, 200)


def test_spooled_spans_refused_for_their_token_wait_for_the_token_file_to_change(
    collector: TokenCollector, tmp_path: Path
) -> None:
    """After a 401 the spool is not sent again with the same token every back-off (the
    collector bans an address after 10 wrong tokens a minute); a rotated file sends it at
    once."""
    collector.tokens = {NEW}
    path = _token_file(tmp_path, OLD)
    credentials = Credentials.resolve(env={"ETT_TOKEN_FILE": str(path)})
    writer = SpoolWriter(tmp_path / "spool", _identity("rotating"))
    backlog = Backlog(
        writer, Sender(collector.url + "/v1/traces", credentials), 1 << 20, is_priority
    )
    assert backlog.store(_spans(["ett.eval"]))
    assert backlog.deliver(1.0) == FAILED
    assert not backlog.due()  # not in a second, nor for minutes
    _rotate(path, NEW)
    assert backlog.due()
    assert backlog.deliver(1.0) != FAILED and not writer.pending
    assert collector.seen == [(OLD, 401), (NEW, 200)]
    writer.close()
