"""A database outage is said in one line when it begins and one when it ends, as the background
loops say it (``collector/write/periodic.py``), not at every batch or scrape with a traceback.

PostgreSQL (a server of the test's own, so that stopping it disturbs no other test) is stopped
(``pg_ctl stop -m fast``, as an operator's probe did for 60 s under ingest) and started again. A
failure that is no outage (a bug: here a table gone) keeps its traceback, each time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from ett_collector.read.metrics_performance import ModelPerformanceMetrics
from ett_collector.read.performance_models import ModelPerformance
from ett_collector.read.query import Query
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import PostgresServer, throwaway_postgres
from tests.support.spans import window
from tests.support.waits import wait_until

BASE = time.time() - 3600.0
TRIES = 5
"""Batches (or scrapes) that meet the outage."""


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone."""
    with throwaway_postgres("ett-pg-quiet-") as server:
        yield server


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if words in r.getMessage()]


@pytest.mark.postgres
def test_compaction_says_an_outage_once_and_its_end_once(
    own_postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(own_postgres.create_database("ett"))
    store.upgrade()
    batch = {"j": [window(BASE + 10 * n, BASE + 10 * n + 10, job="j") for n in range(3)]}
    try:
        store.ingest(batch["j"])
        caplog.set_level(logging.WARNING, logger="ett_collector")
        own_postgres.halt()
        for _ in range(TRIES):  # batches whose commit passed just before the server went
            assert store.compactor.after_ingest(batch) == 0
        said = _said(caplog, "compaction of raw windows")
        assert len(said) == 1, [r.getMessage() for r in said]
        down = said[0].getMessage()
        assert down.startswith("compaction of raw windows: the database is unavailable ("), down
        assert down.endswith("); a later batch retries it") and "\n" not in down
        assert said[0].exc_info is None  # an outage is no bug: no traceback
        own_postgres.launch()
        wait_until(
            lambda: (
                store.compactor.after_ingest(batch) >= 0
                and _said(caplog, "compaction of raw windows: the database answers again")
            ),
            60,
            "the compaction's recovery line",
        )
        store.compactor.after_ingest(batch)
    finally:
        store.close()
    said = _said(caplog, "compaction of raw windows")
    assert [r.getMessage() for r in said[1:]] == [
        "compaction of raw windows: the database answers again"
    ], "said once, when the outage ended"


def test_a_compaction_that_fails_for_a_bug_keeps_its_traceback(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    batch = {"j": [window(BASE, BASE + 10, job="j")]}
    store.ingest(batch["j"])
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE window_compaction")
    caplog.set_level(logging.WARNING, logger="ett_collector")
    for _ in range(2):
        assert store.compactor.after_ingest(batch) == 0
    said = _said(caplog, "compaction of raw windows")
    assert [r.getMessage() for r in said] == [
        "compaction of raw windows failed; a later batch retries it"
    ] * 2
    assert all(r.exc_info is not None for r in said)


@pytest.mark.postgres
def test_the_per_model_gauges_say_an_outage_once_and_its_end_once(
    own_postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The probe's 60 s outage wrote "per-model performance gauges not computed" at each of 45
    scrapes."""
    store = Store(own_postgres.create_database("ett"))
    store.upgrade()
    gauges = ModelPerformanceMetrics(ModelPerformance(Query(Pipeline(store)), cache_s=0.0))
    words = "per-model performance gauges"
    try:
        assert list(gauges.collect())  # the families, from the database
        caplog.set_level(logging.WARNING, logger="ett_collector")
        own_postgres.halt()
        for _ in range(TRIES):  # scrapes: each answers without the gauges
            assert list(gauges.collect()) == []
        said = _said(caplog, words)
        assert len(said) == 1, [r.getMessage() for r in said]
        down = said[0].getMessage()
        assert down.startswith(f"{words} not computed until the database answers again: "), down
        assert said[0].exc_info is None and "\n" not in down
        own_postgres.launch()
        wait_until(lambda: list(gauges.collect()), 60, "the gauges again")
        assert list(gauges.collect())
    finally:
        store.close()
    assert [r.getMessage() for r in _said(caplog, words)[1:]] == [
        f"{words}: the database answers again"
    ], "said once, when the outage ended"
