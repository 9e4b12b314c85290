"""Unit tests of the collector's OTLP layer: decoding export bodies and encoding answers."""

from __future__ import annotations

import base64
import gzip
import json
import math
import tracemalloc
import zlib
from typing import Any

import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ett import semconv
from ett_collector.otlp import (
    DecodeResult,
    OtlpError,
    decode_traces,
    encode_export_response,
    encode_status,
    response_content_type,
)
from ett_collector.otlp._transport import INFLATE_STEP, gunzip
from tests.support.bodies import window_body

PB = "application/x-protobuf"
JSON = "application/json"
LIMIT = 4 << 20
T0 = 1_700_000_000_000_000_000
TRACE = bytes(range(1, 17))
IDENTITY = {semconv.JOB_ID: "job-1", semconv.ATTEMPT: 0, semconv.RANK: 3}


def any_value(value: Any) -> AnyValue:
    """An OTLP AnyValue holding ``value``."""
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        out = AnyValue()
        out.array_value.values.extend(any_value(v) for v in value)
        return out
    if isinstance(value, dict):
        out = AnyValue()
        out.kvlist_value.values.extend(key_values(value))
        return out
    return AnyValue(string_value=value)


def key_values(attrs: dict[str, Any]) -> list[KeyValue]:
    """OTLP KeyValues of ``attrs``."""
    return [KeyValue(key=k, value=any_value(v)) for k, v in attrs.items()]


def request(
    spans: list[dict[str, Any]],
    resource: dict[str, Any] | None = None,
    scope_attrs: dict[str, Any] | None = None,
) -> ExportTraceServiceRequest:
    """One resource, one scope, ``spans`` given as keyword dicts (name, attrs, start, end, ids)."""
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.extend(key_values(IDENTITY if resource is None else resource))
    ss = rs.scope_spans.add()
    ss.scope.name = "test"
    ss.scope.attributes.extend(key_values(scope_attrs or {}))
    for i, s in enumerate(spans):
        span = ss.spans.add()
        span.trace_id = s.get("trace_id", TRACE)
        span.span_id = s.get("span_id", (i + 1).to_bytes(8, "big"))
        span.parent_span_id = b"\xff" * 8
        span.name = s.get("name", semconv.SPAN_EVAL)
        span.kind = 1
        span.start_time_unix_nano = s.get("start", T0 + i)
        span.end_time_unix_nano = s.get("end", T0 + i + 2_500_000_000)
        span.attributes.extend(key_values(s.get("attrs", {})))
        span.status.code = 1
    return req


def pb_body(spans: list[dict[str, Any]], **kw: Any) -> bytes:
    """The protobuf body of :func:`request`."""
    return bytes(request(spans, **kw).SerializeToString())


def json_body(req: ExportTraceServiceRequest) -> bytes:
    """The OTLP JSON body of ``req``: proto3 JSON with the ids as hex, as OTLP requires."""
    doc = json_format.MessageToDict(req)
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(doc).encode()


def pb_of(req: ExportTraceServiceRequest) -> bytes:
    """The protobuf body of ``req``."""
    return bytes(req.SerializeToString())


def decode(body: bytes, ctype: str | None = PB, encoding: str | None = None) -> DecodeResult:
    """Decode with the default limit."""
    return decode_traces(body, ctype, encoding, LIMIT)


def status_of(call: Any) -> OtlpError:
    """The OtlpError that ``call()`` raises."""
    with pytest.raises(OtlpError) as info:
        call()
    return info.value


ALL_TYPES = {
    "s": "text",
    "b": True,
    "i": -42,
    "d": 2.5,
    "arr": ["a", 1, False],
    "kv": {"inner": 7, "deep": {"x": "y"}},
    "raw": b"\x00\xab",
}
ALL_TYPES_DECODED = {**ALL_TYPES, "raw": "00ab"}


def test_protobuf_spans_decode_to_records() -> None:
    body = pb_body(
        [{"name": semconv.SPAN_EVAL, "attrs": ALL_TYPES}, {"name": semconv.SPAN_PUBLISH}]
    )

    result = decode(body)

    assert (result.rejected, result.rejected_message) == (0, "")
    first, second = result.records
    assert first.trace_id == TRACE.hex() and first.span_id == "0000000000000001"
    assert first.name == semconv.SPAN_EVAL
    assert first.start == T0 / 1e9 and first.end == (T0 + 2_500_000_000) / 1e9
    assert (first.job_id, first.attempt, first.rank) == ("job-1", 0, 3)
    assert first.attributes == {**IDENTITY, **ALL_TYPES_DECODED}
    assert second.name == semconv.SPAN_PUBLISH and dict(second.attributes) == IDENTITY


