"""A job's reads of several statements see one snapshot, on real SQLite and PostgreSQL.

Ingest commits a batch's raw windows, then compacts them in a transaction of its own
(``Compactor.after_ingest``): their raw rows go and their ``window_runs`` and ``window_series``
rows come. Under PostgreSQL's READ COMMITTED a read of the raw spans and then of the series
that such a compaction commits between saw the windows raw and folded, and the figures counted
them twice (an operator probe: ``loop_s`` 98,351 s instead of 49,482 for one of 450 simulated
jobs). Each test here commits the compaction, from another connection, between the read's
statements, and expects the figures of a read that saw no compaction at all.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from ett_collector.domain._performance import performance
from ett_collector.storage import Store, _kept_performance
from ett_collector.storage._retention import Retention
from ett_collector.storage._retention_policy import Policy
from ett_collector.storage._runs import WINDOW
from ett_collector.storage._series import job_points
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.performance_seed import perf_job

JOB = "race-job"
T0 = time.time() - 4 * 3600
CUTOFF = T0 + 600.0
FOLDED = 2 * 59
"""The compaction between the statements folds the windows that end before ``CUTOFF``: those of
the job's first 10 minutes but the last of each rank."""


@pytest.fixture(params=BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    """A database holding the job's 20 minutes (2 ranks, 120 windows each), every window raw."""
    if request.param == "sqlite":
        db = f"sqlite:///{tmp_path / 'c.db'}"
    else:
        db = request.getfixturevalue("fresh_postgres_url")
    raw = Store(db, raw_window_retention_s=None)  # ingest folds nothing
    raw.upgrade()
    Pipeline(raw).ingest(perf_job(JOB, "m", T0, windows=120, ranks=2, straggler=False))
    raw.close()
    return db


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    s = Store(url, loads_kept=0)
    try:
        yield s
    finally:
        s.close()


def _figures(store: Store) -> dict[str, Any]:
    spans, rows = store.load_performance(JOB)
    return performance(job_points(spans, rows, store.compactor.retention_s), spans)


def _compacting_first(
    store: Store, real: Callable[..., Any], folded: list[int]
) -> Callable[..., Any]:
    """``real`` (a read of the job's rows), that first commits the compaction of the job's
    first 10 minutes in a transaction of its own (once: the read of the next statement)."""

    def read(*args: Any) -> Any:
        out = real(*args)
        if not folded:
            folded.append(store.compactor.compact(JOB, CUTOFF))
        return out

    return read


def test_performance_read_across_a_compaction_counts_each_window_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded: list[int] = []
    fetch = _compacting_first(store, _kept_performance._fetch, folded)
    monkeypatch.setattr(_kept_performance, "_fetch", fetch)  # between spans and series
    racy = _figures(store)
    monkeypatch.undo()
    assert folded == [FOLDED]  # the compaction did commit between the two statements
    calm = _figures(store)
    assert calm["windows"] == 2 * 120
    for key in ("loop_s", "steps", "windows", "stepping_s"):
        assert racy[key] == calm[key], key


# the recompute's load folds its raw windows into the runs it reads after them, and a raw window
# inside a run is a replay there: this one held before the load read one snapshot, and must stay
def test_spans_read_across_a_compaction_hold_each_window_once(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    folded: list[int] = []
    load_runs = _compacting_first(store, store.compactor.load_runs, folded)
    monkeypatch.setattr(store.compactor, "load_runs", load_runs)  # after the spans' statement

    def windows() -> int:
        return sum(s.count for s in store.load_spans(JOB) if s.name == WINDOW)

    racy = windows()
    monkeypatch.undo()
    assert folded == [FOLDED]
    assert racy == windows() == 2 * 120


def test_retention_keeps_the_figures_of_one_snapshot(
    store: Store, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    Pipeline(store).recompute(JOB)  # not dirty: retention may mark it
    calm = _figures(store)
    folded: list[int] = []
    fetch = _compacting_first(store, _kept_performance._fetch, folded)
    monkeypatch.setattr(_kept_performance, "_fetch", fetch)
    policy = Policy(spans_s=0.0, runs_s=None, figures_s=None, alerts_s=None, quiet_s=0.0)
    retention = Retention(store.engine, policy, clock=lambda: time.time() + 5)
    assert retention._begin([JOB], threading.Event()) == {JOB}
    monkeypatch.undo()
    assert folded == [FOLDED]
    with store.engine.connect() as conn:
        kept = conn.exec_driver_sql("SELECT figures FROM job_performance").scalar_one()
    figures = json.loads(kept)
    for key in ("loop_s", "steps", "windows", "stepping_s"):
        assert figures[key] == calm[key], key
