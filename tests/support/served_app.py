"""An ASGI app served by uvicorn on a thread of the test process, on a free port of 127.0.0.1:
real sockets in front, and the app's objects (its ingest budget, say) within the test's reach;
or read in process, through httpx's ASGI transport (:func:`get_all`).

``ett serve`` runs the same uvicorn server in its own process; tests that need only the wire
use ``collector_process.start_collector`` instead.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from tests.support.waits import wait_until


@contextmanager
def served(app: Any, **config: Any) -> Iterator[tuple[str, int]]:
    """Serve ``app`` (uvicorn ``config`` on top of ``log_level="warning"``) until the block ends;
    yields ``(host, port)`` once the server listens."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)
    port = int(sock.getsockname()[1])
    options = {"log_level": "warning", "log_config": None, **config}  # records reach caplog
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), what="uvicorn to listen")
        assert server.started, "uvicorn stopped before it listened"
        yield "127.0.0.1", port
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


def raw_request(host: str, port: int, head: bytes) -> socket.socket:
    """A connection that has sent ``head`` (request line, headers, maybe some body) and waits."""
    conn = socket.create_connection((host, port), timeout=30)
    conn.sendall(head)
    return conn


def read_answer(conn: socket.socket, timeout: float) -> bytes:
    """Everything the server sends on ``conn`` until it closes it (``timeout`` s at most between
    two reads: ``socket.timeout`` past it)."""
    conn.settimeout(timeout)
    data = b""
    while chunk := conn.recv(65536):
        data += chunk
    return data


def get_all(app: Any, paths: Sequence[str]) -> list[httpx.Response]:
    """``GET`` each of ``paths`` from ``app`` in process, in order, on one client."""

    async def read() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [await client.get(path) for path in paths]

    return asyncio.run(read())
