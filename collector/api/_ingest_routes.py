"""``POST /v1/traces``: OTLP/HTTP in (protobuf or JSON, gzip), stored in chunks.

The answers follow OTLP's retry rules: 200 with the partial-success counts; 403 on a read-only
collector (a retry cannot succeed); 408 (and the connection closed) for a body that has not
arrived within ``ETT_BODY_TIMEOUT_S``; 413 for a body over ``ETT_MAX_BODY_BYTES``; 429 while too
many decoded bytes are in flight (``Retry-After``); other 4xx for what cannot be decoded; 503
while the database cannot take spans (``Retry-After`` grows with the outage, see
``_admission.py``). Each answer is counted in ``ett_ingest_requests_total`` by its status; a
client that hangs up before its body has arrived gets no answer and is counted as ``499`` (the
code proxies use for it), with one line in the log at INFO.

Spans of a job whose raw spans retention pruned are refused alone, in the 200's partial success
(``rejected_spans``, and a message naming the job, when it was pruned and to send under a new
job id): OTLP clients do not retry it, and the request's other spans are stored. Each such job is
logged once (per process), and its spans counted as ``ett_ingest_spans_total{outcome="rejected",
reason="pruned_job"}``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from .. import otlp
from ..read.metrics import CollectorMetrics
from ..settings import Settings
from ..storage import db_reason, is_transient_db_error
from ..storage._pruned_ingest import Refusal
from ..write.pipeline import Pipeline, pruned_refusal
from ._admission import Busy, InflightBudget, OutageClock, Ticket
from ._readiness import DiskWatch

log = logging.getLogger("ett_collector.ingest")

READ_ONLY_REFUSAL = (
    "this collector is read-only (ett serve --read-only, a hot standby's reads): it stores no "
    "spans; send them to the collector on the primary database"
)
"""The answer to a trace export sent to a read-only collector (HTTP 403)."""

CLIENT_GONE = "499"
"""The ``code`` label of ``ett_ingest_requests_total`` counting clients that hung up before their
body had arrived (no answer is sent; 499 is the code proxies log for it)."""

INGEST_CHUNK_SPANS = 5000
"""Spans stored per transaction: a large request is committed in chunks, so the small requests
of other clients are stored between them instead of waiting for the whole of it. A request
refused part-way (503) has its first chunks stored; the client's retry stores the rest (stored
spans are recognised and skipped)."""

PRUNED_JOBS_LOGGED = 10_000
"""Pruned jobs whose refused spans a process remembers having logged; past it, it forgets them
all (and logs each again once)."""

REJECTED_INVALID = "invalid"
"""The ``reason`` of ``ett_ingest_spans_total{outcome="rejected"}`` for spans that failed
decoding's checks (identity, ids, times, limits)."""
REJECTED_PRUNED_JOB = "pruned_job"
"""The ``reason`` for spans of a job whose raw spans retention pruned."""


@dataclasses.dataclass(frozen=True)
class Stored:
    """What one export request came to: its decoding, and the spans refused at storing."""

    decoded: otlp.DecodeResult
    refused: dict[str, Refusal]

    @property
    def refused_spans(self) -> int:
        """The spans refused at storing, over every job."""
        return sum(r.spans for r in self.refused.values())


class TraceIngest:
    """The ``POST /v1/traces`` handler, :meth:`traces`, over one pipeline."""

    def __init__(
        self, settings: Settings, pipeline: Pipeline, metrics: CollectorMetrics, disk: DiskWatch
    ) -> None:
        self.settings, self.pipeline, self.metrics, self.disk = settings, pipeline, metrics, disk
        self.budget = InflightBudget(settings.max_inflight_bytes)
        self.outage = OutageClock()
        self._logged_pruned: set[str] = set()

    async def traces(self, request: Request) -> Response:
        """Decode and store the request's spans; answer in the request's encoding."""
        ctype = request.headers.get("content-type")
        out_type = otlp.response_content_type(ctype)
        if self.settings.read_only:  # 403: OTLP clients do not retry it (a retry cannot succeed)
            return self._refused(403, READ_ONLY_REFUSAL, out_type)
        ticket = self.budget.ticket()
        try:
            result = await self._store(request, ctype, ticket)
        except Busy as exc:
            return self._refused(429, str(exc), out_type, {"Retry-After": str(exc.retry_after_s)})
        except BodyTimeout as exc:  # a stalled client: its connection is not kept either
            return self._refused(408, str(exc), out_type, {"Connection": "close"})
        except ClientDisconnect:  # a trainer killed mid-export, say: nobody to answer
            self.metrics.requests.labels(CLIENT_GONE).inc()
            log.info("a client hung up mid-body, after %d bytes: nothing stored", ticket.held)
            return Response(status_code=int(CLIENT_GONE))
        except otlp.OtlpError as exc:  # one HTTP→gRPC table
            return self._refused(exc.status, exc.message, out_type)
        except Exception as exc:
            self.disk.write_failed(exc)  # a full or read-only disk: /readyz says so until it passes
            if not is_transient_db_error(exc):
                raise  # a bug: 500, which OTLP clients do not retry
            message = f"spans not stored, the database is unavailable; retry: {db_reason(exc)}"
            return self._refused(
                503, message, out_type, {"Retry-After": str(self.outage.refused())}
            )
        finally:
            ticket.release()
        self._count_stored(result)
        body = otlp.encode_export_response(_answer(result), out_type == "application/json")
        return Response(body, status_code=200, media_type=out_type)

    async def _store(self, request: Request, ctype: str | None, ticket: Ticket) -> Stored:
        settings = self.settings
        # the body goes to the worker thread in a parcel it empties, and the outcome comes back
        # in one emptied here: anyio's idle worker thread keeps its last job's arguments and
        # return value until its next job (40 threads, each up to 32 MiB otherwise)
        parcel = [
            await _read_limited(request, settings.max_body_bytes, ticket, settings.body_timeout_s)
        ]
        handed = await run_in_threadpool(
            _decode_and_ingest,
            parcel,
            ctype,
            request.headers.get("content-encoding"),
            settings.max_body_bytes,
            self.pipeline,
            ticket,
            int(settings.max_clock_ahead_s * 1e9),
        )
        outcome = handed.pop()
        if isinstance(outcome, Exception):
            try:
                raise outcome
            finally:
                del outcome  # its traceback holds this frame: no cycle through the local
        return outcome

    def _refused(
        self, status: int, message: str, out_type: str, headers: dict[str, str] | None = None
    ) -> Response:
        """An OTLP status answer, counted by its HTTP status."""
        self.metrics.requests.labels(str(status)).inc()
        body = otlp.encode_status(status, message, out_type == "application/json")
        return Response(body, status, headers, media_type=out_type)

    def _count_stored(self, stored: Stored) -> None:
        self.outage.stored()
        self.disk.write_succeeded()
        metrics = self.metrics
        metrics.requests.labels("200").inc()
        result, refused = stored.decoded, stored.refused_spans
        metrics.spans.labels("accepted", "").inc(len(result.records) - refused)
        if result.rejected:
            metrics.spans.labels("rejected", REJECTED_INVALID).inc(result.rejected)
        if refused:
            metrics.spans.labels("rejected", REJECTED_PRUNED_JOB).inc(refused)
            self._log_pruned(stored.refused)
        if result.unknown_span_names:
            metrics.unknown_span_names.inc(result.unknown_span_names)
        if result.unknown_attributes:
            metrics.unknown_attributes.inc(result.unknown_attributes)

    def _log_pruned(self, refused: dict[str, Refusal]) -> None:
        """One line per pruned job whose spans came (per process; see
        :data:`PRUNED_JOBS_LOGGED`)."""
        for job_id, refusal in sorted(refused.items()):
            if job_id in self._logged_pruned:
                continue
            if len(self._logged_pruned) >= PRUNED_JOBS_LOGGED:
                self._logged_pruned.clear()
            self._logged_pruned.add(job_id)
            log.warning("%s (said once per job)", pruned_refusal({job_id: refusal}))


