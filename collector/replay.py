"""Send recorded spans to a collector through opentelemetry-sdk's own OTLP/HTTP exporter.

Used by the demo (the ETT-SPEC worked example) and by end-to-end tests. Needs the ``instrument``
extra (opentelemetry-sdk and the OTLP/HTTP exporter); imported lazily.
"""

from __future__ import annotations

from collections.abc import Iterable

from instrument import semconv as sc

from .domain import SpanRecord

_IDENTITY = (sc.JOB_ID, sc.ATTEMPT, sc.RANK, sc.WORLD_SIZE, sc.MODEL, sc.TEAM)


def send_spans(
    records: Iterable[SpanRecord], endpoint: str, headers: dict[str, str] | None = None
) -> int:
    """Export ``records`` as real OTLP/HTTP protobuf requests, one TracerProvider (one resource)
    per (attempt, rank); identity goes in the resource, other attributes on the span.

    ``endpoint`` is the collector's base URL (``http://127.0.0.1:4318``). Returns spans sent.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    groups: dict[tuple[int, int], list[SpanRecord]] = {}
    for r in records:
        groups.setdefault((r.attempt, r.rank), []).append(r)
    sent = 0
    for (_attempt, _rank), spans in sorted(groups.items()):
        resource_attrs = {k: spans[0].attributes[k] for k in _IDENTITY if k in spans[0].attributes}
        resource_attrs[sc.SERVICE_NAME] = "ett-replay"
        provider = TracerProvider(resource=Resource.create(resource_attrs))  # type: ignore[arg-type]
        exporter = OTLPSpanExporter(
            endpoint=endpoint.rstrip("/") + "/v1/traces", headers=headers or {}
        )
        provider.add_span_processor(BatchSpanProcessor(exporter, max_export_batch_size=512))
        tracer = provider.get_tracer(__name__)
        for r in spans:
            attrs = {k: v for k, v in r.attributes.items() if k not in _IDENTITY}
            span = tracer.start_span(
                r.name, start_time=int(r.start * 1e9), attributes=attrs  # type: ignore[arg-type]
            )
            span.end(end_time=int(r.end * 1e9))
            sent += 1
        provider.force_flush()
        provider.shutdown()
    return sent
