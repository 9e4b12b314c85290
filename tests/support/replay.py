"""Send recorded spans to a collector through opentelemetry-sdk's own OTLP/HTTP exporter.

Used by the demo (the worked example of docs/metrics.md), end-to-end tests and benchmarks. Needs the
``instrument`` extra (opentelemetry-sdk and the OTLP/HTTP exporter); imported lazily.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ett import semconv as sc
from ett_collector.domain import SpanRecord

_IDENTITY = (sc.JOB_ID, sc.ATTEMPT, sc.RANK, sc.WORLD_SIZE, sc.MODEL, sc.TEAM)


def sdk_spans(records: Iterable[SpanRecord]) -> list[Any]:
    """The records as the SDK's finished spans (``ReadableSpan``), one TracerProvider (one
    resource) per (job, attempt, rank): identity goes in the resource, other attributes on the span.
    Trace and span ids are the SDK's own (fresh ones each call)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    groups: dict[tuple[str, int, int], list[SpanRecord]] = {}
    for r in records:
        groups.setdefault((r.job_id, r.attempt, r.rank), []).append(r)
    out: list[Any] = []
    for _key, spans in sorted(groups.items()):
        attrs0 = spans[0].attributes
        resource_attrs: dict[str, Any] = {k: attrs0[k] for k in _IDENTITY if k in attrs0}
        resource_attrs[sc.SERVICE_NAME] = "ett-replay"
        provider = TracerProvider(resource=Resource.create(resource_attrs))
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer(__name__)
        for r in spans:
            attrs = {k: v for k, v in r.attributes.items() if k not in _IDENTITY}
            span = tracer.start_span(r.name, start_time=int(r.start * 1e9), attributes=attrs)
            span.end(end_time=int(r.end * 1e9))
        out += memory.get_finished_spans()
        provider.shutdown()
    return out


def encode_request(records: Iterable[SpanRecord]) -> bytes:
    """One OTLP ``ExportTraceServiceRequest`` (protobuf bytes), encoded by the SDK's encoder."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(sdk_spans(records)).SerializeToString())


def send_spans(
    records: Iterable[SpanRecord],
    endpoint: str,
    headers: dict[str, str] | None = None,
    batch: int = 512,
) -> int:
    """Export ``records`` with the SDK's ``OTLPSpanExporter`` in batches; returns spans the
    collector acknowledged. ``endpoint`` is the collector's base URL."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    spans = sdk_spans(records)
    exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces", headers=headers)
    sent = 0
    try:
        for i in range(0, len(spans), batch):
            part = spans[i : i + batch]
            if exporter.export(part) == SpanExportResult.SUCCESS:
                sent += len(part)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return sent
