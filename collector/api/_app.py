"""Thin HTTP routes over the otlp, pipeline and query layers (Starlette): :func:`create_app`
puts the route modules together.

- ``_ingest_routes``: ``POST /v1/traces``;
- ``_health_routes``: ``/healthz``, ``/readyz``, ``/metrics``;
- ``_read_routes``, ``_job_routes``, ``_overview_routes``, ``_performance_routes``: the read API
  under ``/api/v1/``, answered by ``_answers.ReadAnswers``;
- ``_auth``: the tokens, checked in front of every route.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Final

from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route

from ..read.metrics import CollectorMetrics, ReplicationMetrics
from ..read.metrics_performance import ModelPerformanceMetrics
from ..read.performance_models import ModelPerformance
from ..read.query import Query
from ..settings import Settings
from ..write.periodic import Periodic
from ..write.pipeline import Pipeline
from ..write.retention import RetentionLoop
from ._answers import ReadAnswers, json_body, outage_answer
from ._auth import AuthMiddleware, guard_for
from ._health_routes import Health
from ._ingest_routes import INGEST_CHUNK_SPANS, READ_ONLY_REFUSAL, TraceIngest
from ._job_routes import PREFIX as JOB_PREFIX
from ._job_routes import job_route
from ._overview_routes import Handler, overview_routes
from ._performance_routes import model_performance_route, performance_view
from ._query_text import NulParameterRefusal
from ._read_routes import ReadRoutes
from ._readiness import DiskWatch, min_free_bytes_from_env, sqlite_path

__all__ = ["INGEST_CHUNK_SPANS", "READ_ONLY_REFUSAL", "create_app", "json_body"]

log = logging.getLogger("ett_collector.replica")

REPLICA_WATCH_S: Final = 5.0
"""How often a read-only collector reads its standby's replication state, to log the moment
streaming from the primary stops or resumes (its probes and scrapes read it too)."""


def _database_errors() -> tuple[type[Exception], ...]:
    """SQLAlchemy's errors and the drivers' own (a raw connection raises those unwrapped)."""
    errors: list[type[Exception]] = [DBAPIError, PoolTimeout, sqlite3.Error]
    try:
        import psycopg
    except ImportError:  # a SQLite-only installation
        pass
    else:
        errors.append(psycopg.Error)
    return tuple(errors)


_DATABASE_ERRORS: Final = _database_errors()


def create_app(
    settings: Settings, pipeline: Pipeline, metrics: CollectorMetrics | None = None
) -> Starlette:
    """The ASGI app. The pipeline's worker (and the retention loop) run for the app's lifetime."""
    query = Query(
        pipeline,
        read_wait_s=settings.read_wait_s,
        cache_jobs=settings.read_cache_jobs,
        recheck_s=settings.read_recheck_s,
    )
    metrics = metrics or CollectorMetrics()
    compactor = pipeline.store.compactor  # windows it could not fold: /metrics and /healthz
    compactor.on_unfolded = lambda reason: metrics.unfolded_windows.labels(reason).inc()
    disk = DiskWatch(sqlite_path(settings.db_url), min_free_bytes_from_env())
    ingest = TraceIngest(settings, pipeline, metrics, disk)
    answer = ReadAnswers(settings.read_threads)
    retention = RetentionLoop(settings, pipeline, disk=disk)  # disk: ETT_PRUNE_ON_LOW_DISK
    pipeline.read_only = settings.read_only  # reads never start a recompute there
    health = Health(settings, pipeline, metrics, disk, retention)
    watch = None
    if health.replica is not None:  # a standby: its lag on /metrics, its streaming logged
        metrics.register_shared(ReplicationMetrics(health.replica.check))
        watch = Periodic("ett-replica-watch", health.replica.tick, REPLICA_WATCH_S, log)
    app = Starlette(
        routes=_routes(query, metrics, answer, ingest, health, _max_models(settings)),
        lifespan=_lifespan(pipeline, retention, watch),
        # an outage no route answered itself (/metrics, the alerts, a job's cache check): 503
        exception_handlers=dict.fromkeys(_DATABASE_ERRORS, outage_answer),
    )
    app.add_middleware(NulParameterRefusal)  # inside the token check: outsiders get 401
    guard = guard_for(
        settings.token, settings.auth, lambda reason: metrics.auth_refusals.labels(reason).inc()
    )
    app.add_middleware(
        AuthMiddleware,
        guard=guard,
        on_ingest_refusal=lambda status: metrics.requests.labels(str(status)).inc(),
    )
    app.state.guard = guard
    app.state.pipeline = pipeline
    app.state.metrics = metrics
    app.state.query = query
    return app


def _max_models(settings: Settings) -> int:
    """How many models the ``ett_model_*`` gauges label (``ETT_METRICS_MAX_PAIRS``)."""
    from ..alerts.settings import AlertSettings

    return (settings.alerts or AlertSettings.from_env()).metrics_max_pairs


def _guarded(handler: Handler) -> Handler:
    return handler  # tokens are checked in front of every route (AuthMiddleware, _auth.py)


def _routes(
    query: Query,
    metrics: CollectorMetrics,
    answer: ReadAnswers,
    ingest: TraceIngest,
    health: Health,
    max_models: int,
) -> list[BaseRoute]:
    """Every route but the alerts' (``alerts/_routes.py`` adds those), in the order matched."""
    reads = ReadRoutes(query, answer)
    overview = overview_routes(query, _guarded, answer)
    views: dict[str, Handler] = {"": _guarded(reads.job), "segments": _guarded(reads.segments)}
    views["performance"] = _guarded(performance_view(query, answer))  # issue 26
    models = ModelPerformance(query)  # issue 26: per-model slow time, page and /metrics
    metrics.register_shared(ModelPerformanceMetrics(models, max_models))
    for route in overview:  # the job views the dashboards added (activity)
        if route.path.startswith(JOB_PREFIX):
            views[route.path.rsplit("/", 1)[1]] = route.endpoint
    return [
        # first: the hottest read, and nothing else lies under its prefix (/api/v1/jobs/...)
        job_route(views),  # a job and its views: any job id is addressable
        Route("/v1/traces", ingest.traces, methods=["POST"]),
        *health.routes(),
        Route("/api/v1/jobs", _guarded(reads.jobs)),
        *(r for r in overview if not r.path.startswith(JOB_PREFIX)),  # fleet, facets, advice
        Route("/api/v1/lost-time", _guarded(reads.lost_time)),
        model_performance_route(models, answer),
    ]


def _lifespan(
    pipeline: Pipeline, retention: RetentionLoop, watch: Periodic | None
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """Start the pipeline's worker, the retention loop and the standby's watch with the app;
    stop them after it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        pipeline.start()
        retention.start()
        if watch is not None:
            watch.start()
        try:
            yield
        finally:
            if watch is not None:
                watch.stop()
            retention.stop()
            pipeline.stop()

    return lifespan
