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

And it drops a connection whose client reads nothing of its answer for ``ETT_SEND_TIMEOUT_S``
(the transport's send buffer full, and not one byte of it taken, the whole time; a slow reader
is kept): uvicorn waits on such a client for good,
holding the answer twice (the app's bytes and the buffer's copy). A client that asked for a
14 MB ``/metrics`` and never read held it until it closed: 20 of them, 526 MB.

This leans on uvicorn's httptools protocol (pinned in ``pyproject.toml``):
``tests/integration/test_ingest_stalls.py`` checks the behaviour over real sockets.
"""

from __future__ import annotations

import asyncio
import fcntl
import struct
import termios
from typing import ClassVar

from uvicorn._types import ASGI3Application
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from ..settings import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_SEND_TIMEOUT_S

PROTOCOL = "ett_collector.api._connections:HeadDeadlineProtocol"
"""The import string of :class:`HeadDeadlineProtocol`, for uvicorn's ``http`` option (worker
processes import it themselves)."""


class HeadDeadlineProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, closing a connection whose request head does not arrive
    within :attr:`head_timeout_s`."""

    head_timeout_s: ClassVar[float] = DEFAULT_HEADER_TIMEOUT_S
    """Seconds a request head may take; set from the settings when the app is built
    (``_factory.build_app``)."""

    send_timeout_s: ClassVar[float] = DEFAULT_SEND_TIMEOUT_S
    """Seconds an answer may wait on a client that reads none of it; set as :attr:`head_timeout_s`
    is."""

    _head_timer: asyncio.TimerHandle | None = None
    _send_timer: asyncio.TimerHandle | None = None
    _send_left: int = 0
    """Bytes of answers the client had not taken at the last look (:meth:`_unsent`)."""
    _send_moved_at: float = 0.0
    """When the client was last seen taking some, however slowly (the loop's clock)."""
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

    def pause_writing(self) -> None:
        super().pause_writing()  # the send buffer is full: the answer waits on the client
        if self._send_timer is None:
            self._send_left, self._send_moved_at = self._unsent(), self.loop.time()
            self._look_again()

    def _look_again(self) -> None:
        """Look at the client's progress four times a deadline: it is dropped within a quarter
        deadline of having taken nothing for a whole one."""
        self._send_timer = self.loop.call_later(self.send_timeout_s / 4, self._look)

    def resume_writing(self) -> None:
        self._stop_send_timer()  # the buffer drained: the client is reading
        super().resume_writing()

    def _stop_send_timer(self) -> None:
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def _look(self) -> None:
        self._send_timer = None
        if self.transport.is_closing():
            return
        unsent, now = self._unsent(), self.loop.time()
        if unsent < self._send_left:  # it took some: a slow reader, not a gone one
            self._send_left, self._send_moved_at = unsent, now
        elif now - self._send_moved_at >= self.send_timeout_s:
            self.transport.abort()  # what it never read is dropped with the connection
            return
        self._look_again()

    def _unsent(self) -> int:
        """Bytes of answers the client has not taken: the transport's buffer and the kernel's
        send queue (``SIOCOUTQ``, Linux). The buffer alone moves only when the kernel's queue
        frees a third of itself: a reader of 16 KiB/s showed no progress for seconds."""
        unsent = int(self.transport.get_write_buffer_size())
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                queued = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
                unsent += struct.unpack("i", queued)[0]
            except (OSError, ValueError):
                pass  # no such ioctl here: the buffer alone
        return unsent

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._stop_send_timer()
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
