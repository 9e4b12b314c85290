"""Thin HTTP routes over the otlp, pipeline and query layers (Starlette)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .. import otlp
from ..read.metrics import CONTENT_TYPE, CollectorMetrics
from ..read.metrics_performance import ModelPerformanceMetrics
from ..read.performance_models import ModelPerformance
from ..read.query import NotFound, NotReady, Query, QueryError, RecomputeFailed
from ..settings import Settings
from ..storage import RETRY_AFTER_S, is_passing
from ..storage._replica import replication
from ..write.pipeline import Pipeline
from ..write.retention import RetentionLoop
from ._admission import Busy, InflightBudget, OutageClock, Ticket
from ._auth import AuthMiddleware, guard_for
from ._job_routes import PREFIX as JOB_PREFIX
from ._job_routes import job_route
from ._overview_routes import overview_routes
from ._performance_routes import model_performance_route, performance_view
from ._readiness import DiskWatch, min_free_bytes_from_env, sqlite_path

Handler = Callable[[Request], Awaitable[Response]]


_RETRY_HEADERS = {"Retry-After": str(RETRY_AFTER_S)}

READ_ONLY_REFUSAL = (
    "this collector is read-only (ett serve --read-only, a hot standby's reads): it stores no "
    "spans; send them to the collector on the primary database"
)
"""The answer to a trace export sent to a read-only collector (HTTP 403)."""

INGEST_CHUNK_SPANS = 5000
"""Spans stored per transaction: a large request is committed in chunks, so the small requests
of other clients are stored between them instead of waiting for the whole of it. A request
refused part-way (503) has its first chunks stored; the client's retry stores the rest (stored
spans are recognised and skipped)."""


def _db_reason(exc: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's statement and links."""
    orig = getattr(exc, "orig", None)
    lines = str(orig if orig is not None else exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status, headers=headers)


