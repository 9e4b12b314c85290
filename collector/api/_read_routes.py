"""Thin routes of the query layer (:class:`ett_collector.read.query.Query`).

- ``GET /api/v1/jobs?state=&model=&team=&since=&limit=`` (limit: an integer, default 1000)
- ``GET /api/v1/jobs/{id}`` and ``GET /api/v1/jobs/{id}/segments`` (job views, ``_job_routes``)
- ``GET /api/v1/lost-time?group_by=component|job|model|team&since=&until=``
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from ..read.query import Query
from ._answers import ReadAnswers, error, int_param, json_body


class ReadRoutes:
    """The handlers of the job list, one job, its segments and lost time."""

    def __init__(self, query: Query, answer: ReadAnswers) -> None:
        self.query, self.answer = query, answer

    async def jobs(self, request: Request) -> Response:
        p = request.query_params
        limit = int_param(p.get("limit"), 1000)
        if limit is None:
            return error(400, f"limit must be an integer; got {p.get('limit')!r}")
        return await self.answer(
            self.query.jobs, p.get("state"), p.get("model"), p.get("team"), p.get("since"), limit
        )

    async def job(self, request: Request) -> Response:
        return await self.answer(self.query.job_body, request.path_params["job_id"], json_body)

    async def segments(self, request: Request) -> Response:
        return await self.answer(self.query.segments, request.path_params["job_id"])

    async def lost_time(self, request: Request) -> Response:
        p = request.query_params
        return await self.answer(
            self.query.lost_time, p.get("group_by", "component"), p.get("since"), p.get("until")
        )
