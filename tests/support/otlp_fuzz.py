"""A seeded fuzz of ``POST /v1/traces``, shared by the integration test (a few hundred bodies, in
``make test``) and the performance run (100,000 bodies, ``make bench``).

Each body starts from a valid export request (two resources, good spans) and is, by turns:
mutated at the byte level as protobuf or as JSON (flips, cuts, repeats, insertions, truncation);
mutated at the value level as JSON (a value replaced by another type, a hostile string, a deep
nesting); or made *mixed*: good spans with one span poisoned at one of its values. The collector
must answer each body with 200 (partial success where spans were refused) or a 4xx, never a 500;
a mixed request must keep its good spans (stored = sent - rejected, read back from the store);
and the collector must keep serving after. The seed fixes every body, so a failure reproduces.
"""

from __future__ import annotations

import json
import random
import resource
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from starlette.applications import Starlette

from ett import semconv as sc
from ett_collector.storage import Store

SEED = 20261130
OK = {200, 400, 413, 415}
JSON_TYPE = {"content-type": "application/json"}
PB_TYPE = {"content-type": "application/x-protobuf"}


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(rng: random.Random) -> dict[str, Any]:
    start = 1_700_000_000_000_000_000 + rng.randrange(10**12)
    return {
        "traceId": f"{rng.getrandbits(128) | 1:032x}",
        "spanId": f"{rng.getrandbits(64) | 1:016x}",
        "name": rng.choice([sc.SPAN_EVAL, sc.SPAN_TRAIN_WINDOW, "custom"]),
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + rng.randrange(10**10)),
        "attributes": [_attr(sc.STEP, rng.randrange(1000)), _attr("user.x", "y")],
    }


def _resource(job_id: str, rank: int, spans: list[dict[str, Any]]) -> dict[str, Any]:
    attrs = [_attr(sc.JOB_ID, job_id), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, rank)]
    return {"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]}


def good_request(rng: random.Random) -> dict[str, Any]:
    """A valid export request: two resources of three spans."""
    return {
        "resourceSpans": [
            _resource(f"fuzz-{r}", r, [_span(rng) for _ in range(3)]) for r in range(2)
        ]
    }


def _mutate_bytes(rng: random.Random, body: bytes) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 4)):
        if not data:
            break
        i = rng.randrange(len(data))
        kind = rng.randrange(5)
        if kind == 0:
            data[i] ^= 1 << rng.randrange(8)
        elif kind == 1:
            del data[i : i + rng.randint(1, 16)]
        elif kind == 2:
            data[i:i] = data[i : i + rng.randint(1, 64)] * rng.randint(1, 8)
        elif kind == 3:
            data[i:i] = rng.randbytes(rng.randint(1, 8))
        else:
            del data[i:]
    return bytes(data)


_HOSTILE: list[Any] = [
    None,
    "",
    "\x00",
    "\ud800",
    "x" * 70_000,
    -1,
    2**70,
    1e308,
    float("nan"),
    [],
    {},
    [[[[[[]]]]]],
    {"stringValue": "\udfff"},
    {"intValue": "nope"},
    {"arrayValue": {"values": [{"kvlistValue": {"values": [{"key": "k"}]}}]}},
    True,
]

