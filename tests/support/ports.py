"""Free TCP ports on 127.0.0.1, for servers the tests start (PostgreSQL, `ett serve`, gloo)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port that nothing listens on now (bound once, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
