"""A job whose loop figures read windows over a small part of its training says so. An upgrade
probe's job, folded before migration 0008 (no step series), read "slow time 0 ms", 2,475 steps
in 22 windows, of 38,515 s productive, with nothing said; so do windows that carry no step
counts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett import semconv as sc
from ett_collector.schemas import LOOP_COVERAGE_NOTE, loop_coverage
from tests.support.reports import computed_sqlite, report_text
from tests.support.spans import attempt_end, first_batch, window

BASE = 1_790_000_000.0
DONE = sc.EndReasonValues.COMPLETED.value


def test_the_rule() -> None:
    assert loop_coverage(618.7, 38_515.5) == pytest.approx(0.016, abs=1e-3)
    assert loop_coverage(310.0, 300.0) is None  # windows cover the saves too: a little over 1
    assert loop_coverage(LOOP_COVERAGE_NOTE * 100.0, 100.0) is None
    assert loop_coverage(None, 100.0) is None and loop_coverage(10.0, 0.0) is None


def _job(job: str, counted: int) -> list:  # type: ignore[type-arg]
    """One rank training 30 windows of 10 s; the first ``counted`` carry step counts."""
    spans = [first_batch(BASE, job=job)]
    for i in range(30):
        steps = {sc.STEP_FIRST: 100 * i, sc.STEP_LAST: 100 * i + 99} if i < counted else {}
        t = BASE + 10 * i
        spans.append(window(t, t + 10, job=job, **steps, **{sc.SAMPLES: 3200}))
    spans.append(attempt_end(BASE - 5, BASE + 300, DONE, job=job))
    return spans


def test_report_says_partial_loop_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = computed_sqlite(tmp_path, _job("partial", counted=6) + _job("whole", counted=30))
    text = report_text(url, "partial", capsys)
    assert "covers PARTIAL: 20.0% of the job's productive time" in text, text
    assert "no step counts" in text
    assert "PARTIAL" not in report_text(url, "whole", capsys)
