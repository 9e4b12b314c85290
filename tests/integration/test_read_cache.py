"""The read cache of one job's answer (``collector/read/answers.py``), on real SQLite and
PostgreSQL.

Two apps read one database: one keeps answers (``ETT_READ_CACHE``), one does not. Another store,
as another collector would, changes a job underneath them between reads (new spans, recomputes,
a clock-only refresh, a failed recompute), and once a separate process (``ett recompute``) does:
after each change both apps answer the same status and the same bytes, and the caching app's
answer is the new one. The apps' pipelines are fakes that record what a read asks of them (a
dirty job's recompute scheduled) instead of recomputing, so nothing changes but what the test
changes.

With ``ETT_READ_RECHECK_S`` a stamp just checked is trusted for that long: the first test reads
with 0 (every read checks); the later ones show that this process's own pipeline's changes are
seen by the very next read whatever the interval, and another store's once the interval passed
since the change (never sooner is asserted only with an interval of an hour).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS, throwaway_postgres
from tests.support.spans import span
from tests.support.worked_example import worked_example

BASE = 1_790_000_000.0
T1 = BASE + 1000.0
T2 = BASE + 2000.0
REPO = Path(__file__).resolve().parents[2]


class RecordingPipeline(Pipeline):
    """A pipeline whose reads' requests are recorded, never acted on."""

    def __init__(self, store: Store) -> None:
        super().__init__(store)
        self.scheduled: list[str] = []

    def schedule(self, job_id: str, dirty: bool | None = None) -> bool:
        self.scheduled.append(job_id)
        return False

    def fresh(self, job_id: str, wait_s: float) -> bool:
        return not self.store.is_dirty(job_id)


def _get(app: Starlette, path: str) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ett") as c:
            return await c.get(path)

    return asyncio.run(go())


