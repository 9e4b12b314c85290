"""A JSON export body of tiny values is refused before ``json.loads`` builds it; real bodies,
the densest included, are decoded (``_json.MIN_VALUE_BYTES``)."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ett import semconv
from ett_collector.otlp import DecodeResult, OtlpError, _json, decode_traces
from ett_collector.otlp._json import MIN_VALUE_BYTES

JSON = "application/json"
LIMIT = 32 << 20
SLACK = _json._SMALL_BODY
SIZE = 16 * SLACK
"""Bodies of the tests are this long at least, well past the slack of small requests."""
IDENTITY = [
    {"key": semconv.JOB_ID, "value": {"stringValue": "job-dense"}},
    {"key": semconv.ATTEMPT, "value": {"intValue": "0"}},
    {"key": semconv.RANK, "value": {"intValue": "0"}},
]


def decode(body: bytes, encoding: str | None = None) -> DecodeResult:
    return decode_traces(body, JSON, encoding, LIMIT)


def refusal(body: bytes, encoding: str | None = None) -> OtlpError:
    with pytest.raises(OtlpError) as caught:
        decode(body, encoding)
    return caught.value


def span(n: int, attributes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A span of the fields a stored span needs, and ``attributes``."""
    out: dict[str, Any] = {
        "traceId": f"{n + 1:032x}",
        "spanId": f"{n + 1:016x}",
        "name": "s",
        "startTimeUnixNano": str(1_790_000_000_000_000_000 + n),
        "endTimeUnixNano": str(1_790_000_001_000_000_000 + n),
    }
    if attributes is not None:
        out["attributes"] = attributes
    return out


def export(spans: list[Any], resource: list[dict[str, Any]] | None = None) -> bytes:
    """A compact OTLP JSON body: one resource (the identity by default), one scope."""
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": IDENTITY if resource is None else resource},
                "scopeSpans": [{"spans": spans}],
            }
        ]
    }
    return json.dumps(doc, separators=(",", ":")).encode()


