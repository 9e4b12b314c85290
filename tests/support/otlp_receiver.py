"""An in-process stand-in for the collector's ``POST /v1/traces`` (our own interface): it answers
every request with the status a test chose and records what came, for tests of the exporter's
settings (endpoint, headers, protocol, refusals). Tests of the real collector use
``tests.support.collector_process``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class OtlpReceiver:
    """``with OtlpReceiver(status=200) as rx:`` serves on ``rx.url`` until the block ends."""

    status: int = 200
    body: bytes = b""
    """What every answer carries (an OTLP partial success, an error page)."""
    content_type: str = "application/x-protobuf"
    requests: list[Request] = field(default_factory=list)
    url: str = ""
    _server: ThreadingHTTPServer | None = None

    def __enter__(self) -> OtlpReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                receiver.requests.append(Request(self.path, headers, body))
                self.send_response(receiver.status)
                self.send_header("content-type", receiver.content_type)
                self.send_header("content-length", str(len(receiver.body)))
                self.end_headers()
                self.wfile.write(receiver.body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
