"""Thin routes of the dashboards' aggregated reads (:class:`ett_collector.read.overview.Overview`).

- ``GET /api/v1/fleet?since=&until=&by=fleet|model|team&bucket=hour|day&model=&team=&state=&limit=``
- ``GET /api/v1/facets``: models, teams and states to filter on
- ``GET /api/v1/checkpoint-advice?since=&model=&team=``
- ``GET /api/v1/jobs/{id}/activity``: start-up phases per rank, checkpoints, compiles, failures
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..read.overview import Overview
from ..read.query import Query

Handler = Callable[[Request], Awaitable[Response]]
Answer = Callable[..., Awaitable[Response]]


def overview_routes(
    query: Query, guarded: Callable[[Handler], Handler], answer: Answer
) -> list[Route]:
    """The routes; list them before ``/api/v1/jobs/{job_id:path}`` (activity is under it).

    ``answer(fn, *args)`` runs ``fn`` off the event loop and maps the query layer's errors to
    4xx answers, as the other read routes do.
    """
    overview = Overview(query)

    async def fleet(request: Request) -> Response:
        p = request.query_params
        try:
            limit = int(p.get("limit", "10"))
        except ValueError:
            limit = -1
        args: list[Any] = [p.get("since"), p.get("until"), p.get("by", "fleet"), p.get("bucket")]
        args += [p.get("model") or None, p.get("team") or None, p.get("state") or None, limit]
        return await answer(overview.fleet, *args)

    async def facets(request: Request) -> Response:
        return await answer(overview.facets)

    async def advice(request: Request) -> Response:
        p = request.query_params
        return await answer(
            overview.checkpoint_advice,
            p.get("since"),
            p.get("model") or None,
            p.get("team") or None,
        )

    async def activity(request: Request) -> Response:
        return await answer(overview.activity, request.path_params["job_id"])

    return [
        Route("/api/v1/fleet", guarded(fleet)),
        Route("/api/v1/facets", guarded(facets)),
        Route("/api/v1/checkpoint-advice", guarded(advice)),
        Route("/api/v1/jobs/{job_id:path}/activity", guarded(activity)),
    ]