_HOSTILE_TEXT: list[Callable[[str], str]] = [
    lambda text: text + "\x00",
    lambda text: "\ud800" + text,
    lambda text: text * min(5000, 1_200_000 // (len(text) + 1) + 1),  # up to ~1.2 MB
    lambda text: text[: len(text) // 2] + "\udc80",
]


def _mutate_json(rng: random.Random, tree: Any) -> Any:
    """``tree`` with one value somewhere replaced by a hostile one."""
    if isinstance(tree, dict) and tree and rng.random() < 0.97:
        key = rng.choice(list(tree))
        return {**tree, key: _mutate_json(rng, tree[key])}
    if isinstance(tree, list) and tree and rng.random() < 0.97:
        i = rng.randrange(len(tree))
        return [*tree[:i], _mutate_json(rng, tree[i]), *tree[i + 1 :]]
    if isinstance(tree, str) and rng.random() < 0.5:  # keep the shape, poison the text
        return rng.choice(_HOSTILE_TEXT)(tree)
    return rng.choice(_HOSTILE)


def _poison_span(rng: random.Random, span: dict[str, Any]) -> dict[str, Any]:
    """One span with a hostile text in its name, an identity or an attribute value."""
    poison = rng.choice(_HOSTILE_TEXT)
    where = rng.randrange(3)
    if where == 0:
        return {**span, "name": poison(span["name"])}
    key = rng.choice([sc.JOB_ID, sc.MODEL, sc.TEAM, sc.COMPONENT, "user.x"])
    value = poison("mixed-job" if key == sc.JOB_ID else "value")
    return {**span, "attributes": [*span["attributes"], _attr(key, value)]}


def _any_value(value: dict[str, Any]) -> AnyValue:
    if "intValue" in value:
        return AnyValue(int_value=int(value["intValue"]))
    return AnyValue(string_value=value["stringValue"])


def _key_values(attrs: list[dict[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=a["key"], value=_any_value(a["value"])) for a in attrs]


def _to_protobuf(request: dict[str, Any]) -> bytes:
    """The protobuf encoding of a request made by :func:`good_request` (or a mixed one);
    ``ValueError`` when a string cannot be held (a lone surrogate)."""
    msg = ExportTraceServiceRequest()
    try:
        for res in request["resourceSpans"]:
            out = msg.resource_spans.add()
            out.resource.attributes.extend(_key_values(res["resource"]["attributes"]))
            scope = out.scope_spans.add()
            for span in res["scopeSpans"][0]["spans"]:
                scope.spans.append(
                    Span(
                        trace_id=bytes.fromhex(span["traceId"]),
                        span_id=bytes.fromhex(span["spanId"]),
                        name=span["name"],
                        start_time_unix_nano=int(span["startTimeUnixNano"]),
                        end_time_unix_nano=int(span["endTimeUnixNano"]),
                        attributes=_key_values(span["attributes"]),
                    )
                )
    except (TypeError, UnicodeError) as exc:
        raise ValueError(f"not encodable as protobuf: {exc}") from exc
    return bytes(msg.SerializeToString())


@dataclass(frozen=True)
class Body:
    """One fuzz body; ``mixed_job`` names the job of a mixed request (its spans, ``sent``)."""

    content: bytes
    headers: dict[str, str]
    mixed_job: str | None = None
    sent: int = 0


def bodies(rng: random.Random, count: int) -> Iterator[Body]:
    """``count`` fuzz bodies, made one at a time (a large run holds one body, not all)."""
    for n in range(count):
        request = good_request(rng)
        kind = n % 4
        if kind == 0:
            yield Body(_mutate_bytes(rng, _to_protobuf(request)), PB_TYPE)
        elif kind == 1:
            yield Body(_mutate_bytes(rng, json.dumps(request).encode()), JSON_TYPE)
        elif kind == 2:
            tree = request
            for _ in range(rng.randint(1, 3)):
                tree = _mutate_json(rng, tree)
            yield Body(json.dumps(tree).encode(), JSON_TYPE)
        else:
            job = f"mixed-{n}"
            spans = [_span(rng) for _ in range(4)]
            bad = rng.randrange(len(spans))
            spans[bad] = _poison_span(rng, spans[bad])
            mixed = {"resourceSpans": [_resource(job, 0, spans)]}
            if rng.random() < 0.5:
                try:
                    yield Body(_to_protobuf(mixed), PB_TYPE, job, len(spans))
                    continue
                except ValueError:
                    pass  # protobuf strings cannot hold a lone surrogate: send it as JSON
            yield Body(json.dumps(mixed).encode(), JSON_TYPE, job, len(spans))


def _rejected(response: httpx.Response) -> int:
    if response.headers["content-type"].startswith("application/json"):
        partial = response.json().get("partialSuccess", {})
        return int(partial.get("rejectedSpans", 0))
    message = ExportTraceServiceResponse.FromString(response.content)
    return int(message.partial_success.rejected_spans)


def peak_rss_mib() -> float:
    """This process's peak resident memory so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class FuzzRun:
    """What a fuzz run saw."""

    codes: dict[int, int] = field(default_factory=dict)
    unexpected: list[tuple[int, int, str]] = field(default_factory=list)
    mixed: int = 0
    mixed_lost: list[tuple[int, str]] = field(default_factory=list)
    last_good: int = 0
    rss_mib: list[float] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return self.codes.get(200, 0)


async def fuzz(
    app: Starlette, store: Store, count: int, seed: int = SEED, checkpoints: int = 10
) -> FuzzRun:
    """POST ``count`` fuzz bodies to ``app`` one after another, checking every answer, then a
    good request; ``rss_mib`` samples the peak RSS ``checkpoints`` times along the way."""
    run = FuzzRun()
    rng = random.Random(seed)
    every = max(1, count // checkpoints)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)  # a 500 is counted
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        for n, body in enumerate(bodies(rng, count)):
            r = await client.post("/v1/traces", content=body.content, headers=body.headers)
            run.codes[r.status_code] = run.codes.get(r.status_code, 0) + 1
            if r.status_code not in OK:
                run.unexpected.append((n, r.status_code, r.text[:200]))
            elif body.mixed_job is not None:
                run.mixed += 1
                stored = len(store.load_spans(body.mixed_job))
                if r.status_code != 200 or stored != body.sent - _rejected(r):
                    run.mixed_lost.append((n, f"{r.status_code}: {stored} of {body.sent} stored"))
            if (n + 1) % every == 0:
                run.rss_mib.append(peak_rss_mib())
        good = good_request(random.Random(seed + 1))
        last = await client.post("/v1/traces", content=json.dumps(good).encode(), headers=JSON_TYPE)
        run.last_good = last.status_code
    return run
