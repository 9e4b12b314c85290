"""Ranks whose clocks disagree are said: every rank leaves a barrier (``pg_init``,
``rendezvous``, a phase marked ``ett.barrier``) at one instant, so the spread of its end over
ranks is the skew of their clocks plus exit jitter (``clock_skew_s``). A probe's job with one
rank 5 min ahead read ETT 23.0 % instead of 77.4 % and a 10 s save blocking 110 s, with no word
about clocks."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ett import semconv as sc
from ett_collector.domain import summarize
from ett_collector.schemas import CLOCK_SKEW_NOTE_S, clock_skew_noted, job_json
from tests.support.reports import computed_sqlite, report_text
from tests.support.spans import attempt_end, first_batch, phase, save, window

DONE = sc.EndReasonValues.COMPLETED.value
FAILED = sc.EndReasonValues.FAILED.value
NOW = 1e7


def _job(skew: float, barrier_jitter: float = 0.004) -> list:  # type: ignore[type-arg]
    """Two ranks: imports, ``pg_init`` (a barrier), model init, training to 300 with a sync
    save at [150, 160]; every span of rank 1 shifted by ``skew`` (its clock), its barrier's
    end by ``barrier_jitter`` more."""
    spans = []
    for rank, shift in ((0, 0.0), (1, skew)):
        jitter = barrier_jitter if rank else 0.0
        spans += [
            phase("imports", 0 + shift, 5 + shift, rank=rank),
            phase("pg_init", 5 + shift, 15 + shift + jitter, rank=rank),
            phase("model_init", 15 + shift, 45 + shift, rank=rank),
            first_batch(50 + shift, rank=rank),
            window(50 + shift, 300 + shift, rank=rank),
            save(100, 150 + shift, 160 + shift, rank=rank),
            attempt_end(0, 310 + shift, DONE, rank=rank),
        ]
    return spans


@pytest.mark.parametrize("skew", [0.0, 30.0, -300.0])
def test_the_barriers_end_spread_is_the_clocks_skew(skew: float) -> None:
    summary = summarize(_job(skew), NOW)
    assert summary.clock_skew_s == pytest.approx(abs(skew + 0.004))
    assert job_json(summary)["clock_skew_s"] == summary.clock_skew_s
    assert clock_skew_noted(summary.clock_skew_s) is (abs(skew) >= CLOCK_SKEW_NOTE_S)


def test_the_largest_spread_over_attempts_counts() -> None:
    spans = [
        phase("pg_init", 0, 10, rank=0),
        phase("pg_init", 0, 10.001, rank=1),
        first_batch(20, rank=0),
        first_batch(20, rank=1),
        window(20, 100, rank=0),
        attempt_end(0, 100, FAILED, rank=0),
        phase("pg_init", 200, 210, rank=0, attempt=1),
        phase("pg_init", 200, 217, rank=1, attempt=1),
        first_batch(220, rank=0, attempt=1),
        window(220, 300, rank=0, attempt=1),
        attempt_end(200, 300, DONE, rank=0, attempt=1),
    ]
    assert summarize(spans, NOW).clock_skew_s == pytest.approx(7.0)


def test_no_barrier_on_two_ranks_says_nothing() -> None:
    one_rank = [phase("pg_init", 0, 10), first_batch(20), window(20, 50), attempt_end(0, 50, DONE)]
    no_barrier = [phase("model_init", 0, 10, rank=r) for r in (0, 1)] + [
        first_batch(20),
        window(20, 50),
        attempt_end(0, 50, DONE),
    ]
    for spans in (one_rank, no_barrier):
        summary = summarize(spans, NOW)
        assert summary.clock_skew_s is None and not clock_skew_noted(summary.clock_skew_s)


def test_report_says_the_clocks_disagree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = 1_790_000_000.0
    shifted = [replace(s, start=s.start + base, end=s.end + base) for s in _job(30.0)]
    agreeing = [
        replace(s, job_id="agree", start=s.start + base, end=s.end + base) for s in _job(0.0)
    ]
    url = computed_sqlite(tmp_path, shifted + agreeing)
    text = report_text(url, "j", capsys)
    assert "clocks DISAGREE: the ranks put one barrier's end 30" in text, text
    assert "NTP" in text
    assert "DISAGREE" not in report_text(url, "agree", capsys)
