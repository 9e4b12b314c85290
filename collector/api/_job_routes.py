"""One route for everything under ``/api/v1/jobs/``: a job, or one of its views.

Job ids may hold any character, ``/`` included, so the decoded path cannot tell the job
``a/segments`` from the segments of job ``a``. The raw (still percent-encoded) path can: a view
is a literal ``/segments`` or ``/activity`` at its end, and the id is everything before it,
percent-decoded. A client writes a job id with ``quote(job_id, safe="")`` (``/`` as ``%2F``),
as the dashboard's client does; an id holding a plain ``/`` that does not end in a view's name
works unencoded too. An id may hold a line break (``a%0Ab``): the route's convertor matches
any characters, where Starlette's ``path`` (``.*``) stops at a newline and the router answered
its own plain-text 404.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import unquote_to_bytes

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

Handler = Callable[[Request], Awaitable[Response]]

PREFIX = "/api/v1/jobs/"


class AnyCharacters(Convertor[str]):
    """A path parameter of any characters, line breaks included (``path`` without its stop
    at ``\n``)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("any_characters", AnyCharacters())


def job_address(request: Request, views: frozenset[str]) -> tuple[str, str] | None:
    """``(job_id, view)`` of the request (view "" for the job itself); None when the id is
    empty or not UTF-8."""
    raw: bytes = request.scope.get("raw_path") or request.scope["path"].encode()
    at = raw.find(PREFIX.encode())
    rest = raw[at + len(PREFIX) :] if at >= 0 else b""
    view = ""
    head, sep, tail = rest.rpartition(b"/")
    if sep and head and tail.decode("ascii", "replace") in views:
        rest, view = head, tail.decode()
    try:
        job_id = unquote_to_bytes(rest).decode("utf-8")
    except UnicodeDecodeError:
        return None
    return (job_id, view) if job_id else None


def job_route(handlers: dict[str, Handler]) -> Route:
    """The route of ``/api/v1/jobs/{anything}``; ``handlers`` maps a view ("" for the job) to
    its handler, which reads ``request.path_params["job_id"]``."""
    views = frozenset(v for v in handlers if v)

    async def dispatch(request: Request) -> Response:
        address = job_address(request, views)
        if address is None:
            return JSONResponse(
                {"error": "no job id in the path (write it percent-encoded, UTF-8)", "status": 404},
                status_code=404,
            )
        job_id, view = address
        if "\x00" in job_id:  # ingest refuses NUL, and PostgreSQL's text cannot hold one
            return JSONResponse({"error": f"no job {job_id!r}", "status": 404}, status_code=404)
        request.scope["path_params"] = {"job_id": job_id}
        return await handlers[view](request)

    return Route(PREFIX + "{rest:any_characters}", dispatch)
