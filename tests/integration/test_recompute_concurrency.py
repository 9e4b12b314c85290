"""Recompute under concurrency, on real SQLite and PostgreSQL: several collectors on one database,
per-job ownership, quiet dead jobs, and a job whose recompute fails.

Two ``Store`` objects on one database stand for two collector processes (each has its own
connections, its own in-process single-flight and, on PostgreSQL, its own advisory-lock session).
The figures are compared with the domain's, computed here from the same spans (held out from the
collector).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette

from ett_collector.api import create_app
from ett_collector.domain import SpanRecord, summarize
from ett_collector.read.metrics import CollectorMetrics
from ett_collector.schemas import job_json
from ett_collector.settings import Settings
from ett_collector.storage import Store, is_transient_db_error
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.spans import first_batch, phase, window
from tests.support.worked_example import worked_example

BASE = 1_790_000_000.0
NOW = BASE + 1000.0
WINDOW_S = 10.0


class GatedStore(Store):
    """A real store whose span loads of ``gated_job`` stop at ``gate`` after reading the spans:
    a recompute that is as slow as the test wants, with the spans it will use already read."""

    def __init__(self, url: str, gated_job: str) -> None:
        super().__init__(url)
        self.gated_job = gated_job
        self.gate = threading.Event()
        self.loaded = threading.Event()

    def load_spans(self, job_id: str) -> list[SpanRecord]:
        spans = super().load_spans(job_id)
        if job_id == self.gated_job:
            self.loaded.set()
            assert self.gate.wait(timeout=60), "the test never opened the gate"
        return spans


class PoisonStore(Store):
    """A real store whose span loads raise for the jobs in ``poisoned`` (a recompute that fails,
    injected through our own storage interface); counts the loads per job."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.poisoned: set[str] = set()
        self.loads: dict[str, int] = {}

    def load_spans(self, job_id: str) -> list[SpanRecord]:
        self.loads[job_id] = self.loads.get(job_id, 0) + 1
        if job_id in self.poisoned:
            raise ValueError(f"cannot read the spans of {job_id}")
        return super().load_spans(job_id)


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'collector.db'}"
    db: str = request.getfixturevalue("fresh_postgres_url")
    return db


@pytest.fixture
def stores(url: str) -> Iterator[list[Store]]:
    made: list[Store] = []
    yield made
    for s in made:
        if isinstance(s, GatedStore):
            s.gate.set()
        s.close()


def _open(stores: list[Store], store: Store) -> Store:
    store.upgrade()
    stores.append(store)
    return store


def _reference(spans: list[SpanRecord]) -> dict[str, Any]:
    """The figures the domain derives from ``spans`` at NOW, as stored (JSON round trip)."""
    out: dict[str, Any] = json.loads(json.dumps(job_json(summarize(spans, NOW, WINDOW_S))))
    return out


def _stored(store: Store, job_id: str) -> dict[str, Any] | None:
    job = store.get_job(job_id)
    if job is None:
        return None
    out = dict(job)
    out.pop("computed_at")
    return out


def _pipeline(store: Store, **kw: Any) -> Pipeline:
    return Pipeline(store, window_s=WINDOW_S, clock=lambda: NOW, settle_s=0, **kw)


def test_a_span_that_arrives_during_another_collectors_recompute_reaches_the_figures(
    url: str, stores: list[Store]
) -> None:
    spans = worked_example("race", base=BASE)
    early = [s for s in spans if s.attempt == 1]
    late = [s for s in spans if s.attempt == 0]  # the failed attempt, arriving late
    slow = _open(stores, GatedStore(url, gated_job="race"))
    a, b = _pipeline(slow), _pipeline(_open(stores, Store(url)))
    b.ingest(early)
    a_recompute = threading.Thread(target=a.recompute, args=("race",))
    a_recompute.start()
    assert slow.loaded.wait(timeout=60)  # collector A has read the early spans only

    b.ingest(late)  # the late spans reach collector B while A computes
    b.recompute("race")  # B's recompute (PostgreSQL: A owns the job, B leaves it to A)
    slow.gate.set()  # A saves what it computed from the early spans
    a_recompute.join(timeout=60)

    reference = _reference(spans)
    assert reference["failures"] == 1 and _reference(early)["failures"] == 0
    b_store = stores[1]
    # never figures without the late spans on a job marked clean (the lost update)
    assert b_store.is_dirty("race") or _stored(b_store, "race") == reference
    while b.recompute_dirty():  # the worker's next pass
        pass
    assert not b_store.is_dirty("race")
    assert _stored(b_store, "race") == reference
    assert _stored(slow, "race") == reference


