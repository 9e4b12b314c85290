"""Decoding the OTLP/HTTP protobuf encoding of ``ExportTraceServiceRequest``.

For speed the body is parsed (by upb) with a *lazy view* of the OTLP schema: the same field
numbers and wire types as ``opentelemetry/proto/trace/v1/trace.proto``, but only the fields the
collector reads, and each attribute (``KeyValue``) kept as its raw bytes. Attributes repeat a lot
across spans (same key, same value), so a raw ``KeyValue`` is decoded with the official message
class only the first time it is seen and then served from a bounded cache. Fields the view does not
name (events, links, status, scope, ...) are skipped by the parser.
"""

from __future__ import annotations

from typing import Any, Final, cast

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ett_collector.otlp._batch import Attributes, ResourceContext, SpanBatch
from ett_collector.otlp._limits import (
    MAX_ATTRIBUTES,
    MAX_DEPTH,
    HexBytes,
    TooDeep,
    conformed,
    within_identity_limits,
)
from ett_collector.otlp._nesting import too_deep_key
from ett_collector.otlp._result import OtlpError

_PACKAGE: Final = "ett_otlp_lazy"
_F = descriptor_pb2.FieldDescriptorProto
_BYTES: Final[int] = _F.TYPE_BYTES
_STRING: Final[int] = _F.TYPE_STRING
_FIXED64: Final[int] = _F.TYPE_FIXED64
_MESSAGE: Final[int] = _F.TYPE_MESSAGE

LAZY_SCHEMA: Final[dict[str, tuple[tuple[str, int, int, bool, str], ...]]] = {
    # message: (field name, number, type, repeated, message type) -- numbers as in OTLP v1.
    "ExportTraceServiceRequest": (("resource_spans", 1, _MESSAGE, True, "ResourceSpans"),),
    "ResourceSpans": (
        ("resource", 1, _MESSAGE, False, "Resource"),
        ("scope_spans", 2, _MESSAGE, True, "ScopeSpans"),
    ),
    "Resource": (("attributes", 1, _BYTES, True, ""),),
    "ScopeSpans": (("spans", 2, _MESSAGE, True, "Span"),),
    "Span": (
        ("trace_id", 1, _BYTES, False, ""),
        ("span_id", 2, _BYTES, False, ""),
        ("name", 5, _STRING, False, ""),
        ("start_time_unix_nano", 7, _FIXED64, False, ""),
        ("end_time_unix_nano", 8, _FIXED64, False, ""),
        ("attributes", 9, _BYTES, True, ""),
    ),
}
"""The lazy view of the OTLP trace schema (checked against the official one by contract tests)."""


def _build_request_class(
    schema: dict[str, tuple[tuple[str, int, int, bool, str], ...]] = LAZY_SCHEMA,
    package: str = _PACKAGE,
) -> type[Message]:
    """The message class of ``schema``'s first message, in a pool of its own."""
    file_proto = descriptor_pb2.FileDescriptorProto(
        name=f"{package}.proto", package=package, syntax="proto3"
    )
    for message_name, fields in schema.items():
        message = file_proto.message_type.add(name=message_name)
        for field_name, number, field_type, repeated, type_name in fields:
            field = message.field.add(name=field_name, number=number, type=field_type)
            field.label = _F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL
            if type_name:
                field.type_name = f".{package}.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    descriptor = pool.FindMessageTypeByName(f"{package}.{next(iter(schema))}")
    return cast("type[Message]", message_factory.GetMessageClass(descriptor))


LazyExportTraceServiceRequest: Final = _build_request_class()
"""Message class of the lazy view of ``ExportTraceServiceRequest``."""

