"""The recompute worker's loop (``Pipeline._tick``) on real SQLite: what it recomputes, in what
order. Each test runs one tick by hand (no thread, no timing): the clock is fixed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ett_collector.domain import SpanRecord
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.spans import first_batch, phase, window

BASE = 1_790_000_000.0
WINDOW_S = 10.0
NOW = BASE + 100.0


def _running(job: str) -> list[SpanRecord]:
    out = [phase("rendezvous", BASE, BASE + 10, job=job), first_batch(BASE + 10, job=job)]
    out += [window(t, t + WINDOW_S, job=job) for t in range(int(BASE) + 10, int(NOW) - 5, 10)]
    return out


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(f"sqlite:///{tmp_path / 'collector.db'}")
    s.upgrade()
    yield s
    s.close()


def _pipeline(store: Store, live_refresh_s: float, order: list[str]) -> Pipeline:
    return Pipeline(
        store,
        window_s=WINDOW_S,
        live_refresh_s=live_refresh_s,
        clock=lambda: NOW,
        settle_s=0,
        on_recompute=lambda job, _s: order.append(job),
    )


def test_the_live_refresh_skips_jobs_the_dirty_loop_just_saved(store: Store) -> None:
    order: list[str] = []
    pipeline = _pipeline(store, 60.0, order)
    pipeline.ingest(_running("a") + _running("b"))

    pipeline._tick()  # dirty loop: a and b; the live refresh (first, due) finds them just saved
    assert sorted(order) == ["a", "b"]
    assert {j["state"] for j in store.list_jobs()} == {"running"}

    order.clear()
    pipeline.ingest([window(NOW - 5, NOW + 5, job="a")])
    pipeline._tick()  # the refresh is not due again: only the dirty job
    assert order == ["a"]


def test_a_job_with_new_spans_goes_before_the_next_clock_only_refresh(store: Store) -> None:
    order: list[str] = []
    pipeline = _pipeline(store, 0.0, order)  # every tick refreshes every running job
    pipeline.ingest(_running("x") + _running("z"))
    pipeline.recompute_dirty()
    order.clear()

    def arrive(job: str, _s: float) -> None:
        order.append(job)
        if job == "x" and "y" not in order:
            pipeline.ingest(_running("y"))  # spans of y arrive while x is refreshed

    pipeline._on_recompute = arrive
    pipeline._tick()
    assert order == ["x", "y", "z"]
