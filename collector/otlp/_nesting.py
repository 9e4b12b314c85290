"""How deep an OTLP ``KeyValue``'s value nests, read from its protobuf bytes by hand.

upb refuses a message nested more than 100 messages deep (``Exceeded
upb_DecodeOptions_MaxDepth``): a ``KeyValue`` whose value holds 34 key-value lists in one
another (three messages a level) cannot be decoded at all, and a ``DecodeError`` there used to
fail the whole request. :func:`too_deep_key` tells such an attribute from a malformed one, so
that only its span is rejected (``_limits.MAX_DEPTH``), as the same value sent as JSON is. It
walks the wire format (field numbers of ``opentelemetry/proto/common/v1/common.proto``) and goes
no deeper than one level past the limit; bytes it cannot read where it looks stay a malformed
request (400).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

_KEY_VALUE, _ANY_VALUE, _ARRAY, _KV_LIST = range(4)
_CHILDREN: Final[dict[tuple[int, int], int]] = {
    (_KEY_VALUE, 2): _ANY_VALUE,  # KeyValue.value
    (_ANY_VALUE, 5): _ARRAY,  # AnyValue.array_value
    (_ANY_VALUE, 6): _KV_LIST,  # AnyValue.kvlist_value
    (_ARRAY, 1): _ANY_VALUE,  # ArrayValue.values
    (_KV_LIST, 1): _KEY_VALUE,  # KeyValueList.values
}
"""The length-delimited fields that hold a message of the value's tree."""


class _Malformed(ValueError):
    pass


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise _Malformed
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes, at: int, end: int) -> Iterator[tuple[int, int, int]]:
    """``(field number, start, end)`` of each length-delimited field of the message in
    ``data[at:end]``, skipping the others; :class:`_Malformed` when it cannot be read."""
    while at < end:
        tag, at = _varint(data, at)
        wire = tag & 7
        if wire == 0:
            _, at = _varint(data, at)
        elif wire == 1:
            at += 8
        elif wire == 5:
            at += 4
        elif wire == 2:
            size, at = _varint(data, at)
            if at + size > end:
                raise _Malformed
            yield tag >> 3, at, at + size
            at += size
        else:
            raise _Malformed
        if at > end:
            raise _Malformed


def _deeper(data: bytes, at: int, end: int, message: int, depth: int, limit: int) -> bool:
    """Whether the ``message`` in ``data[at:end]`` nests arrays or key-value lists more than
    ``limit`` deep, ``depth`` being those around it; :class:`_Malformed` when it cannot be read."""
    found = False
    for number, start, stop in _fields(data, at, end):
        child = _CHILDREN.get((message, number))
        if child is not None and not found:
            inner = depth + 1 if child in (_ARRAY, _KV_LIST) else depth
            found = inner > limit or _deeper(data, start, stop, child, inner, limit)
    return found


def too_deep_key(raw: bytes, limit: int) -> str | None:
    """The key of the protobuf ``KeyValue`` ``raw`` when its value nests arrays and key-value
    lists more than ``limit`` deep; None when it does not, or cannot be read that far."""
    try:
        if not _deeper(raw, 0, len(raw), _KEY_VALUE, 0, limit):
            return None
        key = b""
        for number, start, stop in _fields(raw, 0, len(raw)):
            if number == 1:  # KeyValue.key, the last one given
                key = raw[start:stop]
        return key.decode("utf-8", "replace")
    except _Malformed:
        return None
