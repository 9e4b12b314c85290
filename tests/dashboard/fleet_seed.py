"""A small fleet of jobs as spans, sent to a real collector over OTLP: the worked example, a
two-rank job with async checkpoints and a compile cache hit, a failed job, and a live job whose
heartbeat a test can keep sending."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ett import semconv as sc
from ett_collector.domain.model import AttrValue, SpanRecord
from tests.support.replay import send_spans
from tests.support.worked_example import worked_example


@dataclass
class JobSpans:
    """Builds one job's spans (consecutive span ids, shared identity)."""

    job_id: str
    base: float
    model: str
    team: str
    world: int = 1
    spans: list[SpanRecord] = field(default_factory=list)

    def add(
        self,
        name: str,
        start: float,
        end: float,
        attempt: int = 0,
        rank: int = 0,
        **attrs: AttrValue,
    ) -> None:
        merged: dict[str, AttrValue] = {
            sc.JOB_ID: self.job_id,
            sc.ATTEMPT: attempt,
            sc.RANK: rank,
            sc.WORLD_SIZE: self.world,
            sc.MODEL: self.model,
            sc.TEAM: self.team,
        }
        merged.update({k.replace("__", "."): v for k, v in attrs.items()})
        self.spans.append(
            SpanRecord(
                f"{abs(hash((self.job_id, attempt))) % 10**30:032x}",
                f"{len(self.spans) + 1:016x}",
                name,
                self.base + start,
                self.base + end,
                self.job_id,
                attempt,
                rank,
                merged,
            )
        )

    def windows(self, start: float, end: float, attempt: int = 0, step: float = 10) -> None:
        t = start
        while t < end:
            for r in range(self.world):
                self.add(sc.SPAN_TRAIN_WINDOW, t, min(t + step, end), attempt, r)
            t += step


def two_rank_job(job_id: str, base: float) -> list[SpanRecord]:
    """Two ranks; rank 1 is the straggler of start-up; async checkpoints; compile cache hit."""
    j = JobSpans(job_id, base, "dlrm-large", "ranking", world=2)
    for r, slow in ((0, 0.0), (1, 6.0)):
        j.add(sc.startup_span_name("pg_init"), 0, 5 + slow, rank=r)
        j.add(sc.startup_span_name("model_init"), 5 + slow, 20 + slow, rank=r)
        j.add(sc.SPAN_COMPILE, 20 + slow, 30 + slow, rank=r, ett__compile__cache="hit")
        j.add(sc.SPAN_FIRST_BATCH, 30 + slow, 31 + slow, rank=r, ett__step=0)
    j.windows(37, 600)
    for step, t in ((100, 200), (200, 400)):
        for r in range(2):
            j.add(
                sc.SPAN_CHECKPOINT_SAVE,
                t,
                t + 3 + r,
                rank=r,
                ett__checkpoint__step=step,
                ett__checkpoint__mode="async",
            )
            j.add(sc.SPAN_CHECKPOINT_PERSIST, t + 4, t + 20, rank=r, ett__checkpoint__step=step)
    for r in range(2):
        j.add(sc.SPAN_ATTEMPT, 0, 600, rank=r, ett__attempt__end_reason="completed")
    return j.spans


def failed_job(job_id: str, base: float) -> list[SpanRecord]:
    """One rank that fails with an OOM at 200 s and never restarts."""
    j = JobSpans(job_id, base, "dlrm-small", "ads")
    j.add(sc.startup_span_name("model_init"), 0, 20)
    j.add(sc.SPAN_FIRST_BATCH, 20, 21, ett__step=0)
    j.windows(21, 200)
    j.add(sc.SPAN_FAILURE, 200, 200, ett__failure__cause="oom", ett__step=50)
    j.add(sc.SPAN_ATTEMPT, 0, 200, ett__attempt__end_reason="failed", ett__failure__cause="oom")
    return j.spans


def live_job(job_id: str, started: float) -> JobSpans:
    """A running job that started at ``started``: start-up and a first batch; the caller sends
    heartbeats with :func:`heartbeat`."""
    j = JobSpans(job_id, started, "dlrm-small", "ads")
    j.add(sc.startup_span_name("model_init"), 0, 2)
    j.add(sc.SPAN_FIRST_BATCH, 2, 3, ett__step=0)
    return j


def send(j: JobSpans, url: str) -> None:
    """Send the job's spans built so far."""
    assert send_spans(j.spans, url) == len(j.spans)


def heartbeat(j: JobSpans, url: str) -> None:
    """Send one train window ending now."""
    j.spans.clear()
    now = time.time() - j.base
    j.add(sc.SPAN_TRAIN_WINDOW, max(3.0, now - 1.0), now)
    send_spans(j.spans, url)


def seed(url: str, now: float | None = None) -> dict[str, str]:
    """Send the fleet; returns role → job id."""
    now = now or time.time()
    ids = {"example": "spec-worked-example", "two_rank": "two-rank-async", "failed": "failed-oom"}
    spans = worked_example(ids["example"], base=now - 7200)
    spans += two_rank_job(ids["two_rank"], now - 5400)
    spans += failed_job(ids["failed"], now - 3000)
    assert send_spans(spans, url) == len(spans)
    return ids
