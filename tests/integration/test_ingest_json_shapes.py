"""What a JSON export request must be: an object. ``null`` is refused 400 as ``[1, 2]`` is
(protobuf's own JSON parser refuses both), gzip or not; ``{}`` is an empty export (200)."""

from __future__ import annotations

import asyncio
import gzip

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
