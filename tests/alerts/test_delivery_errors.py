"""An Alertmanager that answers an error is one line in the log, whatever its body."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from ett_collector.alerts._delivery import DeliveryError, post_alerts

PAGE = b"<html>\n<body>\n  <h1>500 Internal\n Server Error</h1>\n</body>\n</html>\n"


@pytest.fixture
def failing_alertmanager() -> Iterator[str]:
    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(500)
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_an_error_page_is_one_line(failing_alertmanager: str) -> None:
    with pytest.raises(DeliveryError) as raised:
        post_alerts(failing_alertmanager, [])
    message = str(raised.value)
    page = "<html> <body> <h1>500 Internal Server Error</h1> </body> </html>"
    assert message == f"Alertmanager answered 500: {page}"