def create_app(
    settings: Settings, pipeline: Pipeline, metrics: CollectorMetrics | None = None
) -> Starlette:
    """The ASGI app. The pipeline's worker runs for the app's lifetime."""
    query = Query(
        pipeline,
        read_wait_s=settings.read_wait_s,
        cache_jobs=settings.read_cache_jobs,
        recheck_s=settings.read_recheck_s,
    )
    metrics = metrics or CollectorMetrics()
    compactor = pipeline.store.compactor  # windows it could not fold: /metrics and /healthz
    compactor.on_unfolded = lambda reason: metrics.unfolded_windows.labels(reason).inc()
    budget = InflightBudget(settings.max_inflight_bytes)
    outage = OutageClock()
    # reads in threads of their own (ingest keeps anyio's default pool): an executor's hand-off
    # costs half the CPU of anyio.to_thread's (57 vs 117 us per read, measured under uvicorn)
    reads = ThreadPoolExecutor(settings.read_threads, thread_name_prefix="ett-read")

    async def answer(fn: Callable[..., Any], *args: Any) -> Response:
        return await _answer(fn, *args, pool=reads)

    disk = DiskWatch(sqlite_path(settings.db_url), min_free_bytes_from_env())

    def guarded(handler: Handler) -> Handler:
        return handler  # tokens are checked in front of every route (AuthMiddleware, _auth.py)

    async def traces(request: Request) -> Response:
        ctype = request.headers.get("content-type")
        out_type = otlp.response_content_type(ctype)
        as_json = out_type == "application/json"
        if settings.read_only:  # 403: OTLP clients do not retry it (a retry cannot succeed)
            metrics.requests.labels("403").inc()
            body = otlp.encode_status(403, READ_ONLY_REFUSAL, as_json)
            return Response(body, status_code=403, media_type=out_type)
        ticket = budget.ticket()
        try:
            raw = await _read_limited(request, settings.max_body_bytes, ticket)
            result = await run_in_threadpool(
                _decode_and_ingest,
                raw,
                ctype,
                request.headers.get("content-encoding"),
                settings.max_body_bytes,
                pipeline,
                ticket,
            )
        except Busy as exc:
            metrics.requests.labels("429").inc()
            body = otlp.encode_status(429, str(exc), as_json)
            headers = {"Retry-After": str(exc.retry_after_s)}
            return Response(body, 429, headers, media_type=out_type)
        except otlp.OtlpError as exc:
            metrics.requests.labels(str(exc.status)).inc()
            body = otlp.encode_status(exc.status, exc.message, as_json)  # one HTTP→gRPC table
            return Response(body, status_code=exc.status, media_type=out_type)
        except Exception as exc:
            disk.write_failed(exc)  # a full or read-only disk: /readyz says so until it passes
            if not is_passing(exc):
                raise  # a bug: 500, which OTLP clients do not retry
            metrics.requests.labels("503").inc()
            message = f"spans not stored, the database is unavailable; retry: {_db_reason(exc)}"
            body = otlp.encode_status(503, message, as_json)
            headers = {"Retry-After": str(outage.refused())}
            return Response(body, 503, headers, media_type=out_type)
        finally:
            ticket.release()
        outage.stored()
        disk.write_succeeded()
        metrics.requests.labels("200").inc()
        metrics.spans.labels("accepted").inc(len(result.records))
        if result.rejected:
            metrics.spans.labels("rejected").inc(result.rejected)
        if result.unknown_span_names:
            metrics.unknown_span_names.inc(result.unknown_span_names)
        if result.unknown_attributes:
            metrics.unknown_attributes.inc(result.unknown_attributes)
        return Response(
            otlp.encode_export_response(result, as_json), status_code=200, media_type=out_type
        )

    async def healthz(request: Request) -> Response:
        # liveness: the process serves; a database outage is /readyz's business, not a restart's
        try:
            counts = await run_in_threadpool(pipeline.store.span_counts)
        except Exception as exc:
            if not is_passing(exc):
                raise
            return JSONResponse({"status": "ok", "database": f"unavailable: {_db_reason(exc)}"})
        if settings.read_only:  # the standby's lag behind the primary
            counts |= await run_in_threadpool(replication, pipeline.store.engine)
            counts["read_only"] = True
        counts["unfolded_windows"] = sum(compactor.unfolded.values())  # this process's
        return JSONResponse({"status": "ok", **counts})

    async def readyz(request: Request) -> Response:
        try:
            if settings.read_only:  # ready when it reads; it never writes
                await run_in_threadpool(pipeline.store.span_counts)
                return JSONResponse({"status": "ready", "read_only": True})
            await run_in_threadpool(pipeline.store.check_writable)
            reason = await run_in_threadpool(disk.problem)  # SQLite keeps the probe in memory
        except Exception as exc:
            reason = _db_reason(exc)
        if reason is not None:
            return JSONResponse(
                {"status": "unavailable", "error": f"the database cannot take a write: {reason}"},
                status_code=503,
                headers=_RETRY_HEADERS,
            )
        return JSONResponse({"status": "ready"})

    async def metrics_route(request: Request) -> Response:
        return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    async def jobs(request: Request) -> Response:
        p = request.query_params
        limit = _int_param(p.get("limit"), 1000)
        if limit is None:
            return _error(400, f"limit must be an integer; got {p.get('limit')!r}")
        return await answer(
            query.jobs, p.get("state"), p.get("model"), p.get("team"), p.get("since"), limit
        )

    async def job(request: Request) -> Response:
        return await answer(query.job_body, request.path_params["job_id"], json_body)

    async def segments(request: Request) -> Response:
        return await answer(query.segments, request.path_params["job_id"])

    async def lost_time(request: Request) -> Response:
        p = request.query_params
        return await answer(
            query.lost_time, p.get("group_by", "component"), p.get("since"), p.get("until")
        )

    retention = RetentionLoop(settings, pipeline)
    pipeline.read_only = settings.read_only  # reads never start a recompute there

    @asynccontextmanager
    async def lifespan(app: Starlette) -> Any:
        pipeline.start()
        retention.start()
        try:
            yield
        finally:
            retention.stop()
            pipeline.stop()

    overview = overview_routes(query, guarded, answer)
    views = {"": guarded(job), "segments": guarded(segments)}
    views["performance"] = guarded(performance_view(query, answer))  # issue 26
    models = ModelPerformance(query)  # issue 26: per-model slow time, page and /metrics
    metrics.register_shared(ModelPerformanceMetrics(models))
    for route in overview:  # the job views the dashboards added (activity)
        if route.path.startswith(JOB_PREFIX):
            views[route.path.rsplit("/", 1)[1]] = route.endpoint
    routes = [
        # first: the hottest read, and nothing else lies under its prefix (/api/v1/jobs/...)
        job_route(views),  # a job and its views: any job id is addressable
        Route("/v1/traces", traces, methods=["POST"]),
        Route("/healthz", healthz),
        Route("/readyz", readyz),
        Route("/metrics", metrics_route),
        Route("/api/v1/jobs", guarded(jobs)),
        *(r for r in overview if not r.path.startswith(JOB_PREFIX)),  # fleet, facets, advice
        Route("/api/v1/lost-time", guarded(lost_time)),
        model_performance_route(models, answer),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
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


def _decode_and_ingest(
    raw: bytes,
    ctype: str | None,
    encoding: str | None,
    max_bytes: int,
    pipeline: Pipeline,
    ticket: Ticket,
) -> otlp.DecodeResult:
    """Decode (charging the decompressed size to ``ticket``) and store in chunks."""
    result = otlp.decode_traces(raw, ctype, encoding, max_bytes, ticket.charge_up_to)
    records = result.records
    for i in range(0, len(records), INGEST_CHUNK_SPANS):
        pipeline.ingest(records[i : i + INGEST_CHUNK_SPANS])
    return result


async def _read_limited(request: Request, max_bytes: int, ticket: Ticket) -> bytes:
    """The request body, refusing (413) as soon as it passes ``max_bytes``; its bytes are
    charged to ``ticket`` as they come (the declared length at once), which may raise
    :class:`Busy`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        if int(declared) > max_bytes:
            raise otlp.OtlpError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
        ticket.charge_up_to(int(declared))
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_bytes:
            raise otlp.OtlpError(413, f"body exceeds the limit of {max_bytes} bytes")
        ticket.charge_up_to(size)
        chunks.append(chunk)
    return b"".join(chunks)


def _int_param(value: str | None, default: int) -> int | None:
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


async def _answer(fn: Callable[..., Any], *args: Any, pool: ThreadPoolExecutor) -> Response:
    try:
        data = await asyncio.get_running_loop().run_in_executor(pool, fn, *args)
    except NotFound as exc:
        return _error(404, str(exc.args[0]))
    except NotReady as exc:
        return _error(503, str(exc.args[0]), {"Retry-After": "1"})
    except RecomputeFailed as exc:  # the job's recompute raised: a bug, with its reason
        return _error(500, str(exc))
    except QueryError as exc:
        return _error(400, str(exc))
    except Exception as exc:
        if not is_passing(exc):
            raise
        return _error(503, f"the database is unavailable: {_db_reason(exc)}", _RETRY_HEADERS)
    if isinstance(data, bytes):  # encoded already (json_body)
        return Response(data, media_type="application/json")
    return JSONResponse(data)
