"""A seeded fuzz of ``POST /v1/traces`` (:mod:`tests.support.otlp_fuzz`): mutated protobuf and
JSON bodies never get a 500, mixed requests keep their good spans, and the collector keeps
serving, on SQLite and PostgreSQL. 400 bodies here; ``tests/performance/bench_otlp_fuzz.py``
runs 100,000."""

from __future__ import annotations

import asyncio

import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.conftest import BACKENDS
from tests.support.otlp_fuzz import fuzz

BODIES = 300


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_mutated_bodies_never_get_a_500(database_url: str) -> None:
    store = Store(database_url)
    store.upgrade()
    app = create_app(Settings(db_url=database_url, max_body_bytes=1 << 20), Pipeline(store))
    try:
        run = asyncio.run(fuzz(app, store, BODIES))
    finally:
        store.close()
    assert run.unexpected == [], f"unexpected answers (body, status, text): {run.unexpected[:10]}"
    assert run.mixed_lost == [], f"good spans of mixed requests lost: {run.mixed_lost[:10]}"
    assert run.last_good == 200  # still serving after the fuzz
    assert 0 < run.accepted < BODIES  # the mutations reached both outcomes
    assert run.mixed == BODIES // 4
    print(f"\n{BODIES} bodies: {run.codes}; {run.mixed} mixed requests kept their good spans")
