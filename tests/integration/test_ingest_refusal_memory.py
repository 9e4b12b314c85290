"""A refused request leaves nothing behind: the decompressed chunk of a gzip bomb (413) or the
body of a malformed export (400) is freed when the answer goes, by reference counting alone.

Raised out of the ingest route's worker thread, the refusal used to sit in a reference cycle
with anyio's frame, holding every frame of the failed decode until the cyclic garbage collector
ran (rarely, in a server process): 60 bombs of 1 GiB of zeros grew the collector from 88 MB to
4.7 GB. Measured here with the cyclic collector off and ``tracemalloc``, so the test does not
depend on when a collection would run.
"""

from __future__ import annotations

import asyncio
import gc
import gzip
import tracemalloc

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline

MAX_BODY = 1024 * 1024
BOMB = gzip.compress(bytes(16 * MAX_BODY), compresslevel=9)
"""16 MiB of zeros in about 16 KiB: refused (413) once 1 MiB of it is inflated."""
MALFORMED = b'{"resourceSpans": [' + b" " * (MAX_BODY - 100)
"""Almost 1 MiB of JSON that never closes: refused 400."""
REQUESTS = 40


@pytest.mark.parametrize(
    ("body", "headers", "status"),
    [
        (BOMB, {"Content-Encoding": "gzip"}, 413),
        (MALFORMED, {}, 400),
    ],
    ids=["gzip-bomb", "malformed-json"],
)
def test_refused_bodies_are_freed_without_the_cyclic_collector(
    sqlite_url: str, sqlite_store: Store, body: bytes, headers: dict[str, str], status: int
) -> None:
    settings = Settings(db_url=sqlite_url, max_body_bytes=MAX_BODY)
    app = create_app(settings, Pipeline(sqlite_store, settle_s=0))
    headers = {"Content-Type": "application/json", **headers}

    async def send(client: httpx.AsyncClient, times: int) -> None:
        for _ in range(times):
            r = await client.post("/v1/traces", content=body, headers=headers)
            assert r.status_code == status, r.text

    async def run() -> tuple[int, int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            await send(client, 3)  # threads, pools and caches made once
            before = tracemalloc.get_traced_memory()[0]
            await send(client, REQUESTS)
            return before, tracemalloc.get_traced_memory()[0]

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        before, after = asyncio.run(run())
    finally:
        tracemalloc.stop()
        gc.enable()
    grown = after - before
    assert grown < 2 * MAX_BODY, f"{REQUESTS} refusals kept {grown / MAX_BODY:.1f} MiB"
