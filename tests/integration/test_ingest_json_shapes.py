"""What a JSON export request must be: an object. ``null`` is refused 400 as ``[1, 2]`` is
(protobuf's own JSON parser refuses both), gzip or not; ``{}`` is an empty export (200)."""

from __future__ import annotations

import asyncio
import gzip
import json

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline

JSON = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("body", "gzipped", "status"),
    [
        (b"null", False, 400),
        (b" null\n", False, 400),
        (b"null", True, 400),
        (b"[1,2]", False, 400),
        (b"{}", False, 200),
        (b'{"resourceSpans": null}', False, 200),
        (b"{}", True, 200),
    ],
)
def test_a_json_request_must_be_an_object(
    sqlite_url: str, sqlite_store: Store, body: bytes, gzipped: bool, status: int
) -> None:
    app = create_app(Settings(db_url=sqlite_url), Pipeline(sqlite_store, settle_s=0))
    headers = {**JSON, "Content-Encoding": "gzip"} if gzipped else JSON
    content = gzip.compress(body) if gzipped else body

    async def post() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post("/v1/traces", content=content, headers=headers)

    r = asyncio.run(post())
    assert r.status_code == status, r.text
    if status == 400:
        assert r.json()["code"] == 3, r.json()  # INVALID_ARGUMENT, in OTLP's status format


def _export(job: str) -> bytes:
    attrs = [
        {"key": "ett.job.id", "value": {"stringValue": job}},
        {"key": "ett.attempt", "value": {"intValue": "0"}},
        {"key": "ett.rank", "value": {"intValue": "0"}},
    ]
    span = {
        "traceId": "0af7651916cd43dd8448eb211c80319c",
        "spanId": "b7ad6b7169203331",
        "name": "ett.eval",
        "startTimeUnixNano": "1790000000000000000",
        "endTimeUnixNano": "1790000001000000000",
    }
    doc = {
        "resourceSpans": [{"resource": {"attributes": attrs}, "scopeSpans": [{"spans": [span]}]}]
    }
    return json.dumps(doc).encode()


def test_a_body_of_empty_spans_is_refused_and_the_collector_keeps_what_it_had(
    sqlite_url: str, sqlite_store: Store
) -> None:
    """3 MiB of ``{}`` spans (30 MiB took a request 0.8 GB and 12 s to decode) is refused 400
    before it is decoded; the export before it stays stored, the one after it is stored."""
    app = create_app(Settings(db_url=sqlite_url), Pipeline(sqlite_store, settle_s=0))
    bomb = b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + b"{}," * (1 << 20) + b"{}]}]}]}"

    async def post(client: httpx.AsyncClient, body: bytes, gzipped: bool) -> httpx.Response:
        headers = {**JSON, "Content-Encoding": "gzip"} if gzipped else JSON
        content = gzip.compress(body) if gzipped else body
        return await client.post("/v1/traces", content=content, headers=headers)

    async def run() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            before = await post(client, _export("job-before"), False)
            refused = [await post(client, bomb, gzipped) for gzipped in (False, True)]
            after = await post(client, _export("job-after"), False)
            return [before, *refused, after]

    before, plain, gzipped, after = asyncio.run(run())
    assert (before.status_code, after.status_code) == (200, 200), (before.text, after.text)
    for refused in (plain, gzipped):
        assert refused.status_code == 400, refused.text
        answer = refused.json()
        assert answer["code"] == 3 and "implausible OTLP JSON body" in answer["message"], answer
    assert [len(sqlite_store.load_spans(job)) for job in ("job-before", "job-after")] == [1, 1]
