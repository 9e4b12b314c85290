"""Hostile values are refused per span, alike on SQLite and PostgreSQL: a value over a limit, a
NUL character or a lone surrogate rejects its span alone (OTLP partial success, 200); the good
spans of the same request are stored and the read API keeps answering."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import math
from typing import Any

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.otlp._limits import MAX_IDENTITY_CHARS, MAX_VALUE_CHARS
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS

_ids = itertools.count(1)


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(name: str, **attrs: Any) -> dict[str, Any]:
    n = next(_ids)
    return {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 10**9),
        "endTimeUnixNano": str(1_700_000_000_500_000_000 + n * 10**9),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }


def _body(job: str, spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [_attr(sc.JOB_ID, job), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, 0)]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request).encode()  # ensure_ascii: a lone surrogate becomes \\udXXX


HOSTILE = {
    "long model": {sc.MODEL: "m" * (MAX_IDENTITY_CHARS + 1)},
    "long team": {sc.TEAM: "t" * 4096},
    "long job id": {sc.JOB_ID: "j" * 3000},
    "long component": {sc.COMPONENT: "c" * 300},
    "long value": {"user.note": "v" * (MAX_VALUE_CHARS + 1)},
    "NUL in job id": {sc.JOB_ID: "bad\x00job"},
    "NUL in value": {"user.note": "a\x00b"},
    "surrogate in model": {sc.MODEL: "dlrm\ud800"},
    "surrogate in key": {"user.\udc00": "x"},
    "attempt past int32": {sc.ATTEMPT: 2**40},  # PostgreSQL's integer column refused it
    "rank past int64": {sc.RANK: 2**64 - 1},  # SQLite's refused it
}


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_hostile_spans_are_rejected_alone(database_url: str) -> None:
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store, settle_s=0)
    app = create_app(Settings(db_url=database_url), pipeline)

    good = [
        _span(sc.SPAN_EVAL, **{sc.MODEL: "dlrm", sc.TEAM: "ads"}),
        _span(sc.SPAN_EVAL, **{sc.MODEL: "d" * MAX_IDENTITY_CHARS, "user.note": "é" * 100}),
    ]
    bad = [_span(sc.SPAN_EVAL, **attrs) for attrs in HOSTILE.values()]
    bad.append(_span("n" * (MAX_IDENTITY_CHARS + 1)))
    body = _body("limits-job", [good[0], *bad, good[1]])

    async def run() -> tuple[httpx.Response, list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            posted = await client.post(
                "/v1/traces", content=body, headers={"content-type": "application/json"}
            )
            await asyncio.to_thread(pipeline.recompute_dirty)
            reads = [
                await client.get(path)
                for path in (
                    "/api/v1/jobs",
                    "/api/v1/jobs/limits-job",
                    "/api/v1/lost-time?group_by=model",
                    "/readyz",
                )
            ]
            return posted, reads

    try:
        posted, reads = asyncio.run(run())
        assert posted.status_code == 200, posted.text
        partial = posted.json()["partialSuccess"]
        assert int(partial["rejectedSpans"]) == len(bad)
        assert "limit" in partial["errorMessage"]
        assert store.span_counts()["spans"] == len(good)
        assert store.job_ids() == ["limits-job"]
        for read in reads:
            assert read.status_code == 200, (read.request.url, read.text)
        assert reads[1].json()["job_id"] == "limits-job"
    finally:
        store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_every_hostile_kind_names_its_reason(database_url: str) -> None:
    """Each hostile span alone: rejected with a reason of its own, nothing stored."""
    store = Store(database_url)
    store.upgrade()
    app = create_app(Settings(db_url=database_url), Pipeline(store))

    async def post_each() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [
                await client.post(
                    "/v1/traces",
                    content=_body("one-job", [_span(sc.SPAN_EVAL, **attrs)]),
                    headers={"content-type": "application/json"},
                )
                for attrs in HOSTILE.values()
            ]

    try:
        answers = asyncio.run(post_each())
        for kind, answer in zip(HOSTILE, answers, strict=True):
            assert answer.status_code == 200, (kind, answer.text)
            partial = answer.json()["partialSuccess"]
            assert int(partial["rejectedSpans"]) == 1, kind
            message = partial["errorMessage"]
            word = "NUL" if "NUL" in kind else "surrogate" if "surrogate" in kind else "limit"
            if kind == "rank past int64":  # an intValue is int64: the decoder refuses it first
                word = "signed 64-bit"
            assert word in message, (kind, message)
        assert store.span_counts()["spans"] == 0
    finally:
        store.close()


# --- vocabulary attributes hold one value --------------------------------------------------------

_T0 = 1_700_000_000


def _json_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, float):  # OTLP JSON writes the non-finite doubles as strings
        return {"doubleValue": value if math.isfinite(value) else json.dumps(value)}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, bytes):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, list):
        return {"arrayValue": {"values": [_json_value(v) for v in value]}}
    if isinstance(value, dict):
        pairs = [{"key": k, "value": _json_value(v)} for k, v in value.items()]
        return {"kvlistValue": {"values": pairs}}
    return {"stringValue": value}


def _proto_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, bytes):
        return AnyValue(bytes_value=value)
    if isinstance(value, list):
        return AnyValue(array_value=ArrayValue(values=[_proto_value(v) for v in value]))
    if isinstance(value, dict):
        pairs = [KeyValue(key=k, value=_proto_value(v)) for k, v in value.items()]
        return AnyValue(kvlist_value=KeyValueList(values=pairs))
    return AnyValue(string_value=value)


SpanSpec = tuple[str, float, float, dict[str, Any]]


def _typed_body(job: str, spans: list[SpanSpec], encoding: str) -> tuple[bytes, str]:
    """One request of ``spans`` (name, start, end in seconds after ``_T0``, attributes) in
    ``encoding`` (``json`` or ``protobuf``), and its content type."""
    resource = {sc.JOB_ID: job, sc.ATTEMPT: 0, sc.RANK: 0, sc.WORLD_SIZE: 1}
    ids = [next(_ids) for _ in spans]
    if encoding == "json":
        out = [
            {
                "traceId": f"{n:032x}",
                "spanId": f"{n:016x}",
                "name": name,
                "startTimeUnixNano": str(int((_T0 + start) * 10**9)),
                "endTimeUnixNano": str(int((_T0 + end) * 10**9)),
                "attributes": [{"key": k, "value": _json_value(v)} for k, v in attrs.items()],
            }
            for n, (name, start, end, attrs) in zip(ids, spans, strict=True)
        ]
        res = {"attributes": [{"key": k, "value": _json_value(v)} for k, v in resource.items()]}
        request = {"resourceSpans": [{"resource": res, "scopeSpans": [{"spans": out}]}]}
        return json.dumps(request).encode(), "application/json"
    proto_spans = [
        Span(
            trace_id=n.to_bytes(16, "big"),
            span_id=n.to_bytes(8, "big"),
            name=name,
            start_time_unix_nano=int((_T0 + start) * 10**9),
            end_time_unix_nano=int((_T0 + end) * 10**9),
            attributes=[KeyValue(key=k, value=_proto_value(v)) for k, v in attrs.items()],
        )
        for n, (name, start, end, attrs) in zip(ids, spans, strict=True)
    ]
    proto_res = Resource(
        attributes=[KeyValue(key=k, value=_proto_value(v)) for k, v in resource.items()]
    )
    proto = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(resource=proto_res, scope_spans=[ScopeSpans(spans=proto_spans)])
        ]
    )
    return proto.SerializeToString(), "application/x-protobuf"


def _partial(answer: httpx.Response) -> tuple[int, str]:
    """The partial success of an export answer (JSON or protobuf): rejected spans, message."""
    if answer.headers["content-type"].startswith("application/json"):
        partial = answer.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0)), partial.get("errorMessage", "")
    reply = ExportTraceServiceResponse.FromString(answer.content).partial_success
    return reply.rejected_spans, reply.error_message


WELL_TYPED: list[SpanSpec] = [
    (sc.SPAN_ATTEMPT, 0, 100, {sc.ATTEMPT_END_REASON: "completed", sc.MODEL: "dlrm"}),
    (sc.SPAN_FIRST_BATCH, 0, 10, {sc.STEP: 0}),
    (sc.SPAN_TRAIN_WINDOW, 10, 100, {sc.STEP_FIRST: 0, sc.STEP_LAST: 99, sc.SAMPLES: 3200}),
    (sc.SPAN_CHECKPOINT_SAVE, 50, 52, {sc.CHECKPOINT_STEP: 50, sc.CHECKPOINT_MODE: "sync"}),
]
"""A completed one-rank job: trained [10, 100], one sync save blocking 2 s."""

ILL_TYPED: dict[str, tuple[SpanSpec, str, str]] = {
    "step as array": (
        (sc.SPAN_CHECKPOINT_SAVE, 60, 61, {sc.CHECKPOINT_STEP: [60], sc.CHECKPOINT_MODE: "sync"}),
        sc.CHECKPOINT_STEP,
        "expected an integer",
    ),
    "step as kvlist": (
        (sc.SPAN_CHECKPOINT_PERSIST, 60, 62, {sc.CHECKPOINT_STEP: {"step": 60}}),
        sc.CHECKPOINT_STEP,
        "expected an integer",
    ),
    "step as bytes": (
        (sc.SPAN_CHECKPOINT_SAVE, 70, 71, {sc.CHECKPOINT_STEP: b"\x46"}),
        sc.CHECKPOINT_STEP,
        "expected an integer",
    ),
    "samples as array": (
        (sc.SPAN_TRAIN_WINDOW, 90, 95, {sc.STEP_FIRST: 90, sc.STEP_LAST: 94, sc.SAMPLES: [1]}),
        sc.SAMPLES,
        "expected an integer",
    ),
    "attempt as kvlist": (
        (sc.SPAN_EVAL, 80, 81, {sc.ATTEMPT: {"a": 0}}),
        sc.ATTEMPT,
        "not a non-negative integer",  # the identity's own check
    ),
    "rank as bytes": ((sc.SPAN_EVAL, 80, 81, {sc.RANK: b"\x00"}), sc.RANK, "expected an integer"),
    "steps as array": (
        (sc.SPAN_FIRST_BATCH, 0, 11, {sc.STEP: [0, 1]}),
        sc.STEP,
        "expected an integer",
    ),
    "model as array": ((sc.SPAN_EVAL, 80, 81, {sc.MODEL: ["dlrm"]}), sc.MODEL, "expected a string"),
    "cause as bytes": (
        (sc.SPAN_FAILURE, 85, 85, {sc.FAILURE_CAUSE: b"oom"}),
        sc.FAILURE_CAUSE,
        "expected a string",
    ),
}
"""Spans whose vocabulary attribute holds an array, a key-value list or bytes: the attribute,
and the words of its rejection that name the type the vocabulary gives it."""


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_vocabulary_attributes_holding_no_single_value_are_rejected(
    database_url: str, encoding: str
) -> None:
    """An ETT attribute the domain reads as one value, sent as an array, a key-value list or
    bytes, rejects its span alone at ingest (it used to be stored and fail the job's
    recompute); the well-typed spans of the same request are stored and the job computes."""
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store, settle_s=0)
    app = create_app(Settings(db_url=database_url), pipeline)
    bad = [spec for spec, _, _ in ILL_TYPED.values()]
    body, ctype = _typed_body("typed-job", [*WELL_TYPED[:2], *bad, *WELL_TYPED[2:]], encoding)
    alone = [_typed_body("typed-alone", [spec], encoding) for spec in bad]

    async def run() -> tuple[httpx.Response, int, httpx.Response, list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            posted = await client.post("/v1/traces", content=body, headers={"content-type": ctype})
            settled = await asyncio.to_thread(pipeline.recompute_dirty)
            job = await client.get("/api/v1/jobs/typed-job")
            each = [
                await client.post("/v1/traces", content=b, headers={"content-type": t})
                for b, t in alone
            ]
            return posted, settled, job, each

    try:
        posted, settled, job, each = asyncio.run(run())
        assert posted.status_code == 200, posted.text
        rejected, message = _partial(posted)
        assert rejected == len(bad), message
        assert store.span_counts()["spans"] == len(WELL_TYPED)
        assert settled == 1  # computed, not marked failed
        assert job.status_code == 200, job.text
        figures = job.json()
        assert figures["state"] == "completed"
        assert figures["wall_s"] == pytest.approx(100.0)
        assert figures["tts_s"] == pytest.approx(10.0)
        assert figures["checkpoint_blocking_s"] == pytest.approx(2.0)
        assert figures["productive_s"] == pytest.approx(88.0)
        for (kind, (_, key, words)), answer in zip(ILL_TYPED.items(), each, strict=True):
            assert answer.status_code == 200, (kind, answer.text)
            rejected, message = _partial(answer)
            assert rejected == 1, (kind, message)
            assert f"{key} " in message and words in message, (kind, message)
        assert store.span_counts()["spans"] == len(WELL_TYPED)
    finally:
        store.close()


NON_FINITE: dict[str, SpanSpec] = {
    "frames inf": (sc.SPAN_COMPILE, 20, 21, {sc.COMPILE_FRAMES: math.inf}),
    "user nan": (sc.SPAN_EVAL, 30, 31, {"user.ratio": math.nan}),
    "user -inf": (sc.SPAN_EVAL, 32, 33, {"user.ratio": -math.inf}),
    "nan in an array": (sc.SPAN_EVAL, 34, 35, {"user.ratios": [0.5, math.nan]}),
}
"""Spans carrying a double that is NaN or infinite: JSON holds none of them."""


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_non_finite_doubles_reject_their_span(database_url: str, encoding: str) -> None:
    """A NaN or infinite double rejects its span alone: SQLite's JSON took it and PostgreSQL's
    jsonb (the Grafana views) then refused every row of the view, and an infinite frame count
    failed the job's every recompute. Finite doubles of the same request are stored."""
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store, settle_s=0)
    app = create_app(Settings(db_url=database_url), pipeline)
    finite: SpanSpec = (sc.SPAN_EVAL, 40, 41, {"user.ratio": 0.25, "user.ratios": [1.5, -2.0]})
    spans = [*WELL_TYPED[:2], *NON_FINITE.values(), finite, *WELL_TYPED[2:]]
    body, ctype = _typed_body("finite-job", spans, encoding)

    async def run() -> tuple[httpx.Response, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            posted = await client.post("/v1/traces", content=body, headers={"content-type": ctype})
            return posted, await asyncio.to_thread(pipeline.recompute_dirty)

    try:
        posted, settled = asyncio.run(run())
        assert posted.status_code == 200, posted.text
        rejected, message = _partial(posted)
        assert rejected == len(NON_FINITE), message
        assert "which JSON cannot hold" in message, message
        assert store.span_counts()["spans"] == len(WELL_TYPED) + 1
        assert settled == 1 and store.recompute_failure("finite-job") is None
        with store.engine.connect() as conn:  # every stored row is JSON both databases read
            texts = conn.exec_driver_sql("SELECT attributes FROM spans").scalars().all()
        assert {json.loads(t).get("user.ratio") for t in texts} == {None, 0.25}
    finally:
        store.close()