@pytest.mark.parametrize("encode", ["protobuf", "json"])
def test_integer_attributes_sent_as_whole_doubles_or_digits_read_as_integers(encode: str) -> None:
    """A Python emitter's ``step = samples / batch`` arrives as ``100.0``: read as before, that
    window fell out of the loop figures and such a checkpoint step named no checkpoint."""
    attrs = {
        semconv.STEP_FIRST: 100.0,
        semconv.STEP_LAST: "109",
        semconv.SAMPLES: 640.0,
        semconv.CHECKPOINT_STEP: 2.5,  # not whole: kept as sent
        semconv.STEP: "ten",  # not digits: kept as sent
        "user.count": 3.0,  # not the vocabulary's: kept as sent
    }
    req = request([{"name": semconv.SPAN_TRAIN_WINDOW, "attrs": attrs}])
    body, ctype = (pb_of(req), PB) if encode == "protobuf" else (json_body(req), "application/json")

    (record,) = decode(body, ctype).records

    got = record.attributes
    assert (got[semconv.STEP_FIRST], got[semconv.STEP_LAST], got[semconv.SAMPLES]) == (
        100,
        109,
        640,
    )
    assert all(
        type(got[k]) is int for k in (semconv.STEP_FIRST, semconv.STEP_LAST, semconv.SAMPLES)
    )
    assert got[semconv.CHECKPOINT_STEP] == 2.5 and got[semconv.STEP] == "ten"
    assert type(got["user.count"]) is float


def test_scope_attributes_are_not_merged() -> None:
    body = pb_body([{}], scope_attrs={semconv.RANK: 9, "scope.only": "x"})

    (record,) = decode(body).records

    assert record.rank == 3 and "scope.only" not in record.attributes


@pytest.mark.parametrize(
    "ctype", [PB, "application/x-protobuf; charset=utf-8", " Application/X-Protobuf ;q=1"]
)
def test_protobuf_content_type_parameters_and_case_are_accepted(ctype: str) -> None:
    assert len(decode(pb_body([{}]), ctype).records) == 1


def test_json_body_with_hex_ids_and_string_int64() -> None:
    body = json_body(request([{"attrs": ALL_TYPES}]))
    assert b'"startTimeUnixNano": "' in body  # proto3 JSON writes int64 as strings

    (record,) = decode(body, "application/json; charset=utf-8").records

    assert record.trace_id == TRACE.hex() and record.span_id == "0000000000000001"
    assert record.start == T0 / 1e9
    assert record.attributes == {**IDENTITY, **ALL_TYPES_DECODED}


