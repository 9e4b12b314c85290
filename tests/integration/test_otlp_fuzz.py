"""A seeded fuzz of ``POST /v1/traces``: mutated protobuf and JSON bodies never get a 500.

Each body starts from a valid export request (two resources, good spans) and is mutated at the
byte level (flips, cuts, repeats, insertions, truncation) or, for JSON, at the value level (a
value replaced by another type, a hostile string, a deep nesting). The collector must answer
each one with 200 (partial success where spans were refused) or a 4xx, store nothing half-way,
and keep serving. The seed is fixed, so a failure reproduces.
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.api import create_app
from collector.pipeline import Pipeline
from collector.settings import Settings
from collector.storage import Store
from instrument import semconv as sc
from tests.conftest import BACKENDS

SEED = 20261130
BODIES = 300
OK = {200, 400, 413, 415}
JSON_TYPE = {"content-type": "application/json"}
PB_TYPE = {"content-type": "application/x-protobuf"}


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _request(rng: random.Random) -> dict[str, Any]:
    resources = []
    for r in range(2):
        spans = []
        for _ in range(3):
            start = 1_700_000_000_000_000_000 + rng.randrange(10**12)
            spans.append(
                {
                    "traceId": f"{rng.getrandbits(128) | 1:032x}",
                    "spanId": f"{rng.getrandbits(64) | 1:016x}",
                    "name": rng.choice([sc.SPAN_EVAL, sc.SPAN_TRAIN_WINDOW, "custom"]),
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(start + rng.randrange(10**10)),
                    "attributes": [_attr(sc.STEP, rng.randrange(1000)), _attr("user.x", "y")],
                }
            )
        attrs = [_attr(sc.JOB_ID, f"fuzz-{r}"), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, r)]
        resources.append({"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]})
    return {"resourceSpans": resources}


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


_HOSTILE_TEXT: list[Any] = [
    lambda text: text + "\x00",
    lambda text: "\ud800" + text,
    lambda text: text * 5000,
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


def _to_protobuf(request: dict[str, Any]) -> bytes:
    msg = ExportTraceServiceRequest()
    tree = json.loads(json.dumps(request))
    for res in tree["resourceSpans"]:  # protobuf's JSON mapping wants base64 ids
        for span in res["scopeSpans"][0]["spans"]:
            for key in ("traceId", "spanId"):
                span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    json_format.ParseDict(tree, msg)
    return bytes(msg.SerializeToString())


def _bodies(rng: random.Random) -> list[tuple[bytes, dict[str, str]]]:
    out: list[tuple[bytes, dict[str, str]]] = []
    for n in range(BODIES):
        request = _request(rng)
        kind = n % 3
        if kind == 0:
            out.append((_mutate_bytes(rng, _to_protobuf(request)), PB_TYPE))
        elif kind == 1:
            out.append((_mutate_bytes(rng, json.dumps(request).encode()), JSON_TYPE))
        else:
            tree = request
            for _ in range(rng.randint(1, 3)):
                tree = _mutate_json(rng, tree)
            out.append((json.dumps(tree).encode(), JSON_TYPE))
    return out


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_mutated_bodies_never_get_a_500(database_url: str) -> None:
    url = database_url
    store = Store(url)
    store.upgrade()
    app = create_app(Settings(db_url=url, max_body_bytes=1 << 20), Pipeline(store))
    bodies = _bodies(random.Random(SEED))

    async def post_all() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            codes = []
            for body, headers in bodies:
                r = await client.post("/v1/traces", content=body, headers=headers)
                codes.append(r.status_code)
            good = _request(random.Random(SEED + 1))
            last = await client.post(
                "/v1/traces", content=json.dumps(good).encode(), headers=JSON_TYPE
            )
            codes.append(last.status_code)
            return codes

    try:
        codes = asyncio.run(post_all())
        bad = [(i, c) for i, c in enumerate(codes) if c not in OK]
        assert bad == [], f"unexpected answers (body index, status): {bad[:10]}"
        assert codes[-1] == 200  # still serving after the fuzz
        accepted = sum(1 for c in codes[:-1] if c == 200)
        assert 0 < accepted < BODIES  # the mutations reached both outcomes
        print(f"\n{BODIES} mutated bodies: {accepted} answered 200, {BODIES - accepted} 4xx")
    finally:
        store.close()
