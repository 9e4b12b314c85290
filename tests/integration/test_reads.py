"""The freshness contract of the read side, on real SQLite and PostgreSQL.

Reads never wait on a recompute: list reads answer the stored figures and leave dirty jobs dirty;
a read of one dirty job answers its stored figures at once with ``fresh: false`` and schedules its
recompute (single-flight); only a job with spans but no figures yet is waited for (bounded by
``read_wait_s``); every job carries its ``computed_at``. Plus the HTTP API's answers for these
cases (in-process ASGI).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from google.rpc.status_pb2 import Status
from starlette.applications import Starlette

from ett_collector import otlp
from ett_collector.api import create_app
from ett_collector.read.query import NotReady, Query, QueryError
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import READ_FLIGHTS, Pipeline
from tests.support.figures import WORKED_EXAMPLE
from tests.support.replay import encode_request
from tests.support.waits import wait_until
from tests.support.worked_example import worked_example

BASE = 1_790_000_000.0
NOW = BASE + 1000.0


class GatedStore(Store):
    """A real store whose span loads wait for ``gate``: a recompute that takes as long as the
    test wants. Counts the ``is_dirty`` calls made by threads named ``reader-*``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.gate = threading.Event()
        self.loading = threading.Event()
        """Set once a span load has reached the gate."""
        self.hold_s = 60.0
        self.loads: list[str] = []
        """The jobs whose spans were loaded (or are held at the gate), in order."""
        self.reader_checks = 0
        self._count_lock = threading.Lock()

    def load_spans(self, job_id: str):  # type: ignore[no-untyped-def]
        with self._count_lock:
            self.loads.append(job_id)
        self.loading.set()
        assert self.gate.wait(timeout=self.hold_s), "the test never opened the gate"
        return super().load_spans(job_id)

    def is_dirty(self, job_id: str) -> bool:
        if threading.current_thread().name.startswith("reader-"):
            with self._count_lock:
                self.reader_checks += 1
        return super().is_dirty(job_id)


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[GatedStore]:
    s = GatedStore(f"sqlite:///{tmp_path / 'gated.db'}")
    s.upgrade()
    yield s
    s.gate.set()
    s.close()


def _counting_pipeline(store: Store) -> tuple[Pipeline, list[str]]:
    done: list[str] = []
    pipeline = Pipeline(store, clock=lambda: NOW, on_recompute=lambda job, _s: done.append(job))
    return pipeline, done


def test_list_reads_answer_stored_figures_and_leave_dirty_jobs_dirty(store: Store) -> None:
    pipeline, recomputed = _counting_pipeline(store)
    query = Query(pipeline, clock=lambda: NOW)
    pipeline.ingest(worked_example("listed", base=BASE))

    assert query.jobs() == []
    assert query.lost_time("component") == []
    assert store.is_dirty("listed") and recomputed == []
    assert query.pending_jobs() == 1

    pipeline.recompute_dirty()  # the background worker's part
    [row] = query.jobs()
    assert row["job_id"] == "listed" and row["ett_pct"] == pytest.approx(60)
    assert row["computed_at"] == NOW
    assert sum(r["lost_s"] for r in query.lost_time("component")) == pytest.approx(200)
    assert query.pending_jobs() == 0


def test_lost_time_ends_at_now_when_no_until_is_given(store: Store) -> None:
    """The spec's window is clipped to ``[since, until]``, and ``until`` defaults to now: stored
    segments past the reader's clock (a sender's clock ahead) are not summed."""
    pipeline, _ = _counting_pipeline(store)
    pipeline.ingest(worked_example("ahead", base=BASE))
    pipeline.recompute_dirty()
    mid = BASE + 250.0
    query = Query(pipeline, clock=lambda: mid)

    unbounded = sum(r["lost_s"] for r in Query(pipeline, clock=lambda: NOW).lost_time("job"))
    clipped = query.lost_time("job")
    assert clipped == query.lost_time("job", until=str(mid))
    assert 0 < sum(r["lost_s"] for r in clipped) < unbounded
    with pytest.raises(QueryError, match="since is after now"):
        query.lost_time("job", since=str(mid + 60))


