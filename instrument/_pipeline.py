"""Building the library's own pipeline: a tracer provider exporting through an
:class:`ett._export.ExportQueue` to OTLP/HTTP, with the spool (``ett._backlog``) when it is on."""

from __future__ import annotations

from collections.abc import Callable

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON

from ._answers import HttpStatus
from ._backlog import Backlog, make_backlog
from ._config import Identity
from ._credentials import Credentials
from ._export import DEFAULT_MAX_QUEUE_SIZE, ExportQueue, is_priority
from ._ids import PrivateIdGenerator
from ._spool_send import Sender
from ._transport import export_session

SPOOL_SEND_TIMEOUT_S = 5.0
"""How long one POST of a spooled record waits for the collector's answer."""


def build_provider(
    identity: Identity,
    endpoint: str,
    *,
    max_queue_size: int = DEFAULT_MAX_QUEUE_SIZE,
    exporter: SpanExporter | None = None,
    export_timeout_s: float | None = None,
    credentials: Credentials | None = None,
    spool: tuple[str | None, int] = ("", 0),
    on_earlier_drops: Callable[[int], None] | None = None,
) -> tuple[TracerProvider, ExportQueue]:
    """A tracer provider that owns the identity resource, sampling every span, exporting through
    an :class:`ExportQueue` to ``exporter`` (default: OTLP/HTTP protobuf to ``endpoint``, its
    answers' status codes watched so that a final refusal is not retried; its token kept
    current with ``ETT_TOKEN_FILE``: ``credentials``, ``ett._credentials``). ``spool``
    (``resolve_spool()``; default off) keeps what the collector does not take on disk, for the
    OTLP exporter only (``ett._backlog``)."""
    status: HttpStatus | None = None
    backlog: Backlog | None = None
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        credentials = credentials or Credentials()
        status = HttpStatus()
        sender = Sender(endpoint, credentials, timeout_s=SPOOL_SEND_TIMEOUT_S, status=status)
        backlog = make_backlog(identity, sender, spool, is_priority, on_earlier_drops)
        session = export_session(status, credentials, fail_fast=backlog is not None)
        exporter = OTLPSpanExporter(
            endpoint=endpoint,
            timeout=export_timeout_s,
            headers=credentials.headers() or None,
            session=session,
        )
    queue = ExportQueue(
        exporter,
        max_queue_size=max_queue_size,
        status=status,
        endpoint=endpoint,
        backlog=backlog,
        credentials=credentials,
    )
    provider = TracerProvider(
        resource=Resource.create(identity.attributes()),
        sampler=ALWAYS_ON,
        shutdown_on_exit=False,
        id_generator=PrivateIdGenerator(),  # not the program's `random` state (see _ids)
    )
    provider.add_span_processor(queue)
    return provider, queue
