"""An attribute value nested deeper than 32 levels rejects its span alone, in both encodings.

upb stops at 33 key-value lists in one another (its 100-message depth limit): a protobuf
request holding one failed whole with 400 ("Exceeded upb_DecodeOptions_MaxDepth"), losing the
valid spans beside it, where the same request as JSON was taken. Now both reject the span alone
past ``MAX_DEPTH`` (32) and keep the others (docs/collector.md, "Partial success")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ett import semconv
from ett_collector.otlp import DecodeResult, OtlpError, decode_traces
from ett_collector.otlp._limits import MAX_DEPTH
from ett_collector.otlp._nesting import too_deep_key
from tests.unit.collector.test_otlp import JSON, LIMIT, PB, json_body, request


def _ld(field: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field (built by hand: upb copies no message that deep)."""
    size, prefix = len(payload), b""
    while size >= 0x80:
        prefix += bytes([size & 0x7F | 0x80])
        size >>= 7
    return bytes([field << 3 | 2]) + prefix + bytes([size]) + payload


def nested(kind: str, depth: int) -> bytes:
    """The protobuf ``KeyValue`` ``my.deep``: a string inside ``depth`` arrays or kvlists."""
    value = _ld(1, b"bottom")  # AnyValue.string_value
    for _ in range(depth):
        if kind == "kvlist":  # AnyValue.kvlist_value: KeyValueList.values: KeyValue
            value = _ld(6, _ld(1, _ld(1, b"k") + _ld(2, value)))
        else:  # AnyValue.array_value: ArrayValue.values
            value = _ld(5, _ld(1, value))
    return _ld(1, b"my.deep") + _ld(2, value)


def nested_json(kind: str, depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {"stringValue": "bottom"}
    for _ in range(depth):
        if kind == "kvlist":
            value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
        else:
            value = {"arrayValue": {"values": [value]}}
    return {"key": "my.deep", "value": value}


def decode_both(depth: int, kind: str, on_resource: bool = False) -> list[DecodeResult]:
    """The same request, protobuf and JSON: spans ``ett.step`` 1 and 2, ``my.deep`` on the
    second span (or on the resource)."""
    req = request([{"attrs": {semconv.STEP: 1}}, {"attrs": {semconv.STEP: 2}}])
    doc = json.loads(json_body(req))
    resource_spans = req.resource_spans[0]
    spans = resource_spans.scope_spans[0].spans
    second = bytes(spans[1].SerializeToString())
    del spans[1]
    rs = bytes(resource_spans.SerializeToString())  # a field sent twice: merged (repeated: added)
    if on_resource:
        rs += _ld(1, _ld(1, nested(kind, depth)))  # ResourceSpans.resource.attributes
        doc["resourceSpans"][0]["resource"]["attributes"].append(nested_json(kind, depth))
    else:
        second += _ld(9, nested(kind, depth))  # Span.attributes
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"].append(
            nested_json(kind, depth)
        )
    rs += _ld(2, _ld(2, second))  # ResourceSpans.scope_spans: ScopeSpans.spans
    bodies = [(_ld(1, rs), PB), (json.dumps(doc).encode(), JSON)]
    return [decode_traces(body, ctype, None, LIMIT) for body, ctype in bodies]


@pytest.mark.parametrize("kind", ["kvlist", "array"])
@pytest.mark.parametrize("depth", [1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, 50, 120])
def test_too_deep_a_value_rejects_its_span_alone_in_both_encodings(kind: str, depth: int) -> None:
    proto, json = decode_both(depth, kind)
    for result in (proto, json):
        if depth <= MAX_DEPTH:
            assert (len(result.records), result.rejected) == (2, 0), result.rejected_message
        else:
            assert (len(result.records), result.rejected) == (1, 1)
            assert [r.attributes[semconv.STEP] for r in result.records] == [1]
            assert "has attribute 'my.deep' nested deeper than 32 levels" in (
                result.rejected_message
            )
    assert proto.rejected_message == json.rejected_message
    if depth <= MAX_DEPTH:
        assert proto.records[1].attributes["my.deep"] == json.records[1].attributes["my.deep"]


def test_too_deep_a_resource_value_rejects_its_spans_in_both_encodings() -> None:
    results = decode_both(40, "kvlist", on_resource=True)
    assert [(len(r.records), r.rejected) for r in results] == [(0, 2), (0, 2)]
    assert results[0].rejected_message == results[1].rejected_message


def test_a_cut_attribute_is_malformed_not_deep() -> None:
    """Only a readable value found deeper than the limit rejects a span alone; bytes that do not
    parse stay a malformed request (400)."""
    raw = nested("kvlist", 40)
    assert too_deep_key(raw, MAX_DEPTH) == "my.deep"
    assert too_deep_key(raw[: len(raw) // 2], MAX_DEPTH) is None
    assert too_deep_key(raw + b"\x0f", MAX_DEPTH) is None  # wire type 7 does not exist
    shallow = nested("array", MAX_DEPTH)
    assert too_deep_key(shallow, MAX_DEPTH) is None
    req = request([{"attrs": {semconv.STEP: 1}}])
    body = bytes(req.SerializeToString())
    with pytest.raises(OtlpError) as err:  # a span whose attribute bytes are garbage
        decode_traces(
            body.replace(semconv.STEP.encode(), b"\xff\xff\xff\xff\xff\xff\xff\xff"),
            PB,
            None,
            LIMIT,
        )
    assert err.value.status == 400