def test_a_read_of_a_job_without_figures_waits_for_its_first_recompute(store: Store) -> None:
    pipeline, recomputed = _counting_pipeline(store)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=30)
    pipeline.ingest(worked_example("one", base=BASE))

    job = query.job("one")

    for key, value in WORKED_EXAMPLE.items():
        assert job[key] == pytest.approx(value), key  # type: ignore[literal-required]
    assert job["computed_at"] == NOW and job["fresh"] is True
    assert recomputed == ["one"] and not store.is_dirty("one")
    assert query.segments("one")[0]["kind"] == "startup"
    assert recomputed == ["one"]  # clean now: the second read recomputes nothing


def test_a_list_read_does_not_wait_for_a_recompute_in_flight(gated: GatedStore) -> None:
    pipeline, recomputed = _counting_pipeline(gated)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=60)
    pipeline.ingest(worked_example("slow", base=BASE))
    reader = threading.Thread(target=query.job, args=("slow",), name="reader-0")
    reader.start()  # its recompute is stuck at the gate, holding the recompute lock

    assert query.jobs() == [] and query.lost_time("job") == []  # answered meanwhile

    gated.gate.set()
    reader.join(timeout=60)
    assert recomputed == ["slow"]


def test_past_the_bound_a_read_answers_the_stored_figures_marked_not_fresh(
    gated: GatedStore,
) -> None:
    pipeline, _ = _counting_pipeline(gated)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=0.05)
    spans = worked_example("late", base=BASE)
    pipeline.ingest([s for s in spans if s.attempt == 1])

    with pytest.raises(NotReady, match="not computed yet"):
        query.job("late")  # never computed and the bound passed: nothing to answer

    gated.gate.set()
    assert pipeline.fresh("late", 60)
    gated.gate.clear()
    pipeline.ingest([s for s in spans if s.attempt == 0])  # late spans of attempt 0

    stale = query.job("late")
    assert stale["fresh"] is False and stale["failures"] == 0  # attempt 0 not in yet
    assert stale["computed_at"] == NOW

    gated.gate.set()
    assert pipeline.fresh("late", 60)
    assert query.job("late")["failures"] == 1


def test_a_read_of_a_dirty_job_answers_its_stored_figures_while_its_recompute_is_held(
    gated: GatedStore,
) -> None:
    """No wait by construction: the job's recompute is held at the gate, which only this thread
    opens, after the reads returned; a read that waited for it would hang (the read bound and the
    hold are an hour) and the suite's per-test timeout would fail the test."""
    pipeline, recomputed = _counting_pipeline(gated)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=3600)
    # the app reads through the test's pipeline: with a pipeline of its own, the HTTP read's
    # recompute and the direct read's would race for the job's lock, and which one recomputed
    # (the one counted or the other) would be chance
    client = _client(gated, read_wait_s=3600, pipeline=pipeline)
    spans = worked_example("held", base=BASE)
    pipeline.ingest([s for s in spans if s.attempt == 1])
    gated.gate.set()
    assert pipeline.recompute("held")  # stored figures: attempt 1 only
    gated.gate.clear()
    gated.loading.clear()
    gated.hold_s = 3600
    pipeline.ingest([s for s in spans if s.attempt == 0])  # newer spans: the job is dirty

    over_http = client.get("/api/v1/jobs/held")
    stale = query.job("held")
    timeline = query.segments("held")

    assert over_http.status_code == 200 and over_http.json()["fresh"] is False
    assert stale["fresh"] is False and stale["failures"] == 0  # attempt 0 not in yet
    assert stale["computed_at"] == NOW and stale["ett_pct"] == over_http.json()["ett_pct"]
    assert {s["attempt"] for s in timeline} == {1}
    assert gated.loading.wait(timeout=60)  # the reads scheduled the recompute; it is held
    assert recomputed == ["held"] and gated.is_dirty("held")

    gated.gate.set()
    assert pipeline.fresh("held", 60)  # the scheduled recompute lands
    job = query.job("held")
    assert job["fresh"] is True and job["failures"] == 1
    assert job["ett_pct"] == pytest.approx(WORKED_EXAMPLE["ett_pct"])
    assert client.get("/api/v1/jobs/held").json()["fresh"] is True
    # the flight reports its recompute just after it saved
    wait_until(lambda: len(recomputed) >= 2, 60, "the read flight's recompute", interval=0.01)
    assert recomputed == ["held", "held"]  # three reads of the dirty job, one recompute