_RESOURCES_VIEW: Final = _build_request_class(
    {"Resources": (("resource_spans", 1, _BYTES, True, ""),)}, "ett_otlp_resources"
)
_COUNT_VIEW: Final = _build_request_class(
    {
        "Count": (("resource_spans", 1, _MESSAGE, True, "CountResource"),),
        "CountResource": (("scope_spans", 2, _MESSAGE, True, "CountScope"),),
        "CountScope": (("spans", 2, _BYTES, True, ""),),
    },
    "ett_otlp_count",
)
"""Views that only count a request's resource, scope and span messages (each kept as the few
bytes of a reference into the body), checked before the lazy view decodes them."""

MIN_MESSAGE_BYTES: Final = 16
"""The fewest bytes a resource, scope or span message of a request takes, on average, for the
request to be decoded: a span that can be stored holds a 16-byte trace id and an 8-byte span id
(28 bytes with their tags), and exporters wrap many spans in one resource and scope. Decoded,
each message costs about 100 bytes, so a body of empty messages (2 bytes each: 15.7 million
spans in 30 MiB) took 1.6 GB for one request and 3.1 GB for two; refused, a body costs at most
its own size again in references (16 bytes a message, :data:`_COUNT_VIEW`)."""
_SMALL_BODY: Final = 4096
"""Bytes a body may hold beyond its messages' quota (a request of one short span passes)."""


def _check_density(body: bytes) -> None:
    """Refuse (400) a body of more messages than :data:`MIN_MESSAGE_BYTES` allows, before the
    lazy view decodes them; a malformed body is left to that decode to name."""
    room = (len(body) + _SMALL_BODY) // MIN_MESSAGE_BYTES
    try:
        top = _RESOURCES_VIEW.FromString(body)
        resources = len(top.resource_spans)
        if resources <= room:
            del top  # before the second view: one reference array at a time
            count = _COUNT_VIEW.FromString(body)
            scopes = spans = 0
            for resource_spans in count.resource_spans:
                scope_list = resource_spans.scope_spans
                scopes += len(scope_list)
                spans += sum(len(scope.spans) for scope in scope_list)
            resources += scopes + spans
    except DecodeError:
        return
    if resources > room:
        raise OtlpError(
            400,
            f"implausible OTLP protobuf body: at least {resources:,} resource, scope and span "
            f"messages in {len(body):,} bytes (a span that can be stored takes 28 bytes or "
            "more); refused before decoding, which would take about 100 bytes a message",
        )


_CACHE_LIMIT: Final = 8192
_CACHE_MAX_ENTRY_BYTES: Final = 512
_SCALARS: Final = frozenset({"string_value", "bool_value", "int_value", "double_value"})
_ZERO_TRACE_ID: Final = bytes(16)
_ZERO_SPAN_ID: Final = bytes(8)


