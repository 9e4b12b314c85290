"""How the alerts join ``ett serve``: the fleet metrics on the collector's registry,
``GET /api/v1/alerts`` and the evaluator running for the app's lifetime."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from sqlalchemy import Engine
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..schemas import MAX_LIST
from ._metrics import FleetMetrics
from ._service import AlertService
from ._store import STATES, AlertStore
from .settings import AlertSettings


def alerts_answer(store: AlertStore, state: str | None, limit: str | None) -> tuple[int, Any]:
    """Status and body of ``GET /api/v1/alerts?state=&limit=``."""
    if state is not None and state not in STATES:
        error = f"state must be one of {', '.join(STATES)}; got {state!r}"
        return 400, {"error": error, "status": 400}
    try:
        n = 500 if limit is None else int(limit)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_LIST:
        error = f"limit must be an integer between 1 and {MAX_LIST:,}; got {limit!r}"
        return 400, {"error": error, "status": 400}
    return 200, [a.to_dict() for a in store.alerts(state, n)]


def install(
    app: Starlette,
    engine: Engine,
    register_metrics: Callable[[FleetMetrics], None],
    leader: Callable[[], bool] | None = None,
    settings: AlertSettings | None = None,
) -> AlertService:
    """Add the alerts to ``app`` (built by ``create_app``, whose auth middleware asks a read
    token for ``GET /api/v1/alerts`` as for every read route); returns the evaluator.

    Raises:
        RulesError, AlertConfigError: on a bad rules file or setting (nothing is installed).
    """
    settings = settings or AlertSettings.from_env()
    rules = settings.load()
    service = AlertService(
        engine,
        rules,
        settings.interval_s,
        settings.alertmanager_url,
        settings.dashboard_url,
        leader=leader,
    )
    register_metrics(FleetMetrics(engine, settings.metrics_cache_s, settings.metrics_max_pairs))

    async def alerts_route(request: Request) -> Response:
        p = request.query_params
        status, body = await run_in_threadpool(
            alerts_answer, service.store, p.get("state"), p.get("limit")
        )
        return JSONResponse(body, status_code=status)

    app.router.routes.insert(0, Route("/api/v1/alerts", alerts_route, methods=["GET"]))
    inner = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(a: Any) -> AsyncIterator[Any]:
        async with inner(a) as state:
            service.start()
            try:
                yield state
            finally:
                service.stop()

    app.router.lifespan_context = lifespan
    app.state.alerts = service
    return service
