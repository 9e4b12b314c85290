"""A job whose emitters lost spans (an exporter queue or a spool that was full) says so: the
summary's ``telemetry_lost_spans`` sums each rank's own running count, and ``ett report`` and
the job API flag the figures as incomplete. Before, a probe's job that lost 65 of its spans to
a full spool read ETT 11.6 %, idle 88.4 %, with no word that the idle time was lost telemetry."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett import semconv as sc
from ett_collector.domain import summarize
from ett_collector.schemas import job_json
from tests.support.reports import computed_sqlite, report_text
from tests.support.spans import attempt_end, first_batch, window

DONE = sc.EndReasonValues.COMPLETED.value
NOW = 1e6
LOST = sc.TELEMETRY_DROPPED_SPANS
SPOOL = sc.TELEMETRY_SPOOL_DROPPED_SPANS


def _job(job: str = "j", lossy: bool = True) -> list:  # type: ignore[type-arg]
    """Two ranks training [30, 300]: rank 0 counted 4 then 7 lost spans (a running count) and
    its attempt span says 9; rank 1 found 5 lost by an earlier process's spool (``lossy``;
    else none said)."""

    def said(**counts: int) -> dict[str, int]:
        return counts if lossy else {}

    return [
        first_batch(30, job=job),
        window(30, 100, job=job),
        window(100, 200, job=job, **said(**{LOST: 4})),
        window(200, 300, job=job, **said(**{LOST: 7})),
        attempt_end(0, 300, DONE, job=job, **said(**{LOST: 9})),
        first_batch(30, rank=1, job=job),
        window(30, 300, rank=1, job=job),
        attempt_end(0, 300, DONE, rank=1, job=job, **said(**{SPOOL: 5, LOST: 0})),
    ]


def test_the_summary_sums_each_ranks_largest_count() -> None:
    summary = summarize(_job(), NOW)
    assert summary.telemetry_lost_spans == 9 + 5  # not 4 + 7 + 9 + 5: each count runs on
    assert job_json(summary)["telemetry_lost_spans"] == 14
    assert summarize(_job(lossy=False), NOW).telemetry_lost_spans == 0


@pytest.mark.parametrize("value", [-3, "12", 2.5, True])
def test_a_count_that_is_not_a_count_is_no_loss(value: object) -> None:
    spans = [first_batch(30), window(30, 100, **{LOST: value}), attempt_end(0, 100, DONE)]
    assert summarize(spans, NOW).telemetry_lost_spans == 0


def test_report_flags_incomplete_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = computed_sqlite(tmp_path, _job("lossy") + _job("clean", lossy=False))
    text = report_text(url, "lossy", capsys)
    assert "INCOMPLETE: the job's emitters lost 14 span(s)" in text
    assert "the figures miss what they said" in text and "lower bound" not in text
    assert "INCOMPLETE" not in report_text(url, "clean", capsys)
