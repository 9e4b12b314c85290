"""Simulated spans and their OTLP/HTTP protobuf encoding (``ExportTraceServiceRequest``).

The framing (request, resource spans, scope spans, span) is written field by field with the
field numbers of ``opentelemetry/proto/trace/v1/trace.proto``; each attribute is serialized once
by opentelemetry-proto's own ``KeyValue`` message and then reused, since the same few key/value
pairs repeat on most spans. The contract test decodes the bytes with the official
``ExportTraceServiceRequest`` and compares every field. Byte-identical output for equal input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from instrument import semconv as sc

AttrValue = str | bool | int | float
Attrs = tuple[tuple[str, AttrValue], ...]
SimSpan = tuple[str, int, int, Attrs]
"""``(name, start_ms, end_ms, attributes)``: instants in unix milliseconds."""

SERVICE_NAME: Final = "ett-simulator"
SCOPE_NAME: Final = "simulator"
_MS_NS: Final = 1_000_000
_MASK64: Final = (1 << 64) - 1
_KIND_INTERNAL: Final = b"\x30\x01"  # field 6 (kind) varint 1 = SPAN_KIND_INTERNAL
_pack_u64: Final = struct.Struct("<Q").pack


@dataclass(slots=True)
class RankSpans:
    """Every span one rank of one attempt emits, with its identity (the OTLP resource)."""

    job_id: str
    attempt: int
    rank: int
    world_size: int
    model: str
    team: str
    trace_id: bytes
    span_base: int
    spans: list[SimSpan] = field(default_factory=list)

    def add(self, name: str, start_ms: int, end_ms: int, attrs: Attrs = ()) -> None:
        """Append one span."""
        self.spans.append((name, start_ms, end_ms, attrs))

    def resource_attrs(self) -> Attrs:
        """The resource attributes: identity, model, team, service and host."""
        return (
            (sc.JOB_ID, self.job_id),
            (sc.ATTEMPT, self.attempt),
            (sc.RANK, self.rank),
            (sc.WORLD_SIZE, self.world_size),
            (sc.MODEL, self.model),
            (sc.TEAM, self.team),
            (sc.SERVICE_NAME, SERVICE_NAME),
            (sc.HOST_NAME, f"{self.job_id}-a{self.attempt}-node{self.rank // 8}"),
        )


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: tag byte, length, payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


def _any_value(value: AttrValue) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(string_value=value)


class Encoder:
    """Encodes :class:`RankSpans` into request bodies; caches attribute and name fields."""

    def __init__(self) -> None:
        self._attrs: dict[tuple[str, type, AttrValue], bytes] = {}
        self._names: dict[str, bytes] = {}
        self._scope = _field(0x0A, _field(0x0A, SCOPE_NAME.encode()))

    def _attr(self, key: str, value: AttrValue, tag: int) -> bytes:
        cache_key = (key, type(value), value)
        hit = self._attrs.get(cache_key)
        if hit is None:
            kv = KeyValue(key=key, value=_any_value(value)).SerializeToString()
            hit = _field(tag, kv)
            if len(self._attrs) < 65536:
                self._attrs[cache_key] = hit
        return hit

    def _name(self, name: str) -> bytes:
        hit = self._names.get(name)
        if hit is None:
            hit = self._names[name] = _field(0x2A, name.encode())
        return hit

    def span(self, trace_id: bytes, span_id: int, span: SimSpan) -> bytes:
        """One ``Span`` message (without its own tag and length)."""
        name, start_ms, end_ms, attrs = span
        attr = self._attr
        parts = [
            b"\x0a\x10",
            trace_id,
            b"\x12\x08",
            _pack_u64(span_id),
            self._name(name),
            _KIND_INTERNAL,
            b"\x39",
            _pack_u64(start_ms * _MS_NS),
            b"\x41",
            _pack_u64(end_ms * _MS_NS),
        ]
        parts += [attr(k, v, 0x4A) for k, v in attrs]
        return b"".join(parts)

    def resource_spans(self, rank: RankSpans, first: int, stop: int) -> bytes:
        """One ``ResourceSpans`` message holding ``rank.spans[first:stop]``."""
        resource = b"".join(self._attr(k, v, 0x0A) for k, v in rank.resource_attrs())
        base = rank.span_base
        spans = [
            _field(0x12, self.span(rank.trace_id, ((base + i) & _MASK64) or 1, rank.spans[i]))
            for i in range(first, stop)
        ]
        scope_spans = self._scope + b"".join(spans)
        return _field(0x0A, resource) + _field(0x12, scope_spans)

    def requests(self, ranks: Iterable[RankSpans], batch_spans: int) -> Iterator[tuple[bytes, int]]:
        """Request bodies of at most ``batch_spans`` spans each, with their span counts; a
        rank's spans may be split over consecutive requests."""
        parts: list[bytes] = []
        count = 0
        for rank in ranks:
            i, n = 0, len(rank.spans)
            while i < n:
                take = min(n - i, batch_spans - count)
                parts.append(_field(0x0A, self.resource_spans(rank, i, i + take)))
                count += take
                i += take
                if count >= batch_spans:
                    yield b"".join(parts), count
                    parts, count = [], 0
        if count:
            yield b"".join(parts), count
