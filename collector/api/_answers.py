"""How the API answers: its error bodies and the runner of read questions.

Every error body is ``{"error": message, "status": status}``. :class:`ReadAnswers` runs a
question of the query layer in a thread of its own and maps the query layer's errors to
answers: not found 404, not ready 503 (``Retry-After: 1``), a failed recompute 500, a bad
question 400, a passing database fault 503 (``Retry-After``: ``RETRY_AFTER_S``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from starlette.responses import JSONResponse, Response

from ..read.query import NotComputedHere, NotFound, NotReady, QueryError, RecomputeFailed
from ..storage import RETRY_AFTER_S, db_reason, is_transient_db_error

RETRY_HEADERS = {"Retry-After": str(RETRY_AFTER_S)}
"""The headers of an answer that asks to come back once the database is there again."""


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """An error answer: ``{"error": message, "status": status}``."""
    return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)


def int_param(value: str | None, default: int) -> int | None:
    """An integer query parameter; None when it is not an integer."""
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        return None


def json_body(content: Any) -> bytes:
    """The body :class:`JSONResponse` sends for ``content`` (its own rendering)."""
    return bytes(JSONResponse(content).body)


async def outage_answer(_request: Any, exc: Exception) -> Response:
    """The app's answer to a database error no route caught: 503 with ``Retry-After`` for an
    outage (as every read route answers one), re-raised (500, logged) for anything else."""
    if not is_transient_db_error(exc):
        raise exc
    return error(503, f"the database is unavailable: {db_reason(exc)}", RETRY_HEADERS)


class ReadAnswers:
    """``await answers(fn, *args)``: ``fn(*args)`` in one of ``threads`` read threads, as an
    answer (JSON; ``bytes`` are sent as encoded already, see :func:`json_body`).

    Reads have threads of their own (ingest keeps anyio's default pool): an executor's hand-off
    costs half the CPU of anyio.to_thread's (57 vs 117 us per read, measured under uvicorn).
    """

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="ett-read")

    async def __call__(self, fn: Callable[..., Any], *args: Any) -> Response:
        try:
            data = await asyncio.get_running_loop().run_in_executor(self.pool, fn, *args)
        except (NotFound, NotComputedHere) as exc:  # a standby never computes figures
            return error(404, str(exc.args[0]))
        except NotReady as exc:
            return error(503, str(exc.args[0]), {"Retry-After": "1"})
        except RecomputeFailed as exc:  # the job's recompute raised: a bug, with its reason
            return error(500, str(exc))
        except QueryError as exc:
            return error(400, str(exc))
        except Exception as exc:
            if not is_transient_db_error(exc):
                raise
            return error(503, f"the database is unavailable: {db_reason(exc)}", RETRY_HEADERS)
        if isinstance(data, bytes):  # encoded already (json_body)
            return Response(data, media_type="application/json")
        return JSONResponse(data)