class Readers:
    """The caching app and the plain one over ``url``, each with a store of its own."""

    def __init__(self, url: str, recheck_s: float = 0.0) -> None:
        self.stores = [Store(url), Store(url)]
        self.pipelines = [RecordingPipeline(s) for s in self.stores]
        cached, plain = (
            create_app(
                Settings(db_url=url, read_cache_jobs=n, read_wait_s=0.05, read_recheck_s=recheck_s),
                p,
            )
            for n, p in zip((1000, 0), self.pipelines, strict=True)
        )
        self.cached, self.plain = cached, plain
        self.answers = cached.state.query.answers
        assert self.answers is not None and plain.state.query.answers is None

    def read(self, job_id: str) -> httpx.Response:
        """The job read from both apps, the caching one twice (the second from its cache):
        the same status, type and bytes from all three reads."""
        path = f"/api/v1/jobs/{job_id}"
        first = _get(self.cached, path)
        hits = self.answers.hits
        again = _get(self.cached, path)
        plain = _get(self.plain, path)
        for r in (again, plain):
            assert (r.status_code, r.headers["content-type"], r.content) == (
                first.status_code,
                first.headers["content-type"],
                first.content,
            )
        if first.status_code == 200:
            assert self.answers.hits == hits + 1  # the second read was answered from the cache
        return first

    def close(self) -> None:
        for s in self.stores:
            s.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_cached_reads_answer_what_another_store_saved_underneath(database_url: str) -> None:
    other = Store(database_url)
    other.upgrade()
    readers = Readers(database_url)
    spans = worked_example("w", base=BASE)
    try:
        assert readers.read("nobody").status_code == 404
        other.ingest([s for s in spans if s.attempt == 1])
        assert readers.read("w").status_code == 503  # spans, no figures yet

        Pipeline(other, clock=lambda: T1).recompute("w")
        first = readers.read("w").json()
        assert first["fresh"] is True and first["computed_at"] == T1 and first["failures"] == 0

        other.ingest([s for s in spans if s.attempt == 0])  # newer spans: dirty
        scheduled = [len(p.scheduled) for p in readers.pipelines]
        stale = readers.read("w").json()
        assert stale["fresh"] is False and stale["failures"] == 0
        assert stale["computed_at"] == T1
        # every read of the dirty job asked for its recompute, from the cache or not
        assert [len(p.scheduled) for p in readers.pipelines] == [
            scheduled[0] + 2,
            scheduled[1] + 1,
        ]

        Pipeline(other, clock=lambda: T1).recompute("w")  # same clock, a newer sequence
        whole = readers.read("w").json()
        assert whole["fresh"] is True and whole["failures"] == 1
        assert whole["span_count"] == len(spans)

        Pipeline(other, clock=lambda: T2).recompute("w")  # no new span: a clock-only refresh
        assert readers.read("w").json()["computed_at"] == T2

        other.mark_failed("w", other.dirty_seq("w"), "ValueError: boom")
        failed = readers.read("w").json()
        assert failed["fresh"] is False and failed["error"].endswith("ValueError: boom")
        assert {k: v for k, v in failed.items() if k not in ("fresh", "error")} == {
            k: v for k, v in whole.items() if k not in ("fresh", "computed_at")
        } | {"computed_at": T2}

        extra = span(sc.SPAN_TRAIN_WINDOW, BASE + 450, BASE + 451, 1, 0, "w", span_id=999)
        other.ingest([extra])  # one more span: dirty again
        assert readers.read("w").json()["fresh"] is False
        env = {**os.environ, "ETT_DB_URL": database_url}
        done = subprocess.run(
            [sys.executable, "-m", "ett_cli", "recompute", "--db", database_url],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        by_process = readers.read("w").json()  # saved by another process
        assert by_process["fresh"] is True and "error" not in by_process
        assert by_process["span_count"] == len(spans) + 1
        assert by_process["computed_at"] > T2
        assert json.loads(_get(readers.cached, "/api/v1/jobs/w").content) == by_process
    finally:
        readers.close()
        other.close()


@pytest.mark.postgres
def test_a_cached_read_during_a_database_outage_is_a_503_and_recovers() -> None:
    """The probe's connection is not handed back broken: reads answer 503 while PostgreSQL is
    down and the job's answer again once it is back."""
    with throwaway_postgres("ett-pg-readcache-") as server:
        url = server.create_database("ett")
        other = Store(url)
        other.upgrade()
        other.ingest(worked_example("w", base=BASE))
        Pipeline(other, clock=lambda: T1).recompute("w")
        other.close()
        readers = Readers(url)
        try:
            before = readers.read("w")
            assert before.status_code == 200
            server.halt()
            down = _get(readers.cached, "/api/v1/jobs/w")
            assert down.status_code == 503 and down.headers["retry-after"]
            assert "database is unavailable" in down.json()["error"]
            server.launch()
            after = _get(readers.cached, "/api/v1/jobs/w")  # no dead connection kept
            assert (after.status_code, after.content) == (200, before.content)
            plain = _get(readers.plain, "/api/v1/jobs/w")  # SQLAlchemy: the next read
            if plain.status_code == 503:  # (no pre-ping: the first use found it dead)
                plain = _get(readers.plain, "/api/v1/jobs/w")
            assert (plain.status_code, plain.content) == (200, before.content)
        finally:
            readers.close()


def _read(app: Starlette, job_id: str) -> dict[str, Any]:
    r = _get(app, f"/api/v1/jobs/{job_id}")
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def _after(instant: float, interval_s: float) -> None:
    """Wait on the monotonic clock until more than ``interval_s`` has passed since
    ``instant``."""
    while time.monotonic() <= instant + interval_s:
        time.sleep(interval_s / 4)


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_this_process_changes_are_read_at_once_whatever_the_recheck(database_url: str) -> None:
    """With an hour's recheck interval, what the caching app's own pipeline ingests, saves or
    marks failed is in the very next read (the pipeline marks the kept stamp unchecked); a
    change by another store is not, until the job changes here too."""
    readers = Readers(database_url, recheck_s=3600.0)
    own = readers.pipelines[0]  # the caching app's pipeline
    own.store.upgrade()
    spans = worked_example("w", base=BASE)
    boom = False

    def clock() -> float:
        if boom:
            raise ValueError("boom")
        return T1

    try:
        own.ingest([s for s in spans if s.attempt == 1])
        own.clock = clock
        assert own.recompute("w")
        first = _read(readers.cached, "w")
        assert first["fresh"] is True and first["failures"] == 0
        trusted = readers.answers.trusted_hits
        assert _read(readers.cached, "w") == first
        assert readers.answers.trusted_hits == trusted + 1  # answered without the lookup

        own.ingest([s for s in spans if s.attempt == 0])  # this process's ingest: dirty
        scheduled = len(own.scheduled)
        stale = _read(readers.cached, "w")
        assert stale["fresh"] is False and stale["computed_at"] == T1
        assert _read(readers.cached, "w") == stale  # trusted, and still schedules
        assert len(own.scheduled) == scheduled + 2

        assert own.recompute("w")  # this process's save
        whole = _read(readers.cached, "w")
        assert whole["fresh"] is True and whole["failures"] == 1
        assert whole["span_count"] == len(spans)

        extra = span(sc.SPAN_TRAIN_WINDOW, BASE + 450, BASE + 451, 1, 0, "w", span_id=999)
        own.ingest([extra])
        assert _read(readers.cached, "w")["fresh"] is False
        boom = True
        assert not own.recompute("w")  # this process marks it failed
        failed = _read(readers.cached, "w")
        assert failed["fresh"] is False and failed["error"].endswith("ValueError: boom")
        assert failed == _read(readers.plain, "w")

        other = readers.stores[1]  # another store: not seen within the hour
        boom = False
        Pipeline(other, clock=lambda: T2).recompute("w")
        assert _read(readers.plain, "w")["computed_at"] == T2
        assert _read(readers.cached, "w") == failed
    finally:
        readers.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_another_process_changes_are_read_once_the_recheck_interval_passed(
    database_url: str,
) -> None:
    """With a 0.2 s recheck, a change by another store, and one by ``ett recompute`` in a
    process of its own, is in the first read made more than 0.2 s after the change ended
    (fails if a trusted stamp is never checked again)."""
    recheck_s = 0.2
    other = Store(database_url)
    other.upgrade()
    readers = Readers(database_url, recheck_s=recheck_s)
    spans = worked_example("w", base=BASE)
    try:
        other.ingest([s for s in spans if s.attempt == 1])
        Pipeline(other, clock=lambda: T1).recompute("w")
        first = _read(readers.cached, "w")
        assert first["fresh"] is True and first["computed_at"] == T1
        assert _read(readers.cached, "w") == first  # kept, and its stamp just checked

        other.ingest([s for s in spans if s.attempt == 0])
        _after(time.monotonic(), recheck_s)
        stale = _read(readers.cached, "w")
        assert stale["fresh"] is False and stale["computed_at"] == T1

        Pipeline(other, clock=lambda: T2).recompute("w")
        _after(time.monotonic(), recheck_s)
        whole = _read(readers.cached, "w")
        assert whole["fresh"] is True and whole["computed_at"] == T2
        assert whole["failures"] == 1
        assert _read(readers.cached, "w") == whole

        extra = span(sc.SPAN_TRAIN_WINDOW, BASE + 450, BASE + 451, 1, 0, "w", span_id=999)
        other.ingest([extra])
        done = subprocess.run(
            [sys.executable, "-m", "ett_cli", "recompute", "--db", database_url],
            cwd=REPO,
            env={**os.environ, "ETT_DB_URL": database_url},
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr
        _after(time.monotonic(), recheck_s)
        by_process = _read(readers.cached, "w")
        assert by_process["fresh"] is True and by_process["span_count"] == len(spans) + 1
        assert by_process["computed_at"] > T2
        assert (
            _get(readers.plain, "/api/v1/jobs/w").content
            == _get(readers.cached, "/api/v1/jobs/w").content
        )
    finally:
        readers.close()
        other.close()
