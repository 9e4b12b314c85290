"""The loop figures of a job do not depend on which of its windows were folded yet. An
operator probe fed the same simulated fleet to a one- and a two-worker collector: 32 of 428
jobs differed in their ``performance`` block (one job's slow time 53.2 s against 0.07 s),
because a job's windows between 10 and 15 minutes old (of its span clock) were folded into
60 s buckets or left as raw points of their own depending on how its batches arrived. Now a
raw window that ends past the retention line (the newest window less the retention) is read
into its bucket, as compaction will fold it, so every history gives the same block."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ett import semconv as sc
from ett_collector.read.performance import job_performance
from ett_collector.read.query import Query
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.performance_seed import perf_job
from tests.support.spans import save

T0 = 1_790_000_005.0  # not on a bucket's edge: windows straddle the 60 s buckets


def _spans() -> list[Any]:
    spans = perf_job("fold-free", "m", T0, windows=150, slow=12)
    # a save that stalls both ranks for 7 s in the middle: some windows are interrupted
    spans += [save(100, T0 + 733.0, T0 + 740.0, rank=r, job="fold-free") for r in (0, 1)]
    return spans


def _block(
    tmp_path: Path, name: str, retention: float | None, chunks: int, again: bool = False
) -> dict[str, Any]:
    store = Store(f"sqlite:///{tmp_path / name}.db", raw_window_retention_s=retention)
    store.upgrade()
    pipeline = Pipeline(store)
    spans = sorted(_spans(), key=lambda s: s.end)
    size = -(-len(spans) // chunks)
    for i in range(0, len(spans), size):  # in time order, as a live job sends them
        pipeline.ingest(spans[i : i + size])
    if again:  # then the windows once more under new ids: the folded ones and the raw ones
        pipeline.ingest(_with_new_ids(spans))
    while pipeline.recompute_dirty():
        pass
    try:
        return job_performance(Query(pipeline), "fold-free")
    finally:
        store.close()


def test_every_fold_history_gives_the_same_loop_figures(tmp_path: Path) -> None:
    at_once = _block(tmp_path, "one", 600.0, 1)  # one compaction: the line at its latest
    for chunks in (7, 37, 150):  # the line left 0 to 300 s short of it: more windows raw
        other = _block(tmp_path, f"c{chunks}", 600.0, chunks)
        assert _rounded(other) == _rounded(at_once), chunks
    assert at_once["slow_s"] > 0 and at_once["points"] > 0
    # folded as they come (retention 0), a history of one or many batches gives one block too
    assert _rounded(_block(tmp_path, "z1", 0.0, 1)) == _rounded(_block(tmp_path, "z37", 0.0, 37))


def _rounded(value: Any) -> Any:
    """``value`` with every float rounded to 6 places (sums folded in another order)."""
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def _with_new_ids(spans: list[Any]) -> list[Any]:
    """The job's windows again, under new span ids (an emitter that rebuilds them to retry)."""
    return [
        replace(s, span_id=f"{int(s.span_id, 16) ^ 0xFFFF:016x}")
        for s in spans
        if s.name == sc.SPAN_TRAIN_WINDOW
    ]


@pytest.mark.parametrize("retention", [600.0, 0.0])
def test_windows_sent_again_under_new_ids_count_once(tmp_path: Path, retention: float) -> None:
    """A time probe sent a job's 100 windows twice under new span ids: 161 windows and 1,610 s
    of loop for 1,000 s (the raw ones twice, the folded ones once)."""
    once = _block(tmp_path, f"once{retention:g}", retention, 1)
    twice = _block(tmp_path, f"twice{retention:g}", retention, 1, again=True)
    assert _rounded(twice) == _rounded(once)
