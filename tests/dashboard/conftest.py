"""Dashboard fixtures: one real `ett serve` seeded with a small fleet, shared by a module."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard import fleet_seed
from tests.support.collector_process import WAIT_S, Collector, start_collector
from tests.support.waits import wait_until

SIMULATED_JOBS = 8


def wait_computed(c: Collector, job_ids: list[str], timeout_s: float = WAIT_S) -> None:
    """Wait until every job is listed by the API (its figures computed)."""
    wait_until(
        lambda: set(job_ids) <= {r["job_id"] for r in c.get("/api/v1/jobs").json()},
        timeout_s,
        f"the figures of {job_ids}",
        interval=0.2,
    )


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Collector, dict[str, Any]]]:
    """A real collector on a database filled by the fleet simulator (``ett simulate``'s
    ``simulate_into_db``), plus the hand-made seed jobs sent over OTLP: (collector, role → id)."""
    from ett_simulator.simulation import simulate_into_db

    home = tmp_path_factory.mktemp("dash") / "ett-home"
    home.mkdir(parents=True)
    db_url = f"sqlite:///{home / 'collector.db'}"
    simulate_into_db(db_url, jobs=SIMULATED_JOBS, days=1, seed=14)
    c = start_collector(home, db_url=db_url)
    try:
        ids = fleet_seed.seed(c.url)
        wait_computed(c, list(ids.values()))
        yield c, ids
    finally:
        c.stop()
