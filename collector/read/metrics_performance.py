"""Per-model performance gauges for Prometheus (issue 26), read at scrape time.

Over the jobs that ended (or, live, last reported) in the last 24 hours, per model
(:class:`ett_collector.read.performance_models.ModelPerformance` computes them; its answers are
reused for 30 s and each job's facts once per recompute of its figures):

- ``ett_model_samples_per_second_per_rank``: the median over the jobs of each job's median
  rank throughput (samples per second of one rank);
- ``ett_model_slow_seconds``: the seconds the jobs lost to steps slower than their ideal step;
- ``ett_model_slow_ratio``: those over the jobs' productive seconds (0-1);
- ``ett_model_performance_jobs``: the jobs behind the figures;
- ``ett_model_straggler_score``: the highest straggler score of the jobs' attempts (a rank's
  compute per step over the other ranks' median; absent without two timed ranks);
- ``ett_model_rank_seconds``: the rank-seconds of the jobs' training windows.

The exported PromQL of the loop's alert kinds reads them (``collector/alerts/prometheus.py``).

The only label is ``model`` (``""`` for jobs without one): one series per model and family,
whatever the number of jobs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from .performance_models import ModelPerformance

WINDOW = "24h"
"""The window of the gauges."""

log = logging.getLogger(__name__)


class ModelPerformanceMetrics(Collector):
    """The ``ett_model_*`` families (see the module docstring)."""

    def __init__(self, models: ModelPerformance) -> None:
        self.models = models

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # no read at registration: the families are built at scrape time

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            rows = self.models.models(since=WINDOW)["models"]
        except Exception:  # a scrape never fails for these gauges (the database may be away)
            log.warning("per-model performance gauges not computed", exc_info=True)
            return
        rate = GaugeMetricFamily(
            "ett_model_samples_per_second_per_rank",
            "Median over the last 24 h's jobs of a job's median rank throughput (samples/s).",
            labels=["model"],
        )
        slow = GaugeMetricFamily(
            "ett_model_slow_seconds",
            "Seconds the last 24 h's jobs lost to steps slower than their ideal step time.",
            labels=["model"],
        )
        ratio = GaugeMetricFamily(
            "ett_model_slow_ratio",
            "Slow seconds over productive seconds of the last 24 h's jobs (0-1).",
            labels=["model"],
        )
        jobs = GaugeMetricFamily(
            "ett_model_performance_jobs",
            "Jobs with training windows in the last 24 h behind the ett_model_* figures.",
            labels=["model"],
        )
        score = GaugeMetricFamily(
            "ett_model_straggler_score",
            "Highest straggler score (a rank's compute per step over the other ranks' median) "
            "of the last 24 h's jobs' attempts.",
            labels=["model"],
        )
        rank_s = GaugeMetricFamily(
            "ett_model_rank_seconds",
            "Rank-seconds of the last 24 h's jobs' training windows.",
            labels=["model"],
        )
        for row in rows:
            label = [row["model"] or ""]
            rank_s.add_metric(label, row["rank_s"])
            if row["straggler_score"] is not None:
                score.add_metric(label, row["straggler_score"])
            jobs.add_metric(label, row["jobs"])
            slow.add_metric(label, row["slow_s"])
            if row["samples_per_s_per_rank"] is not None:
                rate.add_metric(label, row["samples_per_s_per_rank"])
            if row["slow_pct"] is not None:
                ratio.add_metric(label, row["slow_pct"] / 100.0)
        yield from (rate, slow, ratio, jobs, score, rank_s)


__all__ = ["WINDOW", "ModelPerformanceMetrics"]