def _answer(stored: Stored) -> otlp.DecodeResult:
    """The decoding with the spans refused at storing added to its rejected ones (one partial
    success: counts added, messages joined)."""
    result = stored.decoded
    if not stored.refused:
        return result
    message = pruned_refusal(stored.refused)
    if result.rejected_message:
        message = f"{result.rejected_message}; {message}"
    rejected = result.rejected + stored.refused_spans
    return dataclasses.replace(result, rejected=rejected, rejected_message=message)


def _decode_and_ingest(
    parcel: list[bytes],
    ctype: str | None,
    encoding: str | None,
    max_bytes: int,
    pipeline: Pipeline,
    ticket: Ticket,
    ahead_ns: int,
) -> list[Stored | Exception]:
    """Decode the body ``parcel`` holds (emptied here; charging the decompressed size to
    ``ticket``; a span that ends more than ``ahead_ns`` past the clock is refused) and store in
    chunks; the result, or the exception that stopped it, in a list of one that the caller
    empties.

    A failure is returned, not raised: raised out of the worker thread, the exception would sit
    in a reference cycle (anyio's frame holds the future that holds the exception, whose
    traceback holds that frame), and with it every frame of the failed decode, such as the
    32 MiB decompressed chunk of a refused gzip bomb, until the cyclic garbage collector runs,
    which a server process runs rarely (``_factory.GC_THRESHOLDS``): 60 such bombs grew the
    collector from 88 MB to 4.7 GB."""
    raw = parcel.pop()
    try:
        result = otlp.decode_traces(
            raw, ctype, encoding, max_bytes, ticket.charge_up_to, time.time_ns(), ahead_ns
        )
        records = result.records
        refused: dict[str, Refusal] = {}
        for i in range(0, len(records), INGEST_CHUNK_SPANS):
            for job_id, r in pipeline.accept(records[i : i + INGEST_CHUNK_SPANS]).refused.items():
                was = refused.get(job_id)
                refused[job_id] = r if was is None else Refusal(r[0], was.spans + r.spans)
    except Exception as exc:
        return [exc]
    return [Stored(result, refused)]


async def _read_limited(
    request: Request, max_bytes: int, ticket: Ticket, timeout_s: float
) -> bytes:
    """The request body, refusing (413) as soon as it passes ``max_bytes``, or (408) when it has
    not all arrived within ``timeout_s``; its bytes are charged to ``ticket`` as they arrive
    (which may raise :class:`Busy`). A declared length over the limit is refused at once, but
    never charged before its bytes come: a client that declares 32 MiB and stalls holds nothing
    of the budget."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        raise otlp.OtlpError(413, f"body of {declared} bytes exceeds the limit of {max_bytes}")
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise otlp.OtlpError(413, f"body exceeds the limit of {max_bytes} bytes")
                ticket.charge_up_to(size)
                chunks.append(chunk)
    except TimeoutError:
        raise BodyTimeout(size, declared, timeout_s) from None
    return b"".join(chunks)


class BodyTimeout(Exception):
    """A request body that did not arrive within ``ETT_BODY_TIMEOUT_S`` (answered 408)."""

    def __init__(self, received: int, declared: str | None, timeout_s: float) -> None:
        of = f" of {declared}" if declared is not None else ""
        super().__init__(
            f"the request body did not arrive within ETT_BODY_TIMEOUT_S={timeout_s:g} s "
            f"({received}{of} bytes came); send it again"
        )
