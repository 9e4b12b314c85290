"""A client that reads none of its answer is dropped after ``ETT_SEND_TIMEOUT_S``.

uvicorn waits on such a client for good, holding the answer twice (the app's bytes and the
transport's copy): a probe's 20 connections that asked for a 14 MB ``/metrics`` and never read
held 526 MB until they closed. The collector's protocol (``collector/api/_connections.py``)
drops the connection once its send buffer has stayed full that long, and a client that reads,
however slowly, is kept. Real uvicorn, uvloop and sockets."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from ett_collector.api._connections import HeadDeadlineProtocol
from tests.support.served_app import served
from tests.support.waits import wait_until

BODY = b"m" * (16 << 20)  # far past what the socket buffers and uvicorn's high-water mark hold
DEADLINE_S = 1.0


@pytest.fixture
def short_deadline(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(HeadDeadlineProtocol, "send_timeout_s", DEADLINE_S)
    yield


def _app(events: list[str]) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        events.append("start")
        length = str(len(BODY)).encode()
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]}
        )
        await send({"type": "http.response.body", "body": BODY})
        events.append("sent")

    return app


def _client(host: str, port: int, buffer: int = 4096) -> socket.socket:
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer)
    client.connect((host, port))
    client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    return client


def test_a_client_that_reads_nothing_is_dropped(short_deadline: None) -> None:
    events: list[str] = []
    with served(_app(events), http=HeadDeadlineProtocol, lifespan="off", loop="uvloop") as (
        host,
        port,
    ):
        client = _client(host, port)
        try:
            wait_until(lambda: "start" in events, what="the answer to start")
            # the answer's send returns once the connection is dropped (before: never)
            wait_until(lambda: "sent" in events, timeout=30 * DEADLINE_S, what="the drop")
            client.settimeout(10)
            with pytest.raises(OSError):  # reset: what it never read was dropped
                while client.recv(1 << 16):
                    pass
                raise ConnectionResetError("closed")  # an orderly end is a drop too
        finally:
            client.close()


def test_a_client_that_reads_slowly_gets_the_whole_answer(short_deadline: None) -> None:
    """Reading 4 KiB every quarter deadline (16 KiB/s: the server's send buffers stay full for
    seconds at a time), then as fast as it can: kept, as a reader that makes progress."""
    events: list[str] = []
    with served(_app(events), http=HeadDeadlineProtocol, lifespan="off", loop="uvloop") as (
        host,
        port,
    ):
        client = _client(host, port)
        client.settimeout(10)
        received = slow = 0
        try:
            wait_until(lambda: "start" in events, what="the answer to start")
            while received < len(BODY):
                chunk = client.recv(4096 if slow < 40 else 1 << 20)
                assert chunk, f"dropped after {received} bytes"
                received += len(chunk)
                if slow < 40:  # 10 deadlines of slow reading, then as fast as it can
                    slow += 1
                    time.sleep(DEADLINE_S / 4)
        finally:
            client.close()
    assert received >= len(BODY)
