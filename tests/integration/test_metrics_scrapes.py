"""``/metrics`` is made off the event loop, once for every scrape that asks meanwhile.

Made on the event loop, a 42 MB exposition (1,000 model/team pairs) held every other request
for about a second per scrape: with 20 scrapes at once an ingest POST waited 16 s. Made per
scrape on threads, 20 at once took the collector to 2.4 GB; shared, 222 MB."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import httpx

from ett_collector.api import create_app
from ett_collector.read.metrics import CollectorMetrics
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline


class SlowMetrics(CollectorMetrics):
    """An exposition that takes until the test lets it finish, counting how often it is made."""

    def __init__(self) -> None:
        super().__init__()
        self.made = 0
        self.started = threading.Event()
        self.release = threading.Event()

    def exposition(self) -> bytes:
        self.made += 1
        self.started.set()
        assert self.release.wait(5), "the test never let the exposition finish"
        return super().exposition()


def test_scrapes_share_one_exposition_made_off_the_event_loop(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    store.upgrade()
    metrics = SlowMetrics()
    app = create_app(Settings(db_url=url), Pipeline(store), metrics)

    async def scenario() -> tuple[list[httpx.Response], httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            scrapes = [asyncio.ensure_future(client.get("/metrics")) for _ in range(5)]
            while not metrics.started.is_set():
                await asyncio.sleep(0.01)
            # the exposition is being made: the loop still answers others
            health = await asyncio.wait_for(client.get("/healthz"), timeout=10)
            metrics.release.set()
            return list(await asyncio.gather(*scrapes)), health

    try:
        scrapes, health = asyncio.run(scenario())
    finally:
        store.close()
    assert health.status_code == 200
    assert [r.status_code for r in scrapes] == [200] * 5
    assert (
        len({r.content for r in scrapes}) == 1
        and b"ett_ingest_requests_total" in scrapes[0].content
    )
    assert metrics.made == 1
