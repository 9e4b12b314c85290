"""uvicorn's HTTP protocol with a deadline on request heads, which uvicorn has no setting for.

Without it, a connection that sends nothing, or sends a request line and then one header line
now and then, is kept open for good: no token is needed for that, and 500 such connections were
seen held for 40 s and more, each a file descriptor. Here a request's head (request line and
headers) must be complete within ``ETT_HEADER_TIMEOUT_S`` of its first byte, and a new
connection's first request within as long of the connection; otherwise the connection is closed.
Between requests of a kept-alive connection uvicorn's own ``ETT_KEEP_ALIVE_S`` applies.

It also ends quietly the answer of a pipelined request whose client hung up: uvicorn marks only
the request it parsed last as disconnected, so the one being answered (the second of four
pipelined ``GET /metrics``, waiting for the first's bytes to drain) wrote to the closed
transport and the log got a 50-line ``Exception in ASGI application ... RuntimeError: unable
to perform operation on <TCPTransport closed=True>``.

This leans on uvicorn's httptools protocol (pinned in ``pyproject.toml``):
``tests/integration/test_ingest_stalls.py`` checks the behaviour over real sockets.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ..settings import DEFAULT_HEADER_TIMEOUT_S

PROTOCOL = "ett_collector.api._connections:HeadDeadlineProtocol"
"""The import string of :class:`HeadDeadlineProtocol`, for uvicorn's ``http`` option (worker
processes import it themselves)."""


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head does not arrive
    within :attr:`head_timeout_s`."""

    head_timeout_s: ClassVar[float] = DEFAULT_HEADER_TIMEOUT_S
    """Seconds a request head may take; set from the settings when the app is built
    (``_factory.build_app``)."""

    _head_timer: asyncio.TimerHandle | None = None
    _answering: RequestResponseCycle | None = None
    """The request whose app runs now (uvicorn's ``cycle`` is the one parsed last)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that sends nothing at all is closed too

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self._between_requests():
            self._arm()  # the first bytes of a request's head
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        self._answering = cycle
        super()._start_asgi_task(cycle, app)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        answering = self._answering
        if answering is not None and not answering.response_complete:
            answering.disconnected = True  # its send() returns, as for the last one parsed
        super().connection_lost(exc)

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_too_slow(self) -> None:
        self._head_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.close()
