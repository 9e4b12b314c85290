"""The summary's ``startup_compile_cache``: the first attempt's start-up compiles' cache outcome
(the stratum of the alerts' ``compile`` test), over ranks, as one compile would say its lookups.
A compile after the rank's first batch (a recompile) and a restart's compiles do not count."""

from __future__ import annotations

from typing import Any

import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from tests.support.spans import attempt_end, first_batch, phase, span, window

DONE = sc.EndReasonValues.COMPLETED.value
NOW = 1e6


def _compile(start: float, end: float, cache: Any = None, **kw: Any) -> SpanRecord:
    attrs = {} if cache is None else {sc.COMPILE_CACHE: cache}
    return span(sc.SPAN_COMPILE, start, end, **attrs, **kw)


def _job(*compiles: SpanRecord, ranks: tuple[int, ...] = (0, 1)) -> list[SpanRecord]:
    """Start-up [0, 30] on every rank (model_init [0, 10]), training to 100, and ``compiles``."""
    spans = list(compiles)
    for r in ranks:
        spans += [
            phase("model_init", 0, 10, rank=r),
            first_batch(30, rank=r),
            window(30, 100, rank=r),
            attempt_end(0, 100, DONE, rank=r),
        ]
    return spans


@pytest.mark.parametrize(
    ("caches", "outcome"),
    [
        (("hit", "hit"), "hit"),
        (("miss", "miss"), "miss"),
        (("hit", "miss"), "partial"),  # one rank warm, the other cold
        (("partial", "hit"), "partial"),
        (("hit", "off"), "hit"),  # a compile without a lookup says nothing of the cache
        (("off", None), "off"),  # unsaid: no lookup either
        (("off", ["hit"]), "off"),  # not a word: unsaid
    ],
)
def test_the_ranks_start_up_compiles_say_one_outcome(caches: tuple[Any, ...], outcome: str) -> None:
    compiles = [_compile(10, 25, cache, rank=r) for r, cache in enumerate(caches)]
    summary = summarize(_job(*compiles), NOW)
    assert summary.startup_compile_cache == outcome
    assert job_json(summary)["startup_compile_cache"] == outcome


def test_a_recompile_in_training_and_a_restarts_compile_do_not_count() -> None:
    restart = [
        _compile(110, 120, "miss", attempt=1),
        first_batch(130, attempt=1),
        window(130, 200, attempt=1),
        attempt_end(105, 200, DONE, attempt=1),
    ]
    spans = [
        _compile(10, 25, "hit"),
        _compile(60, 70, "miss"),  # after the first batch: a recompile
        *_job(ranks=(0,)),
        *restart,
    ]
    assert summarize(spans, NOW).startup_compile_cache == "hit"
    # the recompile alone: no start-up compile
    assert summarize(_job(_compile(60, 70, "miss"), ranks=(0,)), NOW).startup_compile_cache is None


def test_no_compile_no_outcome() -> None:
    summary = summarize(_job(), NOW)
    assert summary.startup_compile_cache is None
    assert job_json(summary)["startup_compile_cache"] is None