def test_a_summary_of_an_older_sequence_is_never_saved_over_a_newer_one(
    url: str, stores: list[Store]
) -> None:
    store = _open(stores, Store(url))
    spans = worked_example("order", base=BASE)
    store.ingest([s for s in spans if s.attempt == 1])
    old_seq = store.dirty_seq("order")
    old = summarize(store.load_spans("order"), NOW, WINDOW_S)
    store.ingest([s for s in spans if s.attempt == 0])
    new_seq = store.dirty_seq("order")
    assert new_seq > old_seq

    assert store.save_summary(summarize(store.load_spans("order"), NOW, WINDOW_S), new_seq, NOW)
    assert not store.save_summary(old, old_seq, NOW + 1)  # the slower, older one loses
    assert _stored(store, "order") == _reference(spans) and not store.is_dirty("order")


def test_one_jobs_recompute_never_waits_for_another_jobs(url: str, stores: list[Store]) -> None:
    store = _open(stores, GatedStore(url, gated_job="big"))
    pipeline = _pipeline(store)
    pipeline.ingest(worked_example("big", base=BASE) + worked_example("small", base=BASE))
    big = threading.Thread(target=pipeline.recompute, args=("big",))
    big.start()
    assert store.loaded.wait(timeout=60)  # the big job's recompute is running (held)

    small = threading.Thread(target=pipeline.recompute, args=("small",))
    small.start()
    small.join(timeout=60)

    assert not small.is_alive() and big.is_alive()
    assert _stored(store, "small") == _reference(worked_example("small", base=BASE))
    assert store.is_dirty("big")
    store.gate.set()
    big.join(timeout=60)
    assert not store.is_dirty("big")


@pytest.mark.postgres
def test_a_job_recomputed_by_another_collector_is_left_to_it(
    fresh_postgres_url: str, stores: list[Store]
) -> None:
    owner = _open(stores, Store(fresh_postgres_url))
    other = _open(stores, Store(fresh_postgres_url))
    recomputed: list[str] = []
    pipeline = _pipeline(other, on_recompute=lambda job, _s: recomputed.append(job))
    pipeline.ingest(worked_example("owned", base=BASE))
    assert owner.locks.try_lock("owned")  # collector A recomputes the job now

    assert not other.locks.try_lock("owned")
    assert pipeline.recompute_dirty() == 0 and not pipeline.recompute("owned")
    assert pipeline.fresh("owned", 0.2) is False  # a read polls for A's figures, bounded
    assert recomputed == [] and other.is_dirty("owned")

    owner.locks.unlock("owned")
    assert pipeline.fresh("owned", 30) is True
    assert recomputed == ["owned"] and not other.is_dirty("owned")


def _running_job(job: str, until: float) -> list[SpanRecord]:
    out = [phase("rendezvous", BASE, BASE + 10, job=job), first_batch(BASE + 10, job=job)]
    t = BASE + 10
    while t < until:
        out.append(window(t, t + WINDOW_S, job=job))
        t += WINDOW_S
    return out


def test_a_presumed_dead_job_is_recomputed_once_then_only_when_a_span_arrives(
    url: str, stores: list[Store]
) -> None:
    store = _open(stores, Store(url))
    clock = [BASE + 100.0]
    recomputed: list[str] = []
    pipeline = Pipeline(
        store,
        window_s=WINDOW_S,
        clock=lambda: clock[0],
        on_recompute=lambda job, _s: recomputed.append(job),
    )
    pipeline.ingest(_running_job("d1", BASE + 100) + _running_job("d2", BASE + 100))
    pipeline.recompute_dirty()
    assert {r["state"] for r in store.list_jobs()} == {"running"}
    pipeline.refresh_live()  # running: recomputed as the clock moves
    assert sorted(recomputed) == ["d1", "d1", "d2", "d2"]

    clock[0] += 10 * WINDOW_S  # silent past three windows
    recomputed.clear()
    for _ in range(5):  # worker ticks
        pipeline.recompute_dirty()
        pipeline.refresh_live()
        clock[0] += WINDOW_S
    assert sorted(recomputed) == ["d1", "d2"]  # once each, when found dead
    assert {r["state"] for r in store.list_jobs()} == {"presumed_dead"}

    recomputed.clear()
    pipeline.ingest([window(BASE + 100, BASE + 110, job="d1")])  # a late span of d1
    pipeline.recompute_dirty()
    pipeline.refresh_live()
    assert recomputed == ["d1"]