def any_value(value: AnyValue) -> Any:
    """The Python value of an OTLP ``AnyValue``: bytes as hex, arrays as lists, kvlists as dicts."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in _SCALARS:
        return getattr(value, kind)
    if kind == "bytes_value":
        return HexBytes(value.bytes_value.hex())
    if kind == "array_value":
        return [any_value(item) for item in value.array_value.values]
    return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}


class _AttributeCache(dict[bytes, tuple[str, Any]]):
    """Raw ``KeyValue`` bytes -> ``(key, value)``; a miss decodes it (``__missing__``).

    Only small scalar values are kept (arrays and kvlists are mutable, so each span gets its own;
    long strings would make the cache large), and the cache is emptied when it reaches
    ``_CACHE_LIMIT`` entries (a small cache stays in the CPU's caches: measured faster).
    ``clean`` holds the kept entries whose key and value are within every per-value limit,
    the identity values' included (:func:`within_identity_limits`): a span whose attributes are
    all in it needs no check of its values (:func:`_checked`).
    """

    def __init__(self) -> None:
        super().__init__()
        self.clean: set[bytes] = set()

    def __missing__(self, raw: bytes) -> tuple[str, Any]:
        try:
            kv = KeyValue.FromString(raw)
        except DecodeError as exc:
            key = too_deep_key(raw, MAX_DEPTH)  # upb's depth limit: this span alone, as JSON
            if key is not None:
                return key, TooDeep()
            raise OtlpError(400, f"malformed OTLP protobuf attribute: {exc}") from None
        value = kv.value
        kind = value.WhichOneof("value")
        if kind not in _SCALARS:
            return kv.key, any_value(value)
        result = (kv.key, conformed(kv.key, getattr(value, kind)))
        if len(raw) > _CACHE_MAX_ENTRY_BYTES:
            return result
        if len(self) >= _CACHE_LIMIT:
            self.clear()
            self.clean.clear()
        self[raw] = result
        if within_identity_limits(*result):
            self.clean.add(raw)
        return result


_CACHE: Final = _AttributeCache()
_lookup: Final = _CACHE.__getitem__
_clean: Final = _CACHE.clean.issuperset
_MAX_CHECKED: Final = MAX_ATTRIBUTES


def _attributes(raws: Any) -> Attributes:
    # dict() over cached (key, value) pairs runs in C; only unseen attributes reach Python code.
    return dict(map(_lookup, raws))


def _checked(raws: Any) -> bool:
    """Whether the attributes ``raws`` (looked up already) need no check of their values: each
    one a clean cache entry, and not more of them than the limit (set containment runs in C)."""
    return len(raws) <= _MAX_CHECKED and _clean(raws)


class _ResourceCache(dict[tuple[bytes, ...], ResourceContext]):
    """A resource's raw ``KeyValue`` bytes -> its :class:`ResourceContext` (identity, unknown
    keys, limits: read once). An exporter repeats its resource in every request, and a batch
    that an OpenTelemetry Collector merged from many ranks holds a resource per rank, as many
    as spans: without the cache each one cost its identity and checks again (decoding such a
    body took 9.5 us of CPU per span, 7.5 with the cache, against 4.6 with one resource per
    rank and request). Only resources whose every attribute is a clean scalar entry of
    :data:`_CACHE` are kept (a context is shared by every request that names it, and scalars
    cannot be changed through it), of at most :data:`_RESOURCE_MAX_BYTES` raw bytes; emptied
    at :data:`_RESOURCE_LIMIT` entries (so at most 16 MiB of keys)."""

    def context(self, raws: Any, batch: SpanBatch) -> ResourceContext:
        """The context of the resource whose attributes are ``raws``."""
        key = tuple(raws)
        found = self.get(key)
        if found is not None:
            return found
        context = batch.resource(_attributes(raws), _checked(raws))
        if context.checked and sum(map(len, key)) <= _RESOURCE_MAX_BYTES:
            if len(self) >= _RESOURCE_LIMIT:
                self.clear()
            self[key] = context
        return context


_RESOURCE_LIMIT: Final = 4096
_RESOURCE_MAX_BYTES: Final = 4096
_RESOURCES: Final = _ResourceCache()


def decode_protobuf(body: bytes, batch: SpanBatch) -> None:
    """Parse a protobuf ``ExportTraceServiceRequest`` into ``batch``; OtlpError 400 if malformed."""
    _check_density(body)
    request = LazyExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise OtlpError(400, f"malformed OTLP protobuf body: {exc}") from None
    add = batch.add
    zero_trace, zero_span = _ZERO_TRACE_ID, _ZERO_SPAN_ID
    resource_of = _RESOURCES.context
    for resource_spans in request.resource_spans:
        resource = resource_of(resource_spans.resource.attributes, batch)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                raws = span.attributes
                attrs = _attributes(raws)
                trace_id: bytes = span.trace_id
                span_id: bytes = span.span_id
                ids_ok = (
                    len(trace_id) == 16
                    and len(span_id) == 8
                    and trace_id != zero_trace
                    and span_id != zero_span
                )
                add(
                    resource,
                    trace_id.hex(),
                    span_id.hex(),
                    ids_ok,
                    span.name,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                    attrs,
                    _checked(raws),
                )
