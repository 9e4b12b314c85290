"""Clients that stall or leave mid-body cost the collector nothing lasting, over real sockets
(the app under uvicorn on a thread, so the test can look at its in-flight budget):

- two connections that declare 32 MiB bodies, send one byte and stall hold one byte each of
  ``ETT_MAX_INFLIGHT_BYTES``, not 64 MiB: other clients' exports go on being stored; after
  ``ETT_BODY_TIMEOUT_S`` each stalled one is answered 408 and closed, and the budget is empty;
- a client that hangs up mid-body is counted (``ett_ingest_requests_total{code="499"}``) and
  leaves at most one log line, no traceback;
- a connection that trickles header lines, or sends nothing, is closed once
  ``ETT_HEADER_TIMEOUT_S`` has passed (uvicorn has no such setting: ``api/_connections.py``),
  while a kept-alive connection that pauses between requests is not.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.api._admission import InflightBudget
from ett_collector.api._connections import HeadDeadlineProtocol
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.bodies import window_body
from tests.support.served_app import raw_request, read_answer, served
from tests.support.waits import wait_until

TOKEN = "stall-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROTO = {"Content-Type": "application/x-protobuf", **AUTH}
STALLED_HEAD = (
    b"POST /v1/traces HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n"
    b"Content-Type: application/json\r\nContent-Length: 33554432\r\n\r\n{"
)
"""A request that declares the largest body (32 MiB), sends its first byte, and stops."""


class Entered:
    """ASGI wrapper counting the trace requests that reached the app, and those it is done with
    (answered or raised)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.traces = 0
        self.done = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/traces":
            await self.app(scope, receive, send)
            return
        self.traces += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.done += 1


def _budget(app: Any) -> InflightBudget:
    route = next(r for r in app.routes if getattr(r, "path", "") == "/v1/traces")
    budget: InflightBudget = route.endpoint.__self__.budget
    return budget


def test_stalled_bodies_hold_no_budget_and_are_answered_408(
    sqlite_url: str, sqlite_store: Store
) -> None:
    settings = Settings(db_url=sqlite_url, token=TOKEN, body_timeout_s=3.0)
    app = create_app(settings, Pipeline(sqlite_store, settle_s=0))
    entered, budget = Entered(app), _budget(app)
    with served(entered) as (host, port):
        stalled = [raw_request(host, port, STALLED_HEAD) for _ in range(2)]
        try:
            wait_until(
                lambda: entered.traces == 2 and budget.inflight >= 2,
                what="both stalled requests to be read",
            )
            assert budget.inflight == 2  # their one byte each, not the 64 MiB they declared
            r = httpx.post(
                f"http://{host}:{port}/v1/traces",
                content=window_body("alive", 3),
                headers=PROTO,
                timeout=30,
            )
            assert r.status_code == 200, r.text
            assert sqlite_store.span_counts()["spans"] == 3
            for conn in stalled:  # answered once ETT_BODY_TIMEOUT_S passed, then closed
                answer = read_answer(conn, timeout=60)
                assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
                assert b"ETT_BODY_TIMEOUT_S" in answer
            wait_until(lambda: budget.inflight == 0, what="the stalled bytes to be given back")
        finally:
            for conn in stalled:
                conn.close()


def test_a_client_gone_mid_body_is_counted_with_one_line_and_no_traceback(
    sqlite_url: str, sqlite_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    app = create_app(Settings(db_url=sqlite_url, token=TOKEN), Pipeline(sqlite_store, settle_s=0))
    entered = Entered(app)
    caplog.set_level(logging.INFO)
    with served(entered) as (host, port):
        raw_request(host, port, STALLED_HEAD).close()  # 1 byte of 32 MiB, then gone
        wait_until(lambda: entered.done == 1, what="the request to end")
    metrics = app.state.metrics.registry
    gone = metrics.get_sample_value("ett_ingest_requests_total", {"code": "499"})
    assert gone == 1
    assert _budget(app).inflight == 0
    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) <= 1, [r.getMessage() for r in lines]
    assert all(r.exc_info is None for r in caplog.records), "a traceback was logged"
    assert "Exception in ASGI application" not in caplog.text


HEAD_TIMEOUT_S = 1.0


@pytest.fixture
def head_deadline(monkeypatch: pytest.MonkeyPatch) -> type[HeadDeadlineProtocol]:
    monkeypatch.setattr(HeadDeadlineProtocol, "head_timeout_s", HEAD_TIMEOUT_S)
    return HeadDeadlineProtocol


def _closed_within(conn: socket.socket, bound_s: float, trickle: bytes | None) -> float:
    """Seconds until the server closes ``conn`` without an answer, sending ``trickle`` every
    0.2 s meanwhile; AssertionError past ``bound_s``."""
    start = time.monotonic()
    conn.settimeout(0.2)  # the pace of the trickle
    while time.monotonic() - start < bound_s:
        try:
            data = conn.recv(65536)
        except TimeoutError:
            if trickle is not None:
                try:
                    conn.sendall(trickle)
                except OSError:  # closed meanwhile
                    return time.monotonic() - start
            continue
        except ConnectionResetError:
            return time.monotonic() - start
        assert data == b"", data[:200]  # closed without an answer
        return time.monotonic() - start
    raise AssertionError(f"the connection was still open after {bound_s} s")


def test_slow_or_silent_heads_are_closed_at_the_deadline(
    sqlite_url: str, sqlite_store: Store, head_deadline: type[HeadDeadlineProtocol]
) -> None:
    app = create_app(Settings(db_url=sqlite_url, token=TOKEN), Pipeline(sqlite_store, settle_s=0))
    with served(app, http=head_deadline) as (host, port):
        trickling = raw_request(host, port, b"POST /v1/traces HTTP/1.1\r\nHost: t\r\n")
        silent = socket.create_connection((host, port), timeout=30)
        try:
            waited = _closed_within(trickling, 60, trickle=b"X-Pad: 1\r\n")
            assert waited >= HEAD_TIMEOUT_S * 0.9
            assert _closed_within(silent, 60, trickle=None) < 60
        finally:
            trickling.close()
            silent.close()


def _get_healthz(conn: socket.socket) -> bytes:
    """One keep-alive ``GET /healthz`` on ``conn``: its status line."""
    conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
    conn.settimeout(30)
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head.split(b"\r\n", 1)[0]


def test_a_kept_alive_connection_may_pause_between_requests(
    sqlite_url: str, sqlite_store: Store, head_deadline: type[HeadDeadlineProtocol]
) -> None:
    app = create_app(Settings(db_url=sqlite_url, token=TOKEN), Pipeline(sqlite_store, settle_s=0))
    with served(app, http=head_deadline, timeout_keep_alive=75) as (host, port):
        conn = socket.create_connection((host, port), timeout=30)
        try:
            assert _get_healthz(conn).startswith(b"HTTP/1.1 200")
            time.sleep(HEAD_TIMEOUT_S * 2)  # elapsed time, not a wait: idle past the deadline
            assert _get_healthz(conn).startswith(b"HTTP/1.1 200")
        finally:
            conn.close()