def test_reads_start_at_most_read_flights_recomputes_and_leave_the_rest_to_the_worker(
    gated: GatedStore,
) -> None:
    """Reads of many dirty jobs answer at once; they start recomputes for the first
    ``READ_FLIGHTS`` jobs only (held at the gate here, so their slots stay taken); the worker
    brings the rest up to date."""
    pipeline, recomputed = _counting_pipeline(gated)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=3600)
    ids = [f"many-{i}" for i in range(READ_FLIGHTS + 3)]
    for job_id in ids:
        pipeline.ingest([s for s in worked_example(job_id, base=BASE) if s.attempt == 1])
    gated.gate.set()
    assert pipeline.recompute_dirty() == len(ids)
    gated.gate.clear()
    gated.hold_s = 3600
    gated.loads.clear()
    for job_id in ids:
        pipeline.ingest([s for s in worked_example(job_id, base=BASE) if s.attempt == 0])

    answers = [query.job(job_id) for job_id in ids]  # a read that waited would hang here

    assert [a["fresh"] for a in answers] == [False] * len(ids)
    wait_until(lambda: len(gated.loads) >= READ_FLIGHTS, 60, "the started recomputes at the gate")
    assert sorted(gated.loads) == ids[:READ_FLIGHTS]  # the others were left to the worker
    gated.gate.set()
    for job_id in ids[:READ_FLIGHTS]:
        assert pipeline.fresh(job_id, 60)
    assert pipeline.recompute_dirty() == len(ids) - READ_FLIGHTS  # the worker's part
    assert all(query.job(job_id)["fresh"] for job_id in ids)
    assert sorted(recomputed[len(ids) :]) == sorted(ids)  # one recompute each


def test_concurrent_reads_of_one_dirty_job_cause_one_recompute(gated: GatedStore) -> None:
    pipeline, recomputed = _counting_pipeline(gated)
    query = Query(pipeline, clock=lambda: NOW, read_wait_s=60)
    pipeline.ingest(worked_example("hot", base=BASE))
    answers: list[float] = []
    readers = [
        threading.Thread(
            target=lambda: answers.append(query.job("hot")["ett_pct"]), name=f"reader-{i}"
        )
        for i in range(6)
    ]
    for r in readers:
        r.start()
    wait_until(lambda: gated.reader_checks >= len(readers), 60, "every reader to see it dirty")
    gated.gate.set()
    for r in readers:
        r.join(timeout=60)

    assert answers == [pytest.approx(60)] * len(readers)
    assert recomputed == ["hot"]


# --- the HTTP API over the same contract ------------------------------------------------------


class _Client:
    """Requests to the ASGI app in-process (no lifespan: no background worker)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app

    def request(self, method: str, path: str, **kw: object) -> httpx.Response:
        async def go() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://ett") as c:
                return await c.request(method, path, **kw)  # type: ignore[arg-type]

        return asyncio.run(go())

    def get(self, path: str) -> httpx.Response:
        return self.request("GET", path)

    def post(self, path: str, **kw: object) -> httpx.Response:
        return self.request("POST", path, **kw)


def _client(store: Store, read_wait_s: float = 30, pipeline: Pipeline | None = None) -> _Client:
    settings = Settings(db_url="sqlite:///unused.db", read_wait_s=read_wait_s)
    return _Client(create_app(settings, pipeline or Pipeline(store, clock=lambda: NOW)))


def test_api_job_json_carries_computed_at(store: Store) -> None:
    client = _client(store)
    Pipeline(store).ingest(worked_example("api", base=BASE))

    assert client.get("/api/v1/jobs").json() == []  # a list read computes nothing
    job = client.get("/api/v1/jobs/api").json()
    assert job["computed_at"] == NOW and job["fresh"] is True
    assert job["ett_pct"] == pytest.approx(60)
    assert client.get("/api/v1/jobs").json()[0]["computed_at"] == NOW


class HeldReads(Store):
    """A real store whose job reads (``job_state``) wait for ``release``; counts them."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.entered = 0
        self.inside = threading.Event()
        self.release = threading.Event()

    def job_state(self, job_id: str):  # type: ignore[no-untyped-def]
        self.entered += 1
        self.inside.set()
        assert self.release.wait(timeout=3600), "the test never released the reads"
        return super().job_state(job_id)


