"""A client that hangs up on pipelined reads leaves no traceback in the log.

uvicorn marks only the request it parsed last as disconnected: with four ``GET /metrics``
pipelined, the second, waiting for the first's megabytes to drain, wrote to the closed
transport once the client left, and the log got ``Exception in ASGI application`` with 50
lines of ``RuntimeError: unable to perform operation on <TCPTransport closed=True>``. The
collector's protocol (``collector/api/_connections.py``) marks the request being answered too.
Real uvicorn, uvloop and sockets."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from ett_collector.api._connections import HeadDeadlineProtocol
from tests.support.served_app import served
from tests.support.waits import wait_until

BODY = b"m" * (16 << 20)  # far past what the socket buffers and uvicorn's high-water mark hold


def test_a_hang_up_on_pipelined_reads_ends_them_quietly(caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        n = sum(e.startswith("start") for e in events) + 1
        events.append(f"start {n}")
        try:
            length = str(len(BODY)).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-length", length)],
                }
            )
            await send({"type": "http.response.body", "body": BODY})
        except Exception as exc:
            events.append(f"raised {n}: {exc!r}")
            raise
        events.append(f"done {n}")

    with (
        caplog.at_level(logging.INFO),
        served(app, http=HeadDeadlineProtocol, lifespan="off", loop="uvloop") as (host, port),
    ):
        client = socket.socket()
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.connect((host, port))
        client.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
        # the first answer sits in the buffers; the second is waiting for them to drain
        wait_until(lambda: "start 2" in events, what="the second pipelined request to start")
        client.close()
        wait_until(
            lambda: "done 2" in events or any(e.startswith("raised 2") for e in events),
            what="the second answer to end",
        )
    assert "raised 2" not in " ".join(events), events
    assert "done 2" in events
    assert "start 3" not in events  # the requests after it never start
    assert "Exception in ASGI application" not in caplog.text
    assert "Traceback" not in caplog.text
