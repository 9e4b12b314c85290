"""The job view ``GET /api/v1/jobs/{id}/performance?buckets=N`` (issue 26).

The job's performance figures (ideal and slow step time, slow windows, the straggler rank) and
its throughput over time in ``N`` buckets (default 60, at most 2000): see
``collector/read/performance.py`` and docs/metrics.md, "Inside the loop". Beside it, the fleet's
per-model figures, ``GET /api/v1/models/performance`` (``collector/read/performance_models.py``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..read.performance import job_performance, parse_buckets
from ..read.performance_models import ModelPerformance
from ..read.query import Query

Handler = Callable[[Request], Awaitable[Response]]
Answer = Callable[..., Awaitable[Response]]


def performance_view(query: Query, answer: Answer) -> Handler:
    """The handler of the ``performance`` job view (``answer`` maps the query errors)."""

    def read(job_id: str, buckets: str | None) -> dict[str, Any]:
        return job_performance(query, job_id, parse_buckets(buckets))

    async def view(request: Request) -> Response:
        return await answer(
            read, request.path_params["job_id"], request.query_params.get("buckets")
        )

    return view


def model_performance_route(models: ModelPerformance, answer: Answer) -> Route:
    """``GET /api/v1/models/performance?since=7d&model=&team=``: per model, the slow time lost
    and throughput per rank of the window's jobs (``collector/read/performance_models.py``)."""

    async def view(request: Request) -> Response:
        p = request.query_params
        return await answer(
            models.models, p.get("since"), p.get("model") or None, p.get("team") or None
        )

    return Route("/api/v1/models/performance", view)
