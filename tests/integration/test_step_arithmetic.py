"""Compaction does not depend on the emitter's step arithmetic (issue 27).

A fleet whose emitter writes the last step exclusive (a window's ``ett.step.first`` equals the
previous one's ``ett.step.last``) folds like the library's (next first = last + 1): as many runs,
the same figures, nothing counted as unfolded. A counter that goes back within an attempt breaks
its run, and that window is counted on ``/metrics`` and ``/healthz`` (real SQLite, the real app).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.spans import attempt_end, first_batch, phase, window

T0 = 1_700_000_000.0
JOBS, RANKS, WINDOWS, STEPS = 4, 4, 150, 50  # 10 s windows: 25 min of history per rank

Steps = Callable[[int, int], tuple[int, int]]
"""``(previous last, steps in the window) -> (first, last)`` of the next window."""


def library(prev_last: int, n: int) -> tuple[int, int]:
    return prev_last + 1, prev_last + n


def exclusive(prev_last: int, n: int) -> tuple[int, int]:
    return prev_last, prev_last + n


def fleet(steps: Steps, back_at: int | None = None) -> list[SpanRecord]:
    """``JOBS`` jobs of ``RANKS`` ranks, windows in arrival order (time, then job and rank);
    with ``back_at``, rank 2 of the first job sets its counter back 7 steps at that window."""
    per_tick: list[list[SpanRecord]] = [[] for _ in range(WINDOWS + 2)]
    for j in range(JOBS):
        job, t0 = f"job-{j}", T0 + 3 * j
        for rank in range(RANKS):
            kw = {"job": job, "rank": rank, sc.MODEL: "m", sc.TEAM: "t", sc.WORLD_SIZE: RANKS}
            per_tick[0] += [phase("pg_init", t0 - 20, t0 - 5, **kw), first_batch(t0, **kw)]
            last = -1
            for i in range(WINDOWS):
                first, last = steps(last, STEPS)
                if back_at == i and j == 0 and rank == 2:
                    first, last = first - 7, last - 7
                attrs = {sc.STEP_FIRST: first, sc.STEP_LAST: last, sc.SAMPLES: 64 * STEPS}
                per_tick[i + 1].append(window(t0 + 10 * i, t0 + 10 * (i + 1), **kw, **attrs))
            end = t0 + 10 * WINDOWS
            per_tick[-1].append(attempt_end(t0 - 20, end + 1, "completed", **kw))
    return [s for tick in per_tick for s in tick]


def ingest(url: str, spans: list[SpanRecord]) -> tuple[Store, Pipeline]:
    store = Store(url)  # the default raw window retention: compaction on
    store.upgrade()
    pipeline = Pipeline(store)
    for i in range(0, len(spans), 512):
        pipeline.ingest(spans[i : i + 512])
    return store, pipeline


def figures(store: Store, job: str) -> dict[str, object]:
    spans = store.load_spans(job)
    return dict(job_json(summarize(spans, max(s.end for s in spans) + 5)))


def n_runs(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.exec_driver_sql("SELECT count(*) FROM window_runs").scalar_one())


def test_an_exclusive_last_step_folds_like_the_library(tmp_path: Path) -> None:
    lib, _ = ingest(f"sqlite:///{tmp_path / 'lib.db'}", fleet(library))
    exc, _ = ingest(f"sqlite:///{tmp_path / 'exc.db'}", fleet(exclusive))
    try:
        assert n_runs(lib) == JOBS * RANKS  # one run per rank: every compaction extended it
        assert n_runs(exc) == n_runs(lib)
        for j in range(JOBS):
            assert figures(exc, f"job-{j}") == figures(lib, f"job-{j}")
        assert exc.span_counts()["spans"] == lib.span_counts()["spans"]
        assert exc.compactor.unfolded == {} and lib.compactor.unfolded == {}
    finally:
        lib.close()
        exc.close()


def _get(app: object, paths: list[str]) -> list[httpx.Response]:
    async def read() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [await client.get(p) for p in paths]

    return asyncio.run(read())


def test_a_step_going_back_breaks_the_run_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"sqlite:///{tmp_path / 'back.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    app = create_app(Settings(db_url=url), pipeline)
    try:
        with caplog.at_level("WARNING", logger="ett_collector"):
            spans = fleet(exclusive, back_at=40)
            for i in range(0, len(spans), 512):
                pipeline.ingest(spans[i : i + 512])
        assert n_runs(store) == JOBS * RANKS + 1  # rank 2 of job-0: two runs
        assert store.compactor.unfolded == {"steps_back": 1}
        logged = [r for r in caplog.records if "cannot be folded" in r.getMessage()]
        assert len(logged) == 1 and "job-0" in logged[0].getMessage()
        health, metrics = _get(app, ["/healthz", "/metrics"])
        assert health.json()["unfolded_windows"] == 1
        assert 'ett_windows_unfolded_total{reason="steps_back"} 1.0' in metrics.text
    finally:
        store.close()