def test_ingest_is_answered_while_every_read_thread_is_held(tmp_path: Path) -> None:
    """With one read thread, held: a POST is stored and answered (ingest has threads of its
    own; were it queued behind reads it would hang and the per-test timeout would fail this),
    and a second read waits for the read thread instead of taking another."""
    store = HeldReads(f"sqlite:///{tmp_path / 'held.db'}")
    store.upgrade()
    settings = Settings(db_url="sqlite:///unused.db", read_threads=1, read_wait_s=60)
    app = create_app(settings, Pipeline(store, clock=lambda: NOW))
    body = encode_request(worked_example("in", base=BASE))

    async def go() -> tuple[httpx.Response, int, list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ett") as c:
            reads = [asyncio.create_task(c.get("/api/v1/jobs/in"))]
            while not store.inside.is_set():
                await asyncio.sleep(0.01)
            reads.append(asyncio.create_task(c.get("/api/v1/jobs/in")))
            posted = await c.post(
                "/v1/traces", content=body, headers={"Content-Type": "application/x-protobuf"}
            )
            entered = store.entered  # the second read has not taken a thread
            store.release.set()
            return posted, entered, list(await asyncio.gather(*reads))

    try:
        posted, entered, answers = asyncio.run(go())
    finally:
        store.release.set()
        store.close()
    assert posted.status_code == 200 and entered == 1
    assert [r.status_code for r in answers] == [200, 200]
    assert answers[0].json()["ett_pct"] == pytest.approx(WORKED_EXAMPLE["ett_pct"])


def test_api_answers_503_with_retry_after_while_a_new_job_is_computed(gated: GatedStore) -> None:
    client = _client(gated, read_wait_s=0.05)
    Pipeline(gated).ingest(worked_example("new", base=BASE))

    r = client.get("/api/v1/jobs/new")

    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert "not computed yet" in r.json()["error"]


@pytest.mark.parametrize("as_json", [False, True])
def test_ingest_errors_carry_the_one_grpc_status_table(store: Store, as_json: bool) -> None:
    client = _client(store)
    ctype = "application/json" if as_json else "application/x-protobuf"

    r = client.post(
        "/v1/traces", content=b"{}", headers={"Content-Type": ctype, "Content-Encoding": "br"}
    )

    assert r.status_code == 415
    code = json.loads(r.content)["code"] if as_json else Status.FromString(r.content).code
    assert code == otlp.grpc_code(415) == 12  # UNIMPLEMENTED, as otlp/_encode.py maps it


@pytest.mark.parametrize("limit", ["99999999999999999999", "1000001", "0"])
def test_a_list_limit_out_of_range_is_a_400(store: Store, limit: str) -> None:
    """A limit past SQL's integer answered 500 with a traceback in the log
    (OverflowError: Python int too large to convert to SQLite INTEGER)."""
    from ett_collector.alerts import AlertStore
    from ett_collector.alerts._routes import alerts_answer

    client = _client(store)
    answer = client.get(f"/api/v1/jobs?limit={limit}")
    assert answer.status_code == 400, answer.text
    assert "between 1 and 1,000,000" in answer.json()["error"]
    assert client.get("/api/v1/jobs?limit=1000000").status_code == 200
    status, body = alerts_answer(AlertStore(store.engine), None, limit)  # GET /api/v1/alerts
    assert status == 400 and "between 1 and 1,000,000" in body["error"]
    assert alerts_answer(AlertStore(store.engine), None, "1000000")[0] == 200
