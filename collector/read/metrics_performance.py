"""Per-model performance gauges for Prometheus (issue 26), read at scrape time.

Over the jobs that ended (or, live, last reported) in the last 24 hours, per model
(:class:`ett_collector.read.performance_models.ModelPerformance` computes them; its answers are
reused for 30 s and each job's facts once per recompute of its figures):

- ``ett_model_samples_per_second_per_rank``: the median over the jobs of each job's median
  rank throughput (samples per second of one rank);
- ``ett_model_slow_seconds``: the seconds the jobs' windows lost to mean steps slower than
  their ideal step;
- ``ett_model_slow_ratio``: those over the seconds the same windows spent stepping (0-1);
- ``ett_model_performance_jobs``: the jobs behind the figures;
- ``ett_model_straggler_score``: the highest straggler score of the jobs' attempts (a rank's
  compute per step over the other ranks' median; absent without two timed ranks);
- ``ett_model_rank_seconds``: the rank-seconds of the jobs' training windows.

The exported PromQL of the loop's alert kinds reads them (``collector/alerts/prometheus.py``).

The only label is ``model`` (``""`` for jobs without one): one series per model and family,
whatever the number of jobs. Past ``max_models`` models (``ETT_METRICS_MAX_PAIRS``, 200) the
ones with the most jobs keep their series and the others are left out (a median cannot be
summed); ``ett_model_performance_models_left_out`` says how many.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..storage import db_reason, is_transient_db_error
from .performance_models import ModelPerformance

WINDOW = "24h"
"""The window of the gauges."""

log = logging.getLogger(__name__)


def _ratio(row: dict[str, Any]) -> float | None:
    return None if row["slow_pct"] is None else row["slow_pct"] / 100.0


GAUGES: tuple[tuple[str, Callable[[dict[str, Any]], float | None], str], ...] = (
    (
        "ett_model_samples_per_second_per_rank",
        lambda row: row["samples_per_s_per_rank"],
        "Median over the last 24 h's jobs of a job's median rank throughput (samples/s).",
    ),
    (
        "ett_model_slow_seconds",
        lambda row: row["slow_s"],
        "Seconds the last 24 h's jobs' windows lost to mean steps slower than their ideal step "
        "time.",
    ),
    (
        "ett_model_slow_ratio",
        _ratio,
        "Slow seconds over the seconds the same windows spent stepping, of the last 24 h's "
        "jobs (0-1).",
    ),
    (
        "ett_model_performance_jobs",
        lambda row: row["jobs"],
        "Jobs with training windows in the last 24 h behind the ett_model_* figures.",
    ),
    (
        "ett_model_straggler_score",
        lambda row: row["straggler_score"],
        "Highest straggler score (a rank's compute per step over the other ranks' median) "
        "of the last 24 h's jobs' attempts.",
    ),
    (
        "ett_model_rank_seconds",
        lambda row: row["rank_s"],
        "Rank-seconds of the last 24 h's jobs' training windows.",
    ),
)
"""``(name, its figure of a model's row, help)`` of each family."""


class ModelPerformanceMetrics(Collector):
    """The ``ett_model_*`` families (see the module docstring)."""

    def __init__(self, models: ModelPerformance, max_models: int = 200) -> None:
        self.models = models
        self.max_models = max_models
        self._outage = False
        """Whether the last scrape found the database away (said once, when it began)."""
        self._outage_lock = threading.Lock()

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # no read at registration: the families are built at scrape time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            rows = self.models.models(since=WINDOW)["models"]
        except Exception as exc:  # a scrape never fails for these gauges (the database may be away)
            self._failed(exc)
            return
        self._outage_over()
        families = {n: GaugeMetricFamily(n, text, labels=["model"]) for n, _, text in GAUGES}
        ranked = sorted(rows, key=lambda row: (-(row["jobs"] or 0), row["model"] or ""))
        left_out = GaugeMetricFamily(
            "ett_model_performance_models_left_out",
            "Models of the last 24 h past ETT_METRICS_MAX_PAIRS (the ones with the fewest jobs) "
            "whose ett_model_* series are left out (0: none).",
            value=max(0, len(rows) - self.max_models),
        )
        for row in ranked[: self.max_models]:
            label = [row["model"] or ""]
            for name, value, _ in GAUGES:
                figure = value(row)
                if figure is not None:  # a figure a model's jobs do not have: no sample
                    families[name].add_metric(label, figure)
        yield from families.values()
        yield left_out

    def _failed(self, exc: Exception) -> None:
        """Log a scrape without the gauges: a bug with its traceback, each time; a database
        outage in one line when it begins (every scrape fails alike meanwhile, and
        ``ett_database_up`` and the readiness check say it), and one when it is over."""
        if not is_transient_db_error(exc):
            log.warning("per-model performance gauges not computed", exc_info=True)
            return
        with self._outage_lock:
            was_out, self._outage = self._outage, True
        if not was_out:
            log.warning(
                "per-model performance gauges not computed until the database answers again: %s",
                db_reason(exc),
            )

    def _outage_over(self) -> None:
        with self._outage_lock:
            was_out, self._outage = self._outage, False
        if was_out:
            log.warning("per-model performance gauges: the database answers again")


__all__ = ["WINDOW", "ModelPerformanceMetrics"]