def test_json_accepts_snake_case_numbers_and_upper_case_hex() -> None:
    doc = {
        "resource_spans": [
            {
                "resource": {
                    "attributes": [{"key": semconv.JOB_ID, "value": {"stringValue": "j"}}]
                },
                "scope_spans": [
                    {
                        "spans": [
                            {
                                "trace_id": TRACE.hex().upper(),
                                "span_id": "ABCDEF0123456789",
                                "name": semconv.SPAN_TRAIN_WINDOW,
                                "start_time_unix_nano": T0,
                                "end_time_unix_nano": str(T0 + 10),
                                "kind": 1,
                                "attributes": [
                                    {"key": semconv.ATTEMPT, "value": {"int_value": 1}},
                                    {"key": semconv.RANK, "value": {"intValue": "2"}},
                                    {"key": "b64", "value": {"bytesValue": "q83v"}},
                                    {"key": "empty", "value": {}},
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }

    (record,) = decode(json.dumps(doc).encode(), JSON).records

    assert record.span_id == "abcdef0123456789" and record.trace_id == TRACE.hex()
    assert (record.attempt, record.rank, record.end) == (1, 2, (T0 + 10) / 1e9)
    assert record.attributes["b64"] == "abcdef" and record.attributes["empty"] is None


def test_gzip_body_decodes_like_the_plain_one() -> None:
    body = pb_body([{"attrs": ALL_TYPES}, {}])

    assert decode(gzip.compress(body), PB, "gzip") == decode(body)
    two_members = gzip.compress(body[:100]) + gzip.compress(body[100:])
    assert decode(two_members, PB, "GZIP") == decode(body)


def test_gzip_json_body() -> None:
    body = json_body(request([{}]))

    assert decode(gzip.compress(body), JSON, "gzip").records == decode(body, JSON).records


def _bomb(inflated: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    parts = [packer.compress(zeros) for _ in range(inflated >> 20)]
    return b"".join([*parts, packer.flush()])


def _length_delimited(number: int, payload: bytes) -> bytes:
    size, n = bytearray(), len(payload)
    while True:
        size.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes([number << 3 | 2]) + bytes(size) + payload


@pytest.mark.parametrize(
    "body",
    [
        _length_delimited(1, _length_delimited(2, b"\x12\x00" * 100_000)),  # empty spans
        b"\x0a\x00" * 100_000,  # empty resource spans
        _length_delimited(1, b"\x12\x00" * 100_000),  # empty scope spans
    ],
    ids=["spans", "resources", "scopes"],
)
def test_a_body_of_empty_messages_is_refused_before_it_is_decoded(body: bytes) -> None:
    """15.7 million empty spans in 30 MiB took one request 1.6 GB and 17 s to decode (about
    100 bytes a message); now the messages are counted first, by reference."""
    error = status_of(lambda: decode(body))
    assert error.status == 400 and "implausible OTLP protobuf body" in error.message
    assert f"{len(body):,} bytes" in error.message


def test_dense_real_bodies_still_decode() -> None:
    """Windows of about 132 bytes, and one short span alone, are far from the density limit."""
    body = pb_of(request([{"attrs": {}}]))
    assert len(body) < 200 and len(decode(body).records) == 1
    many = b"".join(window_body(f"job-{i}", 512) for i in range(8))
    assert len(decode(many).records) == 8 * 512


def test_gzip_bomb_is_refused_without_inflating_it() -> None:
    bomb = _bomb(256 << 20)  # 256 MiB of zeros in a few hundred KiB
    limit = 1 << 20
    assert len(bomb) < limit

    tracemalloc.start()
    try:
        err = status_of(lambda: decode_traces(bomb, PB, "gzip", limit))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert err.status == 413
    assert peak < 8 * limit, f"peak {peak} bytes: the bomb was inflated"


def test_inflating_tells_its_size_as_it_grows_and_can_be_stopped() -> None:
    """The in-flight budget learned a gzip body's size only once all of it was inflated: 30
    clients' bombs at once each took 32 MiB before the first refusal (1.1 GB, no 429)."""
    body = gzip.compress(b"\0" * (5 * INFLATE_STEP + 7))
    seen: list[int] = []
    assert len(gunzip(body, 8 * INFLATE_STEP, seen.append)) == 5 * INFLATE_STEP + 7
    assert seen == sorted(seen) and len(seen) >= 5 and seen[-1] == 5 * INFLATE_STEP + 7

    class Full(Exception):
        pass

    def budget(size: int) -> None:
        if size > 2 * INFLATE_STEP:
            raise Full(size)

    with pytest.raises(Full) as stopped:
        gunzip(gzip.compress(b"\0" * (64 * INFLATE_STEP)), 128 * INFLATE_STEP, budget)
    assert stopped.value.args[0] <= 3 * INFLATE_STEP  # stopped within a step of the refusal


def test_gzip_limit_counts_decompressed_bytes() -> None:
    body = pb_body([{}, {}])
    packed = gzip.compress(body)

    assert len(decode_traces(packed, PB, "gzip", len(body)).records) == 2
    assert status_of(lambda: decode_traces(packed, PB, "gzip", len(body) - 1)).status == 413


def test_raw_body_over_the_limit_is_413() -> None:
    body = pb_body([{}])

    assert len(decode_traces(body, PB, None, len(body)).records) == 1
    err = status_of(lambda: decode_traces(body, PB, None, len(body) - 1))
    assert err.status == 413 and str(len(body)) in err.message


@pytest.mark.parametrize(
    "ctype", [None, "", "text/plain", "application/protobuf", "application/jsonl", "json"]
)
def test_unsupported_content_type_is_415(ctype: str | None) -> None:
    err = status_of(lambda: decode(pb_body([{}]), ctype))

    assert err.status == 415 and PB in err.message


@pytest.mark.parametrize("encoding", ["br", "deflate", "zstd", "gzip, br"])
def test_unsupported_content_encoding_is_415(encoding: str) -> None:
    assert status_of(lambda: decode(pb_body([{}]), PB, encoding)).status == 415


@pytest.mark.parametrize("encoding", [None, "", "identity", " Identity "])
def test_identity_encodings_are_accepted(encoding: str | None) -> None:
    assert len(decode(pb_body([{}]), PB, encoding).records) == 1


@pytest.mark.parametrize(
    ("body", "ctype", "encoding", "needle"),
    [
        (b"\x0a\xff\xff", PB, None, "protobuf"),
        (b"\xff\xff\xff\xff", PB, None, "protobuf"),
        (b"{not json", JSON, None, "JSON"),
        (b"", JSON, None, "JSON"),
        (b"[]", JSON, None, "object"),
        (b" null\n", JSON, None, "not null"),
        (gzip.compress(b"null", mtime=0), JSON, "gzip", "not null"),
        (b'{"resourceSpans": {}}', JSON, None, "array"),
        (b'{"resourceSpans": [{"scopeSpans": {"spans": []}}]}', JSON, None, "array"),
        (b"not gzip at all", PB, "gzip", "gzip"),
        (gzip.compress(b"x" * 1000, mtime=0)[:-12], PB, "gzip", "truncated"),
    ],
)
def test_malformed_bodies_are_400(
    body: bytes, ctype: str, encoding: str | None, needle: str
) -> None:
    err = status_of(lambda: decode(body, ctype, encoding))

    assert err.status == 400 and needle in err.message


@pytest.mark.parametrize(
    "value",
    [
        {"intValue": "12abc"},
        {"intValue": 1.5},
        {"intValue": str(2**64)},
        {"intValue": str(2**64 - 1)},  # fits fixed64, not an int64
        {"intValue": 2**63},
        {"boolValue": "yes"},
        {"doubleValue": "x"},
        {"stringValue": 3},
        {"bytesValue": "!!"},
        {"arrayValue": {"values": {}}},
    ],
)
def test_json_malformed_attribute_values_are_400(value: dict[str, Any]) -> None:
    doc = {"resourceSpans": [{"resource": {"attributes": [{"key": "k", "value": value}]}}]}

    assert status_of(lambda: decode(json.dumps(doc).encode(), JSON)).status == 400


def test_json_integer_strings_of_thousands_of_digits() -> None:
    """int() refuses strings past 4300 digits: leading zeros are dropped first, and a number too
    large for 64 bits is a 400 (both were a 500, found by the fuzz)."""
    ok = request([{"attrs": {"user.n": 0}}])
    doc = json.loads(json_body(ok))
    attrs = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    attrs[-1]["value"] = {"intValue": "-" + "0" * 5000 + "12"}
    (record,) = decode(json.dumps(doc).encode(), JSON).records
    assert record.attributes["user.n"] == -12
    attrs[-1]["value"] = {"intValue": "9" * 5000}
    result = decode(json.dumps(doc).encode(), JSON)
    assert result.rejected == 1 and "does not fit in 64 bits" in result.rejected_message


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda span: 1, "Span must be an object"),
        (lambda span: span | {"traceId": 5}, "traceId must be a hex string"),
        (lambda span: span | {"name": ["ett.attempt"]}, "span name must be a string"),
        (lambda span: span | {"startTimeUnixNano": "soon"}, "startTimeUnixNano must be an integer"),
        (lambda span: span | {"attributes": {"k": "v"}}, "attributes must be an array"),
        (
            lambda span: span | {"attributes": [{"key": "n", "value": {"intValue": "12abc"}}]},
            "intValue must be an integer",
        ),
    ],
)
def test_a_json_span_of_the_wrong_type_is_rejected_alone(change: Any, needle: str) -> None:
    """One span with a field of the wrong type answered 400 for the whole request, so its
    well-formed neighbours were lost too (an SDK does not retry a 400). It is now rejected
    alone, through partial success, with the reason."""
    doc = json.loads(json_body(request([{}, {}, {}])))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1] = change(spans[1])

    result = decode(json.dumps(doc).encode(), JSON)

    assert len(result.records) == 2 and result.rejected == 1
    assert "is malformed: " + needle in result.rejected_message


def test_malformed_attribute_inside_protobuf_is_400() -> None:
    req = request([{}])
    span_bytes = req.resource_spans[0].scope_spans[0].spans[0].SerializeToString()
    # A Span whose attribute (field 9) holds bytes that are not a KeyValue.
    bad_span = span_bytes + b"\x4a\x03\x0a\xff\xff"
    scope = b"\x12" + bytes([len(bad_span)]) + bad_span
    body = b"\x0a" + bytes([len(scope) + 2]) + b"\x12" + bytes([len(scope)]) + scope

    assert status_of(lambda: decode(body)).status == 400


def test_partial_rejection_keeps_the_good_spans_and_names_the_problems() -> None:
    body = pb_body(
        [
            {"name": "good", "attrs": IDENTITY},
            {"name": semconv.SPAN_EVAL, "attrs": {semconv.ATTEMPT: 0, semconv.RANK: 1}},
            {"name": "bad-attempt", "attrs": {**IDENTITY, semconv.ATTEMPT: "x"}},
            {"name": "bad-rank", "attrs": {**IDENTITY, semconv.RANK: 1.5}},
            {"name": "backwards", "attrs": IDENTITY, "start": T0 + 10, "end": T0},
            {"name": "also-good", "attrs": {**IDENTITY, semconv.RANK: "7"}},
        ],
        resource={"service.name": "trainer"},
    )

    result = decode(body)

    assert [r.name for r in result.records] == ["good", "also-good"]
    assert result.records[1].rank == 7
    assert result.rejected == 4
    msg = result.rejected_message
    assert msg.startswith("4 spans rejected: ")
    assert f"span {semconv.SPAN_EVAL!r} (trace {TRACE.hex()}, span 0000000000000002)" in msg
    assert f"lacks {semconv.JOB_ID}" in msg
    assert f"{semconv.ATTEMPT} 'x'" in msg and f"{semconv.RANK} 1.5" in msg
    assert msg.endswith("; ...")  # the fourth problem is not spelled out


@pytest.mark.parametrize(
    ("override", "reason"),
    [
        ({semconv.ATTEMPT: True}, semconv.ATTEMPT),
        ({semconv.ATTEMPT: -1}, semconv.ATTEMPT),
        ({semconv.ATTEMPT: 2**31}, "limit 2147483647"),  # PostgreSQL's integer column
        ({semconv.RANK: 2**63 - 1}, semconv.RANK),  # JSON may carry up to 2**64 - 1
        ({semconv.RANK: "9" * 30}, semconv.RANK),
        ({semconv.RANK: " 1"}, semconv.RANK),
        ({semconv.RANK: [1]}, semconv.RANK),
        ({semconv.JOB_ID: ""}, semconv.JOB_ID),
        ({semconv.JOB_ID: 12}, semconv.JOB_ID),
    ],
)
def test_invalid_identity_values_are_rejected(override: dict[str, Any], reason: str) -> None:
    result = decode(pb_body([{"attrs": override}]))

    assert result.records == [] and result.rejected == 1
    assert result.rejected_message.startswith("1 span rejected: ") and reason in (
        result.rejected_message
    )


LIMIT_CASES: dict[str, tuple[dict[str, Any], bool]] = {
    # name: (attributes, rejected?) -- each value seen first on a good span in most cases, so
    # the protobuf decoder has it cached when the case comes
    "model of 256 characters": ({semconv.MODEL: "m" * 256}, False),
    "model of 257 characters": ({semconv.MODEL: "m" * 257}, True),
    "team of 4096 characters": ({semconv.TEAM: "t" * 4096}, True),
    "job id of 300 characters": ({semconv.JOB_ID: "j" * 300}, True),
    "component of 300 characters": ({semconv.COMPONENT: "c" * 300}, True),
    "note of 300 characters": ({"user.note": "n" * 300}, False),
    "note over the value limit": ({"user.note": "v" * 16_385}, True),
    "key of 257 characters": ({"k" * 257: 1}, True),
    "NUL in a job id": ({semconv.JOB_ID: "bad\x00job"}, True),
    "NUL in a note": ({"user.note": "a\x00b"}, True),
    "NUL in a key": ({"user.a\x00": "x"}, True),
    "257 attributes": ({f"user.k{i}": i for i in range(257)}, True),
    "256 attributes": ({f"user.k{i}": i for i in range(256 - len(IDENTITY))}, False),
    "a vocabulary attribute as bytes": ({semconv.MODEL: b"\x01"}, True),
}


@pytest.mark.parametrize("where", ["span", "resource"])
@pytest.mark.parametrize("case", sorted(LIMIT_CASES))
def test_cached_attributes_are_held_to_the_same_limits(case: str, where: str) -> None:
    """The protobuf decoder skips the value checks of a span whose attributes are all cached
    as clean; whatever it has cached, it rejects exactly what the JSON decoder (which checks
    every value) rejects, for the same reasons."""
    attrs, rejected = LIMIT_CASES[case]
    singles = [(k, v) for k, v in attrs.items() if decode(pb_body([{"attrs": {k: v}}])).records]
    clean = dict(singles[:200])  # the case's attributes that pass alone, cached before it
    if where == "span":
        spans = [{"attrs": clean}, {"attrs": attrs}, {"attrs": clean}]
        req = request(spans)
    else:
        req = request([{}, {}], resource={**IDENTITY, **attrs})
        req.resource_spans.insert(
            0, request([{}], resource={**IDENTITY, **clean}).resource_spans[0]
        )
    by_pb, by_json = decode(pb_of(req)), decode(json_body(req), JSON)
    bad = (1 if where == "span" else 2) if rejected else 0

    assert by_pb.rejected == by_json.rejected == bad
    assert by_pb.rejected_message == by_json.rejected_message
    assert [r.attributes for r in by_pb.records] == [r.attributes for r in by_json.records]


@pytest.mark.parametrize(
    ("span", "needle"),
    [
        ({"trace_id": b""}, "invalid trace id"),
        ({"trace_id": bytes(16)}, "invalid trace id"),
        ({"span_id": b"\x01" * 7}, "invalid trace id"),
        ({"start": 0, "end": 5}, "start time"),
    ],
)
def test_invalid_ids_and_missing_start_are_rejected(span: dict[str, Any], needle: str) -> None:
    result = decode(pb_body([span, {}]))

    assert len(result.records) == 1 and result.rejected == 1 and needle in result.rejected_message


def test_a_json_span_with_a_negative_start_is_said_so() -> None:
    """JSON can carry a negative time (protobuf's fixed64 cannot): it was called "lacks a start
    time" (a time probe)."""
    doc = json.loads(json_body(request([{}, {}])))
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "-5"
    result = decode(json.dumps(doc).encode(), JSON)
    assert result.rejected == 1 and "negative start time (-5 ns)" in result.rejected_message


def test_json_non_hex_ids_are_rejected_per_span() -> None:
    body = json_body(request([{}, {}]))
    doc = json.loads(body)
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"] = base64.b64encode(
        TRACE
    ).decode()

    result = decode(json.dumps(doc).encode(), JSON)

    assert len(result.records) == 1 and result.rejected == 1


def test_span_attributes_override_resource_attributes() -> None:
    resource = {**IDENTITY, semconv.MODEL: "dlrm", semconv.TEAM: "ads"}
    body = pb_body(
        [{"attrs": {semconv.RANK: 5, semconv.JOB_ID: "job-2", semconv.TEAM: "search"}}, {}],
        resource=resource,
    )

    overridden, plain = decode(body).records

    assert (overridden.job_id, overridden.attempt, overridden.rank) == ("job-2", 0, 5)
    assert overridden.attributes[semconv.TEAM] == "search"
    assert overridden.attributes[semconv.MODEL] == "dlrm"
    assert (plain.job_id, plain.rank, plain.attributes[semconv.TEAM]) == ("job-1", 3, "ads")


def test_unknown_names_and_attributes_are_counted_and_kept() -> None:
    unknown_key = semconv.NAMESPACE + "not_in_vocabulary"
    body = pb_body(
        [
            {"name": semconv.NAMESPACE + "custom", "attrs": {unknown_key: 1, "other.key": 2}},
            {"name": semconv.startup_span_name("warmup"), "attrs": {semconv.STEP: 1}},
            {"name": "plain-otel-span"},
        ],
        resource={**IDENTITY, semconv.NAMESPACE + "resource_extra": "x"},
    )

    result = decode(body)

    assert len(result.records) == 3 and result.rejected == 0
    assert result.unknown_span_names == 2
    # The resource's unknown key counts once per accepted span, plus the span's own.
    assert result.unknown_attributes == 3 + 1
    assert result.records[0].attributes[unknown_key] == 1


def test_rejected_spans_do_not_count_unknown_names() -> None:
    body = pb_body([{"name": "plain-otel-span"}], resource={})

    result = decode(body)

    assert (result.rejected, result.unknown_span_names, result.unknown_attributes) == (1, 0, 0)


def test_records_do_not_share_mutable_attribute_values() -> None:
    body = pb_body([{"attrs": {"arr": [1, 2], "kv": {"a": 1}}}, {"attrs": {"arr": [1, 2]}}])
    first, second = decode(body).records

    first.attr("arr").append(3)
    first.attr("kv")["b"] = 2

    assert second.attributes["arr"] == [1, 2]
    assert decode(body).records[0].attr("kv") == {"a": 1}
    assert first.attributes is not second.attributes


def test_many_distinct_and_long_attribute_values_decode_exactly() -> None:
    # More distinct attributes than the decoder's cache holds, and values longer than it keeps.
    spans = [{"attrs": {"a": i, "b": -i, "c": f"v{i}", "d": float(i)}} for i in range(3000)]
    spans.append({"attrs": {"long": "x" * 5000, "u": "\u00e9\U0001f600"}})

    records = decode(pb_body(spans)).records

    assert [r.attr("a") for r in records[:-1]] == list(range(3000))
    assert all(
        r.attr("b") == -r.attr("a") and r.attr("c") == f"v{r.attr('a')}" for r in records[:-1]
    )
    assert records[-1].attr("long") == "x" * 5000 and records[-1].attr("u") == "\u00e9\U0001f600"


def resource_per_span(resources: list[dict[str, Any]]) -> bytes:
    """A body with one resource per span (an OpenTelemetry Collector's merge of many ranks'
    requests), span i under ``resources[i]``."""
    req = ExportTraceServiceRequest()
    for i, resource in enumerate(resources):
        rs = req.resource_spans.add()
        rs.resource.attributes.extend(key_values(resource))
        span = rs.scope_spans.add().spans.add()
        span.trace_id, span.span_id = TRACE, (i + 1).to_bytes(8, "big")
        span.name = semconv.SPAN_TRAIN_WINDOW
        span.start_time_unix_nano, span.end_time_unix_nano = T0 + i, T0 + i + 10**10
        span.attributes.extend(key_values({semconv.STEP_FIRST: i, semconv.STEP_LAST: i}))
    return pb_of(req)


def test_a_resource_seen_before_decodes_as_it_did_the_first_time() -> None:
    """The protobuf decoder keeps each resource's identity and checks for the next request
    that names it: the records are the same, and a resource differing in one byte is its own."""
    ranks = [{**IDENTITY, semconv.RANK: r, semconv.MODEL: "dlrm"} for r in range(8)]
    body = resource_per_span(ranks)

    first, again = decode(body).records, decode(body).records

    assert [(r.job_id, r.attempt, r.rank) for r in first] == [("job-1", 0, r) for r in range(8)]
    assert [(r.rank, r.attributes) for r in again] == [(r.rank, r.attributes) for r in first]
    assert all(a.attributes is not b.attributes for a, b in zip(first, again, strict=True))
    moved = decode(resource_per_span([{**x, semconv.ATTEMPT: 1} for x in ranks])).records
    assert [(r.attempt, r.rank) for r in moved] == [(1, r) for r in range(8)]


def test_a_resource_seen_before_is_rejected_as_it_was_the_first_time() -> None:
    anonymous = [{semconv.ATTEMPT: 0, semconv.RANK: r} for r in range(3)]
    for _ in range(2):
        result = decode(resource_per_span(anonymous))
        assert result.records == [] and result.rejected == 3
        assert f"lacks {semconv.JOB_ID}" in result.rejected_message


def test_requests_do_not_share_a_resource_s_mutable_values() -> None:
    body = resource_per_span([{**IDENTITY, "user.hosts": ["a", "b"]}])
    (first,) = decode(body).records
    first.attr("user.hosts").append("c")

    (second,) = decode(body).records

    assert second.attr("user.hosts") == ["a", "b"]


def test_more_distinct_resources_than_the_decoder_keeps_decode_exactly() -> None:
    resources = [{**IDENTITY, semconv.RANK: r, "user.note": f"n{r}"} for r in range(5000)]
    resources[7]["user.notes"] = "x" * 400  # over the bytes kept per resource: not kept
    resources[7] |= {f"user.k{i}": f"{i:0400}" for i in range(12)}

    records = decode(resource_per_span(resources)).records
    records += decode(resource_per_span(resources[::-1])).records

    assert [r.rank for r in records] == list(range(5000)) + list(range(4999, -1, -1))
    assert all(r.attr("user.note") == f"n{r.rank}" for r in records)


@pytest.mark.parametrize(("text", "shown"), [("NaN", "nan"), ("-Infinity", "-inf")])
def test_json_reads_the_special_doubles_and_rejects_their_span(text: str, shown: str) -> None:
    """OTLP JSON writes NaN and the infinities as strings: read as doubles, they reject their
    span (JSON cannot store them), naming the attribute; the other span is kept."""
    value = math.nan if text == "NaN" else -math.inf
    body = json_body(request([{"attrs": {"user.x": value}}, {"attrs": {"user.x": 0.5}}]))
    assert f'"{text}"'.encode() in body  # written as OTLP JSON writes it

    result = decode(body, JSON)

    assert [r.attr("user.x") for r in result.records] == [0.5] and result.rejected == 1
    assert f"'user.x' as {shown}, which JSON cannot hold" in result.rejected_message


def test_empty_protobuf_request_is_empty_result() -> None:
    assert decode(b"") == DecodeResult([], 0, "", 0, 0)
    assert decode(b"{}", JSON) == DecodeResult([], 0, "", 0, 0)


no_nul = st.characters(
    codec="utf-8", exclude_characters="\x00"
)  # a NUL rejects its span (test_span_limits)
scalars = st.one_of(
    st.text(no_nul, max_size=20),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),  # those reject their span (test_span_limits)
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(no_nul, max_size=12), values, max_size=6))
def test_attribute_values_survive_protobuf_and_json(attrs: dict[str, Any]) -> None:
    req = request([{"attrs": attrs}], resource={**IDENTITY, "r": 1})

    from_pb = decode(bytes(req.SerializeToString()))
    from_json = decode(json_body(req), JSON)

    expected = {**IDENTITY, "r": 1, **attrs}
    if any(k in attrs for k in IDENTITY) or not semconv.ATTRIBUTE_TYPES.keys().isdisjoint(attrs):
        # identity may be invalid, a vocabulary attribute may hold an array: same verdict
        assert from_pb.records == from_json.records
        assert from_pb.rejected == from_json.rejected
        return
    assert from_pb.records[0].attributes == expected
    assert from_json.records == from_pb.records


def test_export_response_protobuf() -> None:
    ok = ExportTraceServiceResponse.FromString(encode_export_response(decode(b""), False))
    assert not ok.HasField("partial_success")

    partial = DecodeResult([], 2, "2 spans rejected: x", 0, 0)
    answer = ExportTraceServiceResponse.FromString(encode_export_response(partial, False))

    assert answer.partial_success.rejected_spans == 2
    assert answer.partial_success.error_message == "2 spans rejected: x"


def test_export_response_json_is_otlp_json() -> None:
    assert json.loads(encode_export_response(decode(b""), True)) == {}

    partial = DecodeResult([], 3, "3 spans rejected: y", 0, 0)
    body = encode_export_response(partial, True)
    answer = json_format.Parse(body, ExportTraceServiceResponse())

    assert json.loads(body)["partialSuccess"]["rejectedSpans"] == "3"
    assert answer.partial_success.rejected_spans == 3
    assert answer.partial_success.error_message == "3 spans rejected: y"


@pytest.mark.parametrize(
    ("code", "grpc"), [(400, 3), (413, 8), (415, 12), (500, 13), (503, 14), (3, 3), (599, 2)]
)
def test_status_body_carries_the_grpc_code(code: int, grpc: int) -> None:
    status = Status.FromString(encode_status(code, "nope", False))
    as_json = json.loads(encode_status(code, "nope", True))

    assert (status.code, status.message) == (grpc, "nope")
    assert as_json == {"code": grpc, "message": "nope"}
    assert json_format.Parse(encode_status(code, "nope", True), Status()).code == grpc


@pytest.mark.parametrize(
    ("ctype", "answer"),
    [
        (JSON, JSON),
        ("application/json; charset=utf-8", JSON),
        (PB, PB),
        (None, PB),
        ("text/plain", PB),
    ],
)
def test_response_content_type(ctype: str | None, answer: str) -> None:
    assert response_content_type(ctype) == answer


def test_otlp_error_carries_status_and_message() -> None:
    err = OtlpError(415, "no")

    assert (err.status, err.message) == (415, "no") and "415" in str(err)


@pytest.mark.parametrize("as_json", [False, True])
def test_only_vocabulary_attributes_must_hold_one_value(as_json: bool) -> None:
    """Arrays, key-value lists and bytes stay allowed outside the vocabulary and inside a
    key-value list; a vocabulary attribute's scalar of another type passes (the domain reads it
    defensively); a resource's bad vocabulary attribute rejects each span of the resource."""
    fine = {
        "user.list": [1, 2],
        "user.map": {semconv.CHECKPOINT_STEP: [1]},
        "user.raw": b"\x01",
        "ett.custom": [1],
        semconv.CHECKPOINT_STEP: "20",
        semconv.SAMPLES: 3.0,
    }
    spans = [
        {"name": "fine", "attrs": {**IDENTITY, **fine}},
        {"name": "bad", "attrs": {**IDENTITY, semconv.WORLD_SIZE: b"\x02"}},
    ]
    bad_resource = {**IDENTITY, semconv.TEAM: {"name": "ads"}}
    bodies = [request(spans), request([{"name": "fine", "attrs": fine}], resource=bad_resource)]

    one, two = (decode(json_body(r), JSON) if as_json else decode(pb_of(r)) for r in bodies)

    assert [r.name for r in one.records] == ["fine"] and one.rejected == 1
    kept = one.records[0].attributes
    assert kept["user.map"] == {semconv.CHECKPOINT_STEP: [1]} and kept["user.raw"] == "01"
    assert f"{semconv.WORLD_SIZE} as bytes, expected an integer" in one.rejected_message
    assert two.records == [] and two.rejected == 1
    assert f"{semconv.TEAM} as a key-value list, expected a string" in two.rejected_message
