"""``/metrics``' fleet series stay bounded whatever model and team names the emitters send:
past ``ETT_METRICS_MAX_PAIRS`` the pairs with the least wall time are summed into one
``__other__`` pair, the fleet's sums unchanged, and ``ett_fleet_pairs_folded`` says how many."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from fleet_builder import fleet, load
from prometheus_client.parser import text_string_to_metric_families

from ett_collector.alerts import FleetMetrics
from ett_collector.alerts._metrics import OTHER
from ett_collector.alerts.settings import AlertConfigError, AlertSettings
from ett_collector.read.metrics import CollectorMetrics
from ett_collector.schemas import NO_LABEL
from ett_collector.storage import Store

HOUR = 3600.0


def _scrape(metrics: CollectorMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = metrics.exposition().decode()
    return {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }


def _wall(families: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, float]:
    return {
        labels["model"]: value
        for labels, value in families["ett_fleet_wall_seconds"]
        if labels["window"] == "7d"
    }


def test_pairs_past_the_bound_are_summed_into_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.upgrade()
    now = time.time()
    models = ("dlrm", "ranker", "tiny")
    load(store, list(fleet(now - 14 * HOUR, 12, models=models, teams=("ads", "feed", "x"))))
    scrapes = []
    for max_pairs in (200, 2):
        metrics = CollectorMetrics()
        metrics.register_shared(FleetMetrics(store.engine, ttl_s=0, max_pairs=max_pairs))
        with caplog.at_level(logging.WARNING):
            scrapes += [_scrape(metrics), _scrape(metrics)]
    store.close()
    whole, bounded = scrapes[0], scrapes[2]
    walls = _wall(whole)
    assert len(walls) == 3 and whole["ett_fleet_pairs_folded"] == [({}, 0.0)]
    kept = max(walls, key=lambda m: (walls[m], m))
    folded = sum(v for m, v in walls.items() if m != kept)
    assert _wall(bounded) == pytest.approx({kept: walls[kept], OTHER: folded})
    assert bounded["ett_fleet_pairs_folded"] == [({}, 2.0)]
    said = [r for r in caplog.records if "ETT_METRICS_MAX_PAIRS" in r.getMessage()]
    assert len(said) == 1  # once per process, not once per scrape


@pytest.mark.parametrize("raw", ["0", "-1", "2.5", "many"])
def test_a_bad_bound_is_refused(raw: str) -> None:
    with pytest.raises(AlertConfigError, match="ETT_METRICS_MAX_PAIRS"):
        AlertSettings.from_env({"ETT_METRICS_MAX_PAIRS": raw})


@pytest.mark.parametrize("raw", ["nan", "inf"])
def test_a_cache_time_that_is_not_finite_is_refused(raw: str) -> None:
    with pytest.raises(AlertConfigError, match="ETT_METRICS_CACHE_S"):
        AlertSettings.from_env({"ETT_METRICS_CACHE_S": raw})


def test_a_job_without_a_model_is_named_as_everywhere_else(tmp_path: Path) -> None:
    """``/metrics`` named a job without a model ``unknown`` (Grafana, the dashboard and the
    commands say ``(none)``) and so merged it with a model really named ``unknown``."""
    store = Store(f"sqlite:///{tmp_path / 'fleet.db'}")
    store.upgrade()
    load(store, list(fleet(time.time() - 14 * HOUR, 12, models=("unknown", ""))))
    metrics = CollectorMetrics()
    metrics.register_shared(FleetMetrics(store.engine, ttl_s=0))
    families = _scrape(metrics)
    store.close()
    jobs = {
        labels["model"]: value
        for labels, value in families["ett_fleet_jobs"]
        if labels["window"] == "7d"
    }
    assert set(jobs) == {"unknown", NO_LABEL} and jobs["unknown"] == jobs[NO_LABEL] > 0
