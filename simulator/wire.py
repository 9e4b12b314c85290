"""Simulated spans and their OTLP/HTTP protobuf encoding (``ExportTraceServiceRequest``).

Written field by field with the field numbers and wire types of
``opentelemetry/proto/trace/v1/trace.proto`` and ``common.proto`` (building opentelemetry-proto's
Python messages costs about 5 us each, more than the whole model of a span); each distinct
attribute tuple is encoded once and reused. The contract test decodes the bytes with the official
``ExportTraceServiceRequest`` and compares every field. Byte-identical output for equal input.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

from ett import semconv as sc

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


def _varint_slow(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SHORT: Final = [_varint_slow(i) for i in range(1 << 14)]


def _varint(n: int) -> bytes:
    return _SHORT[n] if n < 16384 else _varint_slow(n)


def _field(tag: int, payload: bytes) -> bytes:
    """A length-delimited field: tag byte, length, payload."""
    return bytes((tag,)) + _varint(len(payload)) + payload


_pack_double: Final = struct.Struct("<d").pack


def key_value(key: str, value: AttrValue) -> bytes:
    """An OTLP ``KeyValue`` message: key (field 1) and an ``AnyValue`` (field 2) holding a string
    (1), bool (2), int64 (3, two's complement varint) or double (4)."""
    if isinstance(value, bool):
        any_value = b"\x10\x01" if value else b"\x10\x00"
    elif isinstance(value, int):
        any_value = b"\x18" + _varint_slow(value & _MASK64)
    elif isinstance(value, float):
        any_value = b"\x21" + _pack_double(value)
    else:
        any_value = _field(0x0A, value.encode())
    return _field(0x0A, key.encode()) + _field(0x12, any_value)


_times: Final = struct.Struct("<BQBQ").pack  # fields 7 and 8: fixed64 start and end


class Encoder:
    """Encodes :class:`RankSpans` into request bodies.

    Caches the encoded attributes of each distinct attribute tuple (within the vocabulary a key
    always has one type, so ``True`` and ``1`` never share a key) and each span name's field.
    """

    _LIMIT: Final = 1 << 16

    def __init__(self) -> None:
        self._attrs: dict[Attrs, bytes] = {}
        self._names: dict[str, bytes] = {}
        self._keys: dict[str, bytes] = {}
        # spans shared by the ranks of an attempt (windows) are encoded once: id -> (span, ...),
        # the span kept so that its id cannot be reused while cached
        self._rest: dict[int, tuple[SimSpan, bytes, bytes]] = {}
        self._scope = _field(0x0A, _field(0x0A, SCOPE_NAME.encode()))

    def _encode_attrs(self, attrs: Attrs, tag: int = 0x4A) -> bytes:
        hit = self._attrs.get(attrs) if tag == 0x4A else None
        if hit is None:
            keys = self._keys
            prefix = bytes((tag,))
            parts: list[bytes] = []
            for k, v in attrs:
                key = keys.get(k)
                if key is None:
                    key = keys[k] = _field(0x0A, k.encode())
                if type(v) is int and 0 <= v < 16384:
                    value = b"\x12" + _SHORT[1 + len(_SHORT[v])] + b"\x18" + _SHORT[v]
                elif type(v) is int and 0 <= v <= _MASK64:  # as key_value, without its calls
                    n = _varint_slow(v)
                    value = b"\x12" + _SHORT[1 + len(n)] + b"\x18" + n
                elif type(v) is float:  # AnyValue double: tag 0x21 and 8 bytes
                    value = b"\x12\x09\x21" + _pack_double(v)
                else:
                    value = key_value("", v)[2:]  # drop the empty key's field
                parts += (prefix, _varint(len(key) + len(value)), key, value)
            hit = b"".join(parts)
            if tag == 0x4A:
                if len(self._attrs) >= self._LIMIT:
                    self._attrs.clear()
                self._attrs[attrs] = hit
        return hit

    def _name(self, name: str) -> bytes:
        hit = self._names.get(name)
        if hit is None:
            hit = self._names[name] = _field(0x2A, name.encode()) + _KIND_INTERNAL
        return hit

    def resource_spans(self, rank: RankSpans, first: int, stop: int) -> bytes:
        """One ``ResourceSpans`` message holding ``rank.spans[first:stop]``."""
        resource = self._encode_attrs(rank.resource_attrs(), 0x0A)
        head = b"\x0a\x10" + rank.trace_id + b"\x12\x08"
        base = rank.span_base
        names, attrs_of, varint, cache = self._name, self._encode_attrs, _varint, self._rest
        if len(cache) >= self._LIMIT:
            cache.clear()
        parts = [self._scope]
        add = parts.extend
        spans = rank.spans
        for i in range(first, stop):
            span = spans[i]
            hit = cache.get(id(span))
            if hit is None or hit[0] is not span:
                name, start_ms, end_ms, attrs = span
                rest = b"".join(
                    (
                        names(name),
                        _times(0x39, start_ms * _MS_NS, 0x41, end_ms * _MS_NS),
                        attrs_of(attrs) if attrs else b"",
                    )
                )
                # tag 2 of ScopeSpans, then the length of ids (2 + 16 + 2 + 8 bytes) and the rest
                hit = cache[id(span)] = (span, b"\x12" + varint(28 + len(rest)), rest)
            add((hit[1], head, _pack_u64(((base + i) & _MASK64) or 1), hit[2]))
        return _field(0x0A, resource) + _field(0x12, b"".join(parts))

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