def spans_of(make: Any, size: int = SIZE) -> list[Any]:
    """As many spans ``make(n)`` as fill ``size`` bytes of body."""
    one = len(json.dumps(make(0), separators=(",", ":"))) + 1
    return [make(n) for n in range(size // one + 1)]


def array_of(item: dict[str, Any], count: int = 250) -> list[dict[str, Any]]:
    """One attribute holding an array of ``count`` items (250: within the 256 values a span may
    carry)."""
    return [{"key": "a", "value": {"arrayValue": {"values": [item] * count}}}]


def filled(head: bytes, item: bytes, tail: bytes, size: int = SIZE) -> bytes:
    """``head``, ``item`` repeated (its trailing comma dropped at the end), ``tail``."""
    return head + item * (size // len(item)) + item.rstrip(b",") + tail


SPANS_HEAD = b'{"resourceSpans":[{"scopeSpans":[{"spans":['
SPANS_TAIL = b"]}]}]}"
IN_SPAN = SPANS_HEAD + json.dumps(span(0))[:-1].encode() + b',"x":['
IN_SPAN_TAIL = b"]}" + SPANS_TAIL
ARRAY_HEAD = SPANS_HEAD + json.dumps(span(0))[:-1].encode()
ARRAY_HEAD += b',"attributes":[{"key":"a","value":{"arrayValue":{"values":['
ARRAY_TAIL = b"]}}}]}" + SPANS_TAIL

BOMBS = {
    "empty spans": filled(SPANS_HEAD, b"{},", SPANS_TAIL),
    "empty resource spans": filled(b'{"resourceSpans":[', b"{},", b"]}"),
    "empty lists": filled(IN_SPAN, b"[],", IN_SPAN_TAIL),
    "nested lists": filled(IN_SPAN, b"[[[]]],", IN_SPAN_TAIL),
    "empty strings": filled(IN_SPAN, b'"",', IN_SPAN_TAIL),
    "zeros": filled(IN_SPAN, b"0,", IN_SPAN_TAIL),
    "short strings": filled(IN_SPAN, b'"ab",', IN_SPAN_TAIL),
    "objects of one member": filled(IN_SPAN, b'{"":0},', IN_SPAN_TAIL),
    "empty values in an array": filled(ARRAY_HEAD, b"{},", ARRAY_TAIL),
}
"""Bodies of tiny values: 30 MiB of empty spans took one request 0.8 GB and 12 s to decode,
nested lists 1.2 GB (1.5 to 5 bytes a value)."""


@pytest.mark.parametrize("body", list(BOMBS.values()), ids=list(BOMBS))
def test_a_body_of_tiny_values_is_refused_before_it_is_decoded(body: bytes) -> None:
    json.loads(body)  # valid JSON: the decoder took each of them (200)
    error = refusal(body)
    assert error.status == 400 and "implausible OTLP JSON body" in error.message
    assert f"in {len(body):,} bytes" in error.message


def test_a_gzip_body_is_counted_inflated() -> None:
    body = BOMBS["empty spans"]
    squeezed = gzip.compress(body)
    assert len(squeezed) < len(body) // 100
    error = refusal(squeezed, "gzip")
    assert error.status == 400 and f"in {len(body):,} bytes" in error.message


def _attribute(n: int, item: dict[str, Any]) -> dict[str, Any]:
    return {"key": f"k{n}", "value": item}


DENSEST = {
    # name: (a span of the densest real values, the same values emptied)
    "numbers in arrays": (
        lambda n: span(n, array_of({"intValue": 1})),
        lambda n: span(n, array_of({})),
    ),
    "int64 strings in arrays": (
        lambda n: span(n, array_of({"intValue": "1"})),
        lambda n: span(n, array_of({})),
    ),
    "booleans in arrays (snake case)": (
        lambda n: span(n, array_of({"bool_value": True})),
        lambda n: span(n, array_of({})),
    ),
    "key-value lists in arrays": (
        lambda n: span(n, array_of({"kvlistValue": {"values": [{"key": "k"}]}}, 125)),
        lambda n: span(n, array_of({}, 250)),
    ),
    "attributes of one number": (
        lambda n: span(n, [_attribute(i, {"intValue": "1"}) for i in range(250)]),
        lambda n: span(n, [{}] * 250),
    ),
    "spans of what a stored span needs alone": (span, lambda n: {}),
}


@pytest.mark.parametrize(("real", "empty"), list(DENSEST.values()), ids=list(DENSEST))
def test_the_densest_real_values_are_decoded_and_emptied_refused(real: Any, empty: Any) -> None:
    body = export(spans_of(real))
    assert len(body) >= SIZE
    result = decode(body)
    assert result.records and result.rejected == 0, result.rejected_message
    assert refusal(export(spans_of(empty))).status == 400


def _sdk_body(spans: int, indent: int | None) -> bytes:
    """OTLP JSON of spans the OpenTelemetry SDK made and its encoder encoded: proto3 JSON, the
    ids as hex (OTLP's exception)."""
    resource = Resource.create({semconv.JOB_ID: "job-sdk", semconv.ATTEMPT: 0, semconv.RANK: 0})
    provider = TracerProvider(resource=resource)
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("ett")
    t0 = 1_790_000_000 * 10**9
    for i in range(spans):
        attrs = {semconv.STEP_FIRST: i, semconv.STEP_LAST: i + 9, semconv.SAMPLES: 640}
        s = tracer.start_span(semconv.SPAN_TRAIN_WINDOW, start_time=t0 + i, attributes=attrs)
        s.set_attribute("tags", [1, 2, 3])
        s.end(end_time=t0 + i + 10**9)
    provider.shutdown()
    doc = json_format.MessageToDict(encode_spans(memory.get_finished_spans()))
    for resource_spans in doc["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for one in scope_spans["spans"]:
                for key in ("traceId", "spanId"):
                    one[key] = base64.b64decode(one[key]).hex()
    separators = None if indent else (",", ":")
    return json.dumps(doc, indent=indent, separators=separators).encode()


@pytest.mark.parametrize("indent", [None, 2])
def test_sdk_bodies_are_decoded_and_with_empty_values_refused(indent: int | None) -> None:
    body = _sdk_body(2100, indent)
    assert len(body) >= SIZE
    result = decode(body)
    assert (len(result.records), result.rejected) == (2100, 0), result.rejected_message
    padded = body[:-1] + b',"x":[' + b"{}," * (len(body) // 3) + b"{}]}"
    assert refusal(padded).status == 400  # as many bytes again of empty objects


def _at_limit(head: bytes, item: bytes, tail: bytes) -> tuple[bytes, int]:
    """A body of ``head``, items and ``tail`` padded with spaces to the fewest bytes that let
    its commas, braces and brackets outside strings in (a byte less refuses it), and their
    count; about :data:`SIZE` bytes."""
    fixed, each = _marks((head + tail).decode()), _marks(item.decode())
    marks = fixed + (SIZE // MIN_VALUE_BYTES - fixed) // each * each
    body = head + item * ((marks - fixed) // each) + tail
    size = marks * MIN_VALUE_BYTES - SLACK
    assert len(body) < size
    return body + b" " * (size - len(body)), marks


def test_a_body_at_the_limit_is_decoded_and_a_byte_less_refused() -> None:
    body, marks = _at_limit(SPANS_HEAD, b"{},", b"{}" + SPANS_TAIL)
    assert body.count(b",") + body.count(b"{") + body.count(b"[") == marks
    assert decode(body).rejected == body.count(b"{}")  # each empty span, not the body
    error = refusal(body[:-1])
    assert f"{marks:,} values" in error.message


def test_marks_inside_strings_do_not_count() -> None:
    """Strings full of commas, braces, brackets, escaped quotes and backslashes (a CSV list, a
    JSON text as a value) are counted over in the first pass, and exactly in the second."""
    text = '{"a":[1,2,{"b":"\\\\"}]},[,,{{[[' * 500
    assert len(text) < 16_384
    real = export([span(n, [{"key": "note", "value": {"stringValue": text}}]) for n in range(60)])
    assert len(real) >= SIZE
    total = real.count(b",") + real.count(b"{") + real.count(b"[")
    assert total * MIN_VALUE_BYTES > len(real) + SLACK  # the first pass is over
    result = decode(real)
    assert (len(result.records), result.rejected) == (60, 0), result.rejected_message
    # At the limit by the marks outside strings alone: decoded; a byte less: refused.
    noted = json.dumps(span(0, [{"key": "note", "value": {"stringValue": text}}]))
    head = SPANS_HEAD + noted[:-1].encode() + b',"x":['
    body, _ = _at_limit(head, b"0,", b"0]}" + SPANS_TAIL)
    assert decode(body).rejected == 1  # no identity: the span alone, not the body
    assert refusal(body[:-1]).status == 400


def _marks(text: str) -> int:
    """Commas, braces and brackets of the JSON ``text`` outside its strings, read char by char."""
    count, inside, escaped = 0, False, False
    for char in text:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
        elif char in ",{[":
            count += 1
    return count


_TRICKY = st.text(alphabet='",{[]}\\aé\n', max_size=12)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TRICKY, inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(value=_VALUES, chunk=st.integers(1, 9), ascii_only=st.booleans())
def test_marks_are_counted_outside_strings_exactly(
    value: Any, chunk: int, ascii_only: bool
) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)
    # Chunks of a few bytes: their borders fall inside and outside strings, and between escapes.
    assert _json._marks_outside_strings(text.encode(), chunk) == _marks(text)
