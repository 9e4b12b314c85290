"""The service's own routes: ``GET /healthz`` (liveness and counts), ``GET /readyz`` (can the
database take a write now: 503 with ``Retry-After`` when not) and ``GET /metrics`` (Prometheus).
"""

from __future__ import annotations

import asyncio
import os

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..read.metrics import CONTENT_TYPE, CollectorMetrics
from ..settings import Settings
from ..storage import db_reason, is_transient_db_error
from ..storage._replica import ReplicaWatch
from ..write.pipeline import Pipeline
from ..write.retention import RetentionLoop
from ._answers import RETRY_HEADERS
from ._readiness import DiskWatch


class Health:
    """The handlers of ``/healthz``, ``/readyz`` and ``/metrics`` over one pipeline."""

    def __init__(
        self,
        settings: Settings,
        pipeline: Pipeline,
        metrics: CollectorMetrics,
        disk: DiskWatch,
        retention: RetentionLoop,
    ) -> None:
        self.settings, self.pipeline, self.metrics = settings, pipeline, metrics
        self.disk, self.retention = disk, retention
        self.replica = (
            ReplicaWatch(pipeline.store.engine, settings.ready_max_lag_s)
            if settings.read_only
            else None
        )
        """The standby's replication state (a read-only collector only)."""
        self._exposing: asyncio.Future[bytes] | None = None
        """The exposition being made now, which every scrape that arrives meanwhile shares."""

    def routes(self) -> list[Route]:
        """``/healthz``, ``/readyz``, ``/metrics``."""
        return [
            Route("/healthz", self.healthz),
            Route("/readyz", self.readyz),
            Route("/metrics", self.metrics_route),
        ]

    async def healthz(self, request: Request) -> Response:
        """Liveness: the process serves; a database outage is /readyz's business, not a
        restart's. The store's counts, the standby's lag, the windows this process could not
        fold, the low-disk pruner's state when it runs, and this process's id (``pid``: which
        of ``--workers N`` answered)."""
        store = self.pipeline.store
        try:
            counts = await run_in_threadpool(store.span_counts)
        except Exception as exc:
            if not is_transient_db_error(exc):
                raise
            return JSONResponse(
                {"status": "ok", "database": f"unavailable: {db_reason(exc)}", "pid": os.getpid()}
            )
        if self.replica is not None:  # the standby's lag behind the primary
            counts |= await run_in_threadpool(self.replica.check)
            counts["read_only"] = True
        counts["unfolded_windows"] = sum(store.compactor.unfolded.values())  # this process's
        body: dict[str, object] = {"status": "ok", **counts, "pid": os.getpid()}
        if self.retention.disk_prune is not None:  # ETT_PRUNE_ON_LOW_DISK
            body["disk_prune"] = self.retention.disk_prune.prune.state()
        return JSONResponse(body)

    async def readyz(self, request: Request) -> Response:
        """Ready when the database takes a write (a read-only collector: when it reads and its
        standby is within ``ETT_READY_MAX_LAG_S`` of the primary)."""
        store = self.pipeline.store
        try:
            if self.replica is not None:  # ready when it reads, not too far behind
                await run_in_threadpool(store.span_counts)
                state = await run_in_threadpool(self.replica.check)
                behind = self.replica.not_ready(state)
                if behind is None:
                    return JSONResponse({"status": "ready", "read_only": True})
                return JSONResponse(
                    {"status": "unavailable", "read_only": True, "error": behind},
                    status_code=503,
                    headers=RETRY_HEADERS,
                )
            await run_in_threadpool(store.check_writable)
            reason = await run_in_threadpool(self.disk.problem)  # SQLite keeps the probe in memory
        except Exception as exc:
            reason = db_reason(exc)
        if reason is not None:
            return JSONResponse(
                {"status": "unavailable", "error": f"the database cannot take a write: {reason}"},
                status_code=503,
                headers=RETRY_HEADERS,
            )
        return JSONResponse({"status": "ready"})

    async def metrics_route(self, request: Request) -> Response:
        """The Prometheus exposition of this process (or of every worker's, multiprocess), made
        on a worker thread, once for all the scrapes that ask while it is made. Made on the
        event loop, a 42 MB exposition (1,000 model/team pairs) held every other request for
        about a second per scrape (20 scrapes at once: an ingest POST waited 16 s); made per
        scrape on threads, 20 at once took the process to 2.4 GB."""
        exposing = self._exposing
        if exposing is None:
            exposing = asyncio.ensure_future(run_in_threadpool(self.metrics.exposition))
            self._exposing = exposing
            exposing.add_done_callback(self._exposed)
        return Response(await asyncio.shield(exposing), media_type=CONTENT_TYPE)

    def _exposed(self, done: asyncio.Future[bytes]) -> None:
        if self._exposing is done:
            self._exposing = None
