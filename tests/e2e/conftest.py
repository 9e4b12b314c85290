"""End-to-end fixtures: a real `ett serve` process on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.collector_process import Collector, free_port, start_collector

__all__ = ["Collector", "free_port", "start_collector"]


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    """A real collector on SQLite in a temp ETT_HOME."""
    c = start_collector(tmp_path / "ett-home")
    yield c
    c.stop()


@pytest.fixture(scope="module")
def module_collector(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Collector]:
    """A real collector on SQLite that every test of a module shares (the trainer's runs each
    get a job id of their own)."""
    c = start_collector(tmp_path_factory.mktemp("collector") / "ett-home")
    yield c
    c.stop()
