"""Benchmark (issue 26): what the per-model performance read costs (the Fleet page's ranking by
slow time, ``GET /api/v1/models/performance``, and the ``ett_model_*`` gauges of ``/metrics``).

Run it as a script (``python -m tests.performance.bench_model_performance``) or with pytest
(``pytest tests/performance/bench_model_performance.py -m performance -s``). It prints figures;
it does not fail on a slow machine. On SQLite, ``JOBS`` jobs of 2 ranks x 30 windows: one answer
cold (every job's facts computed), warm (each job's facts memoised on its ``computed_at``: only
the job list is read) and cached (the answer reused within 30 s), and one ``/metrics`` render.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import pytest

from ett_collector.read.metrics import CollectorMetrics
from ett_collector.read.metrics_performance import ModelPerformanceMetrics
from ett_collector.read.performance_models import ModelPerformance
from ett_collector.read.query import Query
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.performance_seed import perf_job

JOBS = 200


def run(jobs: int = JOBS) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        store = Store(url)
        store.upgrade()
        pipeline = Pipeline(store)
        t0 = time.time() - 7200
        for i in range(jobs):
            pipeline.ingest(perf_job(f"b-{i}", f"m{i % 8}", t0 + i, slow=i % 4))
        while store.dirty_jobs(limit=1):
            pipeline.recompute_dirty(limit=jobs)
        query = Query(pipeline)
        out: dict[str, float] = {}
        models = ModelPerformance(query, cache_s=0.0)
        start = time.perf_counter()
        models.models()
        out["cold_s"] = time.perf_counter() - start
        start = time.perf_counter()
        models.models()
        out["warm_s"] = time.perf_counter() - start
        cached = ModelPerformance(query)
        cached.models()
        start = time.perf_counter()
        cached.models()
        out["cached_s"] = time.perf_counter() - start
        metrics = CollectorMetrics()
        metrics.register_shared(ModelPerformanceMetrics(ModelPerformance(query, cache_s=0.0)))
        metrics.exposition()  # cold: facts computed
        start = time.perf_counter()
        metrics.exposition()
        out["metrics_warm_s"] = time.perf_counter() - start
        store.close()
    return out


def report(jobs: int = JOBS) -> None:
    f = run(jobs)
    print(
        f"\nper-model performance over {jobs} jobs (2 ranks x 30 windows, SQLite): "
        f"cold {1e3 * f['cold_s']:.1f} ms ({1e3 * f['cold_s'] / jobs:.2f} ms/job) | "
        f"warm {1e3 * f['warm_s']:.1f} ms | cached {1e6 * f['cached_s']:.1f} us | "
        f"/metrics render, warm {1e3 * f['metrics_warm_s']:.1f} ms"
    )


@pytest.mark.performance
def test_bench_model_performance() -> None:
    report()


if __name__ == "__main__":
    report(int(sys.argv[1]) if len(sys.argv) > 1 else JOBS)