class _Client:
    """Requests to the ASGI app in-process (no lifespan: no background worker)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app

    def get(self, path: str, **params: str) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ett") as c:
                return await c.get(path, params=params)

        return asyncio.run(go())


def test_a_job_whose_recompute_fails_is_marked_failed_and_breaks_no_list_read(
    url: str, stores: list[Store]
) -> None:
    store = _open(stores, PoisonStore(url))
    assert isinstance(store, PoisonStore)
    metrics = CollectorMetrics()
    pipeline = _pipeline(store, on_failure=metrics.observe_recompute_failure)
    client = _Client(create_app(Settings(db_url=url, read_wait_s=5), pipeline, metrics))
    store.poisoned.add("bad")
    spans = worked_example("bad", base=BASE)
    pipeline.ingest(worked_example("good", base=BASE) + spans[:-1])

    assert pipeline.recompute_dirty() == 1  # good; bad failed

    assert [j["job_id"] for j in client.get("/api/v1/jobs").json()] == ["good"]
    lost = client.get("/api/v1/lost-time", group_by="job")
    assert lost.status_code == 200 and [r["key"] for r in lost.json()] == ["good"]
    bad = client.get("/api/v1/jobs/bad")
    assert bad.status_code == 500
    assert "could not be computed: ValueError: cannot read the spans of bad" in bad.json()["error"]
    health = client.get("/healthz").json()
    assert health["failed_jobs"] == 1 and health["dirty_jobs"] == 0
    assert "ett_recompute_failures_total 1.0" in client.get("/metrics").text

    loads = store.loads["bad"]
    for _ in range(3):  # worker ticks: not retried without a new span
        pipeline.recompute_dirty()
        pipeline.refresh_live()
    assert store.loads["bad"] == loads

    store.poisoned.clear()
    pipeline.ingest(spans[-1:])  # a new span retries it
    assert pipeline.recompute_dirty() == 1
    ok = client.get("/api/v1/jobs/bad").json()
    assert "error" not in ok and ok["fresh"] is True
    assert store.recompute_failure("bad") is None
    assert _stored(store, "bad") == _reference(spans)

    store.poisoned.add("bad")  # fails again: the figures from before stay, with the reason
    pipeline.ingest([window(BASE + 2000, BASE + 2010, job="bad")])
    at_once = client.get("/api/v1/jobs/bad")  # never waits: the stored figures, not fresh
    assert at_once.status_code == 200 and at_once.json()["fresh"] is False
    pipeline.fresh("bad", 30)  # waits for the recompute that read scheduled (it fails)
    stale = client.get("/api/v1/jobs/bad")
    assert stale.status_code == 200
    assert stale.json()["fresh"] is False and "ValueError" in stale.json()["error"]
    assert stale.json()["failures"] == _reference(spans)["failures"]
    assert sorted(j["job_id"] for j in client.get("/api/v1/jobs").json()) == ["bad", "good"]
    assert "ett_recompute_failures_total 2.0" in client.get("/metrics").text


@pytest.mark.postgres
def test_recompute_ownership_survives_a_database_restart() -> None:
    from tests.conftest import throwaway_postgres

    with throwaway_postgres("ett-pg-locks-") as server:
        url = server.create_database("locks")
        store, other = Store(url), Store(url)
        try:
            store.upgrade()
            pipeline = _pipeline(store)
            pipeline.ingest(worked_example("before", base=BASE))
            assert pipeline.recompute("before")  # the lock connection is open now
            assert other.locks.try_lock("held")  # a lock another collector holds...

            server.restart()  # ...goes with its session; so does this process's connection

            with pytest.raises(Exception) as outage:  # the pool's connections died: one 503
                store.span_counts()
            assert is_transient_db_error(outage.value)
            pipeline.ingest(worked_example("after", base=BASE))  # the pool reconnects
            assert pipeline.recompute("after")  # a new lock connection, at once
            assert _stored(store, "after") == _reference(worked_example("after", base=BASE))
            assert store.locks.try_lock("held")
            store.locks.unlock("held")
        finally:
            other.close()
            store.close()


def test_ett_report_of_a_failed_job_says_why_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ett_cli import main

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    store = PoisonStore(url)
    store.upgrade()
    pipeline = _pipeline(store)
    pipeline.ingest(worked_example("never", base=BASE) + worked_example("once", base=BASE))
    pipeline.recompute("once")
    store.poisoned.update({"never", "once"})
    pipeline.ingest([window(BASE + 2000, BASE + 2010, job="once")])
    assert pipeline.recompute_dirty() == 0  # both fail
    store.close()

    assert main(["report", "never", "--db", url]) == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "ett report: the figures of job 'never' could not be computed: "
        "ValueError: cannot read the spans of never"
    ]
    assert main(["report", "once", "--json", "--db", url]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["fresh"] is False
    assert "could not be computed: ValueError" in err and "Traceback" not in err

    # `ett recompute` retries it (here with the spans readable again: a fixed definition)
    assert main(["recompute", "never", "--db", url]) == 0
    assert "recomputed 1 job(s)" in capsys.readouterr().out
    assert main(["report", "never", "--json", "--db", url]) == 0
    assert "error" not in json.loads(capsys.readouterr().out)
