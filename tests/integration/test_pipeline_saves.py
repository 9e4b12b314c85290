"""A pipeline's memory of recent saves is bounded (``Pipeline._saved``), on real SQLite: it
holds the jobs saved within half a live refresh, not every job ever saved, and forgets none
that the live refresh would still skip."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett_collector.storage import Store
from ett_collector.write import pipeline as pipeline_module
from ett_collector.write.pipeline import Pipeline
from tests.support.worked_example import worked_example

BASE = 1_790_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(f"sqlite:///{tmp_path / 'saves.db'}")
    s.upgrade()
    for i in range(40):
        s.ingest(worked_example(f"j{i}", base=BASE + 1000 * i))
    return s


def test_saves_too_old_to_skip_a_refresh_are_forgotten(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "SAVES_REMEMBERED_MIN", 8)
    pipeline = Pipeline(store, live_refresh_s=1e-6)  # every save is old a microsecond later
    held = []
    for i in range(40):
        assert pipeline.recompute(f"j{i}")
        held.append(len(pipeline._saved_at))
    assert max(held) <= 9  # the bound, then one new save (was one per job ever saved: 40)
    assert "j39" in pipeline._saved_at  # the newest is remembered


def test_saves_recent_enough_to_skip_a_refresh_are_all_kept(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pipeline_module, "SAVES_REMEMBERED_MIN", 8)
    pipeline = Pipeline(store, live_refresh_s=3600)
    for i in range(40):
        assert pipeline.recompute(f"j{i}")
    assert sorted(pipeline._saved_at) == sorted(f"j{i}" for i in range(40))
