"""Decoding the OTLP/HTTP JSON encoding of ``ExportTraceServiceRequest``.

Per the OTLP specification: keys in lowerCamelCase (the proto names in snake_case are accepted
too), ``traceId``/``spanId`` as hex strings, 64-bit integers as strings or numbers, ``bytesValue``
as base64, enums as integers.

``json.loads`` builds the whole body as Python objects before a span is read, at 50 to 200 bytes
an object, so a body of tiny values (``{},{},...``, ``[[]]``, ``""``) is refused first
(:data:`MIN_VALUE_BYTES`), counted at C speed without building any of them.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any, Final

from ett_collector.otlp._batch import Attributes, SpanBatch
from ett_collector.otlp._limits import INTEGER_KEYS, HexBytes, conformed
from ett_collector.otlp._result import OtlpError

_INT: Final = re.compile(r"-?[0-9]+")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_UINT64_MAX: Final = 2**64 - 1
_SPECIAL_DOUBLES: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _malformed(message: str) -> OtlpError:
    return OtlpError(400, f"malformed OTLP JSON body: {message}")


def _field(obj: dict[str, Any], camel: str, snake: str) -> Any:
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def _object(value: Any, what: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(f"{what} must be an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _malformed(f"{what} must be an array")
    return value


def _is_integral(value: Any) -> bool:
    if isinstance(value, str):
        return _INT.fullmatch(value) is not None
    return isinstance(value, float) and value.is_integer()


def _int64(value: Any, what: str) -> int:
    """A 64-bit integer (int64 or fixed64) written as a JSON number or a decimal string."""
    if type(value) is int:
        number = value
    elif _is_integral(value):
        if isinstance(value, str):
            # int() refuses strings past 4300 digits, leading zeros included: drop them first
            sign = "-" if value.startswith("-") else ""
            digits = value.lstrip("+-").lstrip("0") or "0"
            if len(digits) > 20:
                raise _malformed(f"{what} {value[:40]!r}... does not fit in 64 bits")
            number = int(sign + digits)
        else:
            number = int(value)
    elif value is None:
        return 0
    else:
        raise _malformed(f"{what} must be an integer (number or decimal string), not {value!r}")
    if not _INT64_MIN <= number <= _UINT64_MAX:
        raise _malformed(f"{what} {value!r} does not fit in 64 bits")
    return number


def _int_value(value: Any) -> int:
    """An ``intValue``: int64, signed (protobuf's varint could not carry 2**64 - 1 either)."""
    number = _int64(value, "intValue")
    if number > _INT64_MAX:
        raise _malformed(f"intValue {value!r} does not fit in a signed 64-bit integer")
    return number


def _double(value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        special = _SPECIAL_DOUBLES.get(value)
        if special is not None:
            return special
        try:
            return float(value)
        except ValueError:
            pass
    raise _malformed(f"doubleValue must be a number, not {value!r}")


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise _malformed(f"boolValue must be true or false, not {value!r}")


def _string(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise _malformed(f"stringValue must be a string, not {value!r}")


def _bytes_hex(value: Any) -> str:
    if not isinstance(value, str):
        raise _malformed(f"bytesValue must be a base64 string, not {value!r}")
    text = value.replace("-", "+").replace("_", "/")
    try:
        return HexBytes(base64.b64decode(text + "=" * (-len(text) % 4), validate=True).hex())
    except binascii.Error:
        raise _malformed(f"bytesValue {value!r} is not base64") from None


def _array(value: Any) -> list[Any]:
    return [any_value(item) for item in _list(_object(value, "arrayValue").get("values"), "values")]


def _kvlist(value: Any) -> dict[str, Any]:
    return attributes(_object(value, "kvlistValue").get("values"))


_CONVERTERS: Final = {
    "stringValue": _string,
    "boolValue": _bool,
    "intValue": _int_value,
    "doubleValue": _double,
    "arrayValue": _array,
    "kvlistValue": _kvlist,
    "bytesValue": _bytes_hex,
    "string_value": _string,
    "bool_value": _bool,
    "int_value": _int_value,
    "double_value": _double,
    "array_value": _array,
    "kvlist_value": _kvlist,
    "bytes_value": _bytes_hex,
}


def any_value(value: Any) -> Any:
    """The Python value of a JSON ``AnyValue`` (None when it holds no value)."""
    for key, item in _object(value, "AnyValue").items():
        convert = _CONVERTERS.get(key)
        if convert is not None and item is not None:
            return convert(item)
    return None


_PASSTHROUGH: Final = {
    "stringValue": str,
    "boolValue": bool,
    "intValue": int,
    "doubleValue": float,
    "string_value": str,
    "bool_value": bool,
    "int_value": int,
    "double_value": float,
}
"""The AnyValue kinds whose JSON value is already the Python value when it has this type."""


def attributes(values: Any) -> Attributes:
    """The attributes of a JSON list of ``KeyValue`` objects (a later duplicate key wins)."""
    out: Attributes = {}
    for kv in _list(values, "attributes"):
        if type(kv) is not dict:
            raise _malformed("KeyValue must be an object")
        key = kv.get("key", "")  # proto3 JSON omits a default (empty) key
        if type(key) is not str:
            raise _malformed(f"attribute key must be a string, not {key!r}")
        value = kv.get("value")
        if type(value) is dict and len(value) == 1:
            # The common case, one value kind: no need to search the object.
            for kind, item in value.items():
                if _PASSTHROUGH.get(kind) is type(item) and (
                    type(item) is not int or _INT64_MIN <= item <= _INT64_MAX
                ):
                    out[key] = item  # already the Python value
                else:
                    convert = _CONVERTERS.get(kind)
                    out[key] = None if convert is None or item is None else convert(item)
        else:
            out[key] = any_value(value)
        if key in INTEGER_KEYS and type(out[key]) is not int:
            out[key] = conformed(key, out[key])
    return out


def _hex_id(value: Any, size: int, what: str) -> tuple[str, bool]:
    """The lower-case hex of an id, and whether it is a valid (``size`` bytes, non-zero) id."""
    if value is None or value == "":
        return "", False
    if not isinstance(value, str):
        raise _malformed(f"{what} must be a hex string, not {value!r}")
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return value, False
    return raw.hex(), len(raw) == size and any(raw)


_VALUE_MARKS: Final = b",{["
"""Each value of a JSON body but the first of its object or array follows a comma, and each
object or array opens with a brace or a bracket: the marks outside a body's strings are one per
value, less one, plus one per empty object or array."""
_NOT_MARKS: Final = bytes(c for c in range(256) if c not in _VALUE_MARKS)
_NOT_MARKS_OR_QUOTES: Final = bytes(c for c in range(256) if c not in _VALUE_MARKS + b'"')
_CHUNK: Final = 1 << 20

MIN_VALUE_BYTES: Final = 6
"""The fewest bytes a JSON body takes a value (counted by :data:`_VALUE_MARKS`), on average, for
it to be decoded. The densest values that carry something are array items of one number,
``{"intValue":1},``: 15 bytes, two values (an attribute ``{"key":"a","value":{"intValue":1}},``
takes 9 bytes a value, a span of its ids alone 25, the OpenTelemetry SDK's spans 15). Decoded,
a value costs up to 200 bytes (a short string 50, an object 64, 184 with a member): 30 MiB of
empty spans, ``[]`` or ``[[]]`` items (1.5 to 2 bytes a value) took one request 0.8 to 1.2 GB
and 4 to 14 s, of ``"ab"`` items (5) 0.5 GB; refused, they cost two passes at C speed (0.2 s,
40 MB), and a real body one (17 ms of its 3 s). Only arrays of empty values (``{}`` items, 1.5
bytes a value, what an SDK sends for ``None``) are real and as dense: :data:`_SMALL_BODY` of
them pass."""
_SMALL_BODY: Final = 1 << 16
"""Bytes a body may hold beyond its values' quota (a request of a few spans of 256 empty values
passes; a bomb gains about 11,000 values, 2 MB)."""


def _marks_outside_strings(body: bytes, chunk_bytes: int = _CHUNK) -> int:
    """The :data:`_VALUE_MARKS` of ``body`` outside its strings, in passes at C speed: escaped
    backslashes and quotes dropped, every byte but marks and quotes dropped, then empty strings;
    what is left is split at its quotes a chunk at a time (a list per chunk, not per string)."""
    plain = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = plain.translate(None, _NOT_MARKS_OR_QUOTES).replace(b'""', b"")
    del plain
    count = 0
    inside = False
    for at in range(0, len(marks), chunk_bytes):
        chunk = marks[at : at + chunk_bytes]
        parts = (b'"' + chunk if inside else chunk).split(b'"')  # even parts: outside strings
        count += len(b"".join(parts[::2]))
        inside = len(parts) % 2 == 0
    return count


def _check_density(body: bytes) -> None:
    """Refuse (400) a body of more values than :data:`MIN_VALUE_BYTES` allows, before
    ``json.loads`` builds them: counted over the whole body first (marks inside strings
    included, one pass), and only when that is over, outside strings alone."""
    room = (len(body) + _SMALL_BODY) // MIN_VALUE_BYTES
    if len(body.translate(None, _NOT_MARKS)) <= room:
        return
    values = _marks_outside_strings(body)
    if values > room:
        raise OtlpError(
            400,
            f"implausible OTLP JSON body: {values:,} values (commas, braces and brackets outside "
            f"strings) in {len(body):,} bytes, {len(body) / values:.1f} bytes a value (real spans "
            f"stay above {MIN_VALUE_BYTES}); refused before decoding, which would "
            "take 50 to 200 bytes a value",
        )


def decode_json(body: bytes, batch: SpanBatch) -> None:
    """Parse an OTLP JSON ``ExportTraceServiceRequest`` into ``batch``.

    Raises :class:`OtlpError` 400 when the body is not valid OTLP JSON, or holds more values
    than real spans could (:func:`_check_density`).
    """
    _check_density(body)
    try:
        request = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _malformed(str(exc)) from None
    if request is None:  # _object takes a missing field's null as empty; the request is no field
        raise _malformed("the request must be an object, not null")
    try:
        _walk(_object(request, "the request"), batch)
    except RecursionError:
        raise _malformed("values nested too deeply") from None


def _walk(request: dict[str, Any], batch: SpanBatch) -> None:
    all_resource_spans = _field(request, "resourceSpans", "resource_spans")
    for resource_spans in _list(all_resource_spans, "resourceSpans"):
        resource_spans = _object(resource_spans, "ResourceSpans")
        resource = _object(resource_spans.get("resource"), "resource")
        context = batch.resource(attributes(resource.get("attributes")))
        scopes = _field(resource_spans, "scopeSpans", "scope_spans")
        for scope_spans in _list(scopes, "scopeSpans"):
            for span in _list(_object(scope_spans, "ScopeSpans").get("spans"), "spans"):
                try:
                    _span(span, context, batch)
                except OtlpError as exc:  # this span's field of the wrong type: this span only
                    _reject_unreadable(span, exc, batch)


def _span(span: Any, context: Any, batch: SpanBatch) -> None:
    """Decode one JSON ``Span`` into ``batch``; raises :class:`OtlpError` on a field of the wrong
    type (the caller rejects this span alone)."""
    span = _object(span, "Span")
    trace_id, trace_ok = _hex_id(_field(span, "traceId", "trace_id"), 16, "traceId")
    span_id, span_ok = _hex_id(_field(span, "spanId", "span_id"), 8, "spanId")
    name = span.get("name")
    if name is None:
        name = ""
    elif not isinstance(name, str):
        raise _malformed(f"span name must be a string, not {name!r}")
    start = _field(span, "startTimeUnixNano", "start_time_unix_nano")
    end = _field(span, "endTimeUnixNano", "end_time_unix_nano")
    batch.add(
        context,
        trace_id,
        span_id,
        trace_ok and span_ok,
        name,
        _int64(start, "startTimeUnixNano"),
        _int64(end, "endTimeUnixNano"),
        attributes(span.get("attributes")),
    )


def _reject_unreadable(span: Any, exc: OtlpError, batch: SpanBatch) -> None:
    """Reject a span :func:`_span` could not read, named by whatever of it is readable."""
    fields = span if isinstance(span, dict) else {}
    name = fields.get("name")
    ids = [_field(fields, "traceId", "trace_id"), _field(fields, "spanId", "span_id")]
    trace_id, span_id = (v if isinstance(v, str) else "?" for v in ids)
    reason = exc.message.removeprefix("malformed OTLP JSON body: ")
    batch.reject(
        name if isinstance(name, str) else "?", trace_id, span_id, "is malformed: " + reason
    )
