"""Contract: spans made by the OpenTelemetry SDK and encoded by its own OTLP encoder decode to
records that keep every field, in the protobuf and the JSON encodings alike."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

import pytest
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ett import semconv
from ett_collector.domain.model import SpanRecord
from ett_collector.otlp import decode_traces
from ett_collector.otlp._protobuf import LAZY_SCHEMA

LIMIT = 16 << 20
T0 = 1_750_000_000_123_456_789
RESOURCE: dict[str, Any] = {
    semconv.JOB_ID: "job-roundtrip",
    semconv.ATTEMPT: 2,
    semconv.RANK: 1,
    semconv.WORLD_SIZE: 4,
    semconv.MODEL: "dlrm",
    semconv.TEAM: "ads",
    semconv.SERVICE_NAME: "trainer",
    semconv.HOST_NAME: "node-7",
}


def _sdk_spans() -> Sequence[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("contract-test", "1.0")
    with tracer.start_as_current_span(
        semconv.SPAN_ATTEMPT, start_time=T0, end_on_exit=False
    ) as root:
        phase = tracer.start_span(
            semconv.startup_span_name(semconv.StartupPhaseValues.PG_INIT),
            start_time=T0 + 1,
            attributes={semconv.COMPONENT: semconv.ComponentValues.COMMS.value},
        )
        phase.end(end_time=T0 + 10_000_000_001)
        window = tracer.start_span(
            semconv.SPAN_TRAIN_WINDOW,
            start_time=T0 + 20_000_000_000,
            attributes={
                semconv.STEP_FIRST: 100,
                semconv.STEP_LAST: 199,
                semconv.SAMPLES: 2**40,
                "loss": 0.125,
                "healthy": True,
                "tags": ("a", "b"),
                "sizes": (1, 2, 3),
                "ratios": (0.5, 1.5),
                "flags": (True, False),
                semconv.NAMESPACE + "custom": "kept",
            },
        )
        window.add_event("tick", {"n": 1})
        window.end(end_time=T0 + 30_000_000_000)
        saver = tracer.start_span(
            semconv.SPAN_CHECKPOINT_SAVE,
            start_time=T0 + 30_000_000_000,
            attributes={
                semconv.CHECKPOINT_STEP: 200,
                semconv.CHECKPOINT_MODE: semconv.CheckpointModeValues.ASYNC.value,
                semconv.RANK: 3,  # a span attribute overrides the resource's rank
            },
        )
        saver.end(end_time=T0 + 30_500_000_000)
        failure = tracer.start_span(
            semconv.SPAN_FAILURE,
            start_time=T0 + 40_000_000_000,
            attributes={
                semconv.FAILURE_CAUSE: semconv.FailureCauseValues.OOM.value,
                semconv.ERROR_TYPE: "OutOfMemoryError",
            },
        )
        failure.end(end_time=T0 + 40_000_000_000)
        root.set_attribute(semconv.ATTEMPT_END_REASON, semconv.EndReasonValues.FAILED.value)
        root.end(end_time=T0 + 41_000_000_000)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    assert len(spans) == 5
    return spans


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _expected(span: ReadableSpan) -> SpanRecord:
    assert span.resource is not None and span.attributes is not None
    attrs = {k: _plain(v) for k, v in {**span.resource.attributes, **span.attributes}.items()}
    assert span.start_time is not None and span.end_time is not None
    return SpanRecord(
        trace_id=f"{span.context.trace_id:032x}",
        span_id=f"{span.context.span_id:016x}",
        name=span.name,
        start=span.start_time / 1e9,
        end=span.end_time / 1e9,
        job_id=str(attrs[semconv.JOB_ID]),
        attempt=int(attrs[semconv.ATTEMPT]),
        rank=int(attrs[semconv.RANK]),
        attributes=attrs,
    )


def _otlp_json(message: Any) -> bytes:
    """OTLP JSON of a request: proto3 JSON, but trace and span ids as hex (OTLP's exception)."""
    doc = json.loads(json_format.MessageToJson(message))
    for resource_spans in doc["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc).encode()


@pytest.fixture(scope="module")
def sdk_spans() -> Sequence[ReadableSpan]:
    return _sdk_spans()


def test_protobuf_roundtrip_keeps_every_field(sdk_spans: Sequence[ReadableSpan]) -> None:
    body = encode_spans(sdk_spans).SerializeToString()

    result = decode_traces(body, "application/x-protobuf", None, LIMIT)

    assert (result.rejected, result.rejected_message, result.unknown_span_names) == (0, "", 0)
    assert result.unknown_attributes == 1  # ett.custom on the window span
    by_id = {r.span_id: r for r in result.records}
    assert len(by_id) == len(sdk_spans)
    for span in sdk_spans:
        record = by_id[f"{span.context.span_id:016x}"]
        assert record == _expected(span)
    saver = next(r for r in result.records if r.name == semconv.SPAN_CHECKPOINT_SAVE)
    assert (saver.job_id, saver.attempt, saver.rank) == ("job-roundtrip", 2, 3)
    window = next(r for r in result.records if r.name == semconv.SPAN_TRAIN_WINDOW)
    assert window.attr(semconv.SAMPLES) == 2**40 and window.attr("tags") == ["a", "b"]
    assert window.attr(semconv.SERVICE_NAME) == "trainer"


def test_json_roundtrip_decodes_to_the_same_records(sdk_spans: Sequence[ReadableSpan]) -> None:
    request = encode_spans(sdk_spans)
    body = _otlp_json(request)
    assert b'"traceId": "' in body and b'"intValue": "' in body  # hex ids, int64 as strings

    from_json = decode_traces(body, "application/json", None, LIMIT)
    from_pb = decode_traces(request.SerializeToString(), "application/x-protobuf", None, LIMIT)

    assert from_json == from_pb
    assert sorted(r.span_id for r in from_json.records) == sorted(
        f"{s.context.span_id:016x}" for s in sdk_spans
    )


_OFFICIAL = {
    "ExportTraceServiceRequest": trace_service_pb2.ExportTraceServiceRequest.DESCRIPTOR,
    "ResourceSpans": trace_pb2.ResourceSpans.DESCRIPTOR,
    "Resource": resource_pb2.Resource.DESCRIPTOR,
    "ScopeSpans": trace_pb2.ScopeSpans.DESCRIPTOR,
    "Span": trace_pb2.Span.DESCRIPTOR,
}
_LENGTH_DELIMITED = {FieldDescriptor.TYPE_BYTES, FieldDescriptor.TYPE_MESSAGE}


@pytest.mark.parametrize("message", sorted(LAZY_SCHEMA))
def test_lazy_protobuf_view_matches_the_official_schema(message: str) -> None:
    official = _OFFICIAL[message]
    for name, number, field_type, repeated, type_name in LAZY_SCHEMA[message]:
        field = official.fields_by_number[number]
        assert field.name == name
        assert field.is_repeated == repeated
        if field_type in _LENGTH_DELIMITED:
            # A message may be viewed as raw bytes: both are length-delimited on the wire.
            assert field.type in _LENGTH_DELIMITED
            if type_name:
                assert field.message_type.name == type_name
        else:
            assert field.type == field_type
