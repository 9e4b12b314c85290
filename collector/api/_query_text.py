"""Query parameters holding a NUL character are refused in front of every read route.

PostgreSQL's text cannot hold NUL (psycopg raises ``DataError``), where SQLite compares it like
any character: ``/api/v1/jobs?model=%00`` answered 500 with a traceback on one and ``200 []`` on
the other. No stored value can hold NUL (ingest refuses it, ``otlp/_limits.py``), so a
parameter with one names nothing: 400 naming the parameter, on both databases, for every route
of the read API at once (the alerts' included), before any query runs. A job id in the path
is ``_job_routes``'s: one with a NUL is no job (404).
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from starlette.types import ASGIApp, Receive, Scope, Send

from ._answers import error


def nul_parameter(query_string: bytes) -> str | None:
    """The name of the first query parameter whose value holds a NUL character; None when
    none does (the common case costs one byte search)."""
    if b"%00" not in query_string:  # a raw NUL never passes the HTTP parser
        return None
    for name, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        if "\x00" in value:
            return name
    return None


class NulParameterRefusal:
    """ASGI middleware: a read API request with a NUL in a query parameter's value is 400."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            name = nul_parameter(scope.get("query_string", b""))
            if name is not None:
                message = (
                    f"query parameter {name[:64]!r} holds a NUL character (%00): "
                    "no stored value can"
                )
                await error(400, message)(scope, receive, send)
                return
        await self.app(scope, receive, send)
