"""Large requests neither exhaust memory nor starve small ones, on SQLite and PostgreSQL:

- past ``ETT_MAX_INFLIGHT_BYTES`` of decoded bodies in flight a request is answered 429 with
  ``Retry-After`` (OTLP retryable), and once retried nothing is lost;
- a large request is stored in chunks, and a small request that arrives while it is being
  stored is committed between its chunks, before its last one.

The pipeline is the real one over a real store, wrapped (our own interface) to hold requests
in flight or to record the order of commits; no step depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.api._app import INGEST_CHUNK_SPANS
from ett_collector.domain import SpanRecord
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.storage._pruned_ingest import Ingested
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.bodies import window_body

PROTO = {"Content-Type": "application/x-protobuf"}
WAIT_S = 60.0
"""A bound on waits that only a broken collector reaches (the test then fails, it never passes
by timing)."""


class GatedPipeline(Pipeline):
    """Holds every ingest until the gate opens; counts the requests waiting at it."""

    def __init__(self, store: Store) -> None:
        super().__init__(store, settle_s=0)
        self.gate = threading.Event()
        self.waiting = 0
        self._count = threading.Lock()

    def accept(self, records: Sequence[SpanRecord]) -> Ingested:
        with self._count:
            self.waiting += 1
        assert self.gate.wait(WAIT_S), "the test never opened the gate"
        return super().accept(records)


class RecordingPipeline(Pipeline):
    """Records each committed ingest as ``(job, spans)``; after the large job's first chunk it
    waits until the small job has been committed (or the bound passes)."""

    def __init__(self, store: Store, large: str, small: str) -> None:
        super().__init__(store, settle_s=0)
        self.large, self.small = large, small
        self.commits: list[tuple[str, int]] = []
        self.first_chunk = threading.Event()
        self.small_done = threading.Event()

    def accept(self, records: Sequence[SpanRecord]) -> Ingested:
        done = super().accept(records)
        job = records[0].job_id
        self.commits.append((job, len(records)))
        if job == self.small:
            self.small_done.set()
        elif not self.first_chunk.is_set():
            self.first_chunk.set()
            self.small_done.wait(WAIT_S)
        return done


def _store(url: str) -> Store:
    store = Store(url)
    store.upgrade()
    return store


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_requests_past_the_inflight_limit_are_refused_and_lose_nothing_when_retried(
    database_url: str,
) -> None:
    bodies = [window_body(f"big-{i}", 2000) for i in range(3)]
    size = len(bodies[0])
    store = _store(database_url)
    pipeline = GatedPipeline(store)
    settings = Settings(
        db_url=database_url, max_body_bytes=size + 1024, max_inflight_bytes=2 * size + 1024
    )
    app = create_app(settings, pipeline)

    async def run() -> tuple[list[httpx.Response], httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            tasks = [
                asyncio.create_task(client.post("/v1/traces", content=b, headers=PROTO))
                for b in bodies
            ]
            # the refused request answers while the two admitted ones wait at the gate
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            while pipeline.waiting < 2:
                await asyncio.sleep(0.01)
            pipeline.gate.set()
            answers = [await t for t in tasks]
            refused = [i for i, r in enumerate(answers) if r.status_code == 429]
            assert len(refused) == 1, [r.status_code for r in answers]
            retry = await client.post("/v1/traces", content=bodies[refused[0]], headers=PROTO)
            return answers, retry

    try:
        answers, retry = asyncio.run(run())
        refused = next(r for r in answers if r.status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1
        assert refused.headers["content-type"] == "application/x-protobuf"
        assert sorted(r.status_code for r in answers) == [200, 200, 429]
        assert retry.status_code == 200
        assert store.span_counts()["spans"] == 3 * 2000
    finally:
        store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_a_small_request_is_stored_between_the_chunks_of_a_large_one(database_url: str) -> None:
    spans = 2 * INGEST_CHUNK_SPANS + 100
    large = window_body("large", spans)
    small = window_body("small", 1, first_span_id=10**9)
    store = _store(database_url)
    pipeline = RecordingPipeline(store, "large", "small")
    app = create_app(Settings(db_url=database_url), pipeline)

    async def run() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            big = asyncio.create_task(client.post("/v1/traces", content=large, headers=PROTO))
            while not pipeline.first_chunk.is_set():
                await asyncio.sleep(0.01)
            little = await client.post("/v1/traces", content=small, headers=PROTO)
            return await big, little

    try:
        big, little = asyncio.run(run())
        assert big.status_code == 200 and little.status_code == 200
        assert pipeline.commits == [
            ("large", INGEST_CHUNK_SPANS),
            ("small", 1),
            ("large", INGEST_CHUNK_SPANS),
            ("large", 100),
        ]
        assert store.span_counts()["spans"] == spans + 1
    finally:
        store.close()
