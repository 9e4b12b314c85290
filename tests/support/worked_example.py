"""The worked example of docs/metrics.md as spans: the demo's recorded job and a test case."""

from __future__ import annotations

from collections.abc import Mapping

from ett import semconv as sc
from ett_collector.domain.model import AttrValue, SpanRecord


class _Builder:
    """Makes the spans of one job with consecutive span ids and shared identity."""

    def __init__(self, job_id: str, base: float, model: str, team: str) -> None:
        self.job_id, self.base, self.model, self.team = job_id, base, model, team
        self.spans: list[SpanRecord] = []

    def add(
        self,
        name: str,
        start: float,
        end: float,
        attempt: int,
        attrs: Mapping[str, AttrValue] | None = None,
        rank: int = 0,
    ) -> None:
        merged: dict[str, AttrValue] = {
            sc.JOB_ID: self.job_id,
            sc.ATTEMPT: attempt,
            sc.RANK: rank,
            sc.WORLD_SIZE: 1,
            sc.MODEL: self.model,
            sc.TEAM: self.team,
        }
        merged.update(attrs or {})
        self.spans.append(
            SpanRecord(
                trace_id=f"{attempt + 1:032x}",
                span_id=f"{len(self.spans) + 1:016x}",
                name=name,
                start=self.base + start,
                end=self.base + end,
                job_id=self.job_id,
                attempt=attempt,
                rank=rank,
                attributes=merged,
            )
        )

    def windows(self, attempt: int, start: int, end: int, step: int = 10) -> None:
        for t in range(start, end, step):
            self.add(sc.SPAN_TRAIN_WINDOW, t, t + step, attempt)


def worked_example(
    job_id: str = "spec-example", base: float = 0.0, model: str = "dlrm", team: str = "ranking"
) -> list[SpanRecord]:
    """docs/metrics.md, "Worked example": one rank, killed at 300 in attempt 0, completes in
    attempt 1 at 500.

    ``base`` shifts every instant (the demo uses a recent unix time).
    """
    b = _Builder(job_id, base, model, team)
    sync = sc.CheckpointModeValues.SYNC.value
    b.add(sc.startup_span_name("pg_init"), 0, 10, 0)
    b.add(sc.startup_span_name("model_init"), 10, 30, 0)
    b.add(sc.startup_span_name("compile"), 20, 40, 0)
    b.add(sc.SPAN_FIRST_BATCH, 49, 50, 0, {sc.STEP: 0})
    b.windows(0, 50, 300)
    b.add(sc.SPAN_CHECKPOINT_SAVE, 150, 160, 0, {sc.CHECKPOINT_STEP: 100, sc.CHECKPOINT_MODE: sync})
    b.add(sc.SPAN_CHECKPOINT_SAVE, 260, 270, 0, {sc.CHECKPOINT_STEP: 200, sc.CHECKPOINT_MODE: sync})
    b.add(sc.startup_span_name("checkpoint_load"), 360, 380, 1, {sc.CHECKPOINT_STEP: 200})
    b.add(sc.SPAN_FIRST_BATCH, 399, 400, 1, {sc.STEP: 200})
    b.windows(1, 400, 500)
    b.add(
        sc.SPAN_ATTEMPT,
        360,
        500,
        1,
        {sc.ATTEMPT_END_REASON: sc.EndReasonValues.COMPLETED.value},
    )
    return b.spans
