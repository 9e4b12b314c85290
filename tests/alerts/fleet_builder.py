"""A small fleet of finished jobs, as spans, for the alert tests: one job per model every half hour,
start-up phases charged to known components, and a planted regression of one component of one
model between two instants. The spans go through the real pipeline (store, summarize).

Also the job facts that the alert views read, built directly (:func:`job_facts`,
:func:`startup_job`), for the tests that plant their truth in the facts rather than in spans."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ett import semconv as sc
from ett_collector.alerts import JobFacts
from ett_collector.domain import SpanRecord

_ids = itertools.count(1)

DATA_S = 100.0
"""The stable ``dataloader_init`` phase (component ``data``)."""
MODEL_INIT_S = 200.0
TRAIN_S = 3300.0


@dataclass(frozen=True)
class Regress:
    """From ``start`` to ``stop``, jobs of ``model`` take ``factor`` times longer in the
    ``dataloader_init`` phase (component ``data``)."""

    model: str
    start: float
    stop: float
    factor: float = 9.0


def _span(job: str, name: str, start: float, end: float, **attrs: object) -> SpanRecord:
    merged = {sc.JOB_ID: job, sc.ATTEMPT: 0, sc.RANK: 0, **attrs}
    return SpanRecord(
        trace_id=f"{abs(hash(job)):032x}"[:32],
        span_id=f"{next(_ids):016x}",
        name=name,
        start=start,
        end=end,
        job_id=job,
        attempt=0,
        rank=0,
        attributes=merged,
    )


def job_spans(
    job: str, model: str, team: str, t0: float, data_s: float, restarts: int = 0
) -> tuple[list[SpanRecord], float]:
    """The spans of one completed job starting at ``t0`` and its end instant."""
    who = {sc.MODEL: model, sc.TEAM: team}
    spans = [
        _span(job, sc.startup_span_name("model_init"), t0, t0 + MODEL_INIT_S, **who),
        _span(
            job,
            sc.startup_span_name("dataloader_init"),
            t0 + MODEL_INIT_S,
            t0 + MODEL_INIT_S + data_s,
            **who,
        ),
    ]
    first = t0 + MODEL_INIT_S + data_s
    end = first + TRAIN_S
    spans.append(_span(job, sc.SPAN_FIRST_BATCH, first, first, **{sc.STEP: 0}, **who))
    w = first
    while w < end:
        nxt = min(end, w + 1100.0)
        spans.append(_span(job, sc.SPAN_TRAIN_WINDOW, w, nxt, **who))
        w = nxt
    spans.append(
        _span(job, sc.SPAN_ATTEMPT, t0, end, **{sc.ATTEMPT_END_REASON: "completed"}, **who)
    )
    return spans, end


def fleet(
    start: float,
    hours: int,
    models: tuple[str, ...] = ("dlrm", "ranker"),
    teams: tuple[str, ...] = ("ads", "feed"),
    regress: Regress | None = None,
    seed: int = 1,
    noise: float = 0.2,
    every_s: float = 1800.0,
) -> Iterator[tuple[str, str, float, float, list[SpanRecord]]]:
    """``(job_id, model, start, end, spans)`` of one job per model every ``every_s`` for
    ``hours`` from ``start``; a job's data phase varies by ``noise`` (uniform, relative)."""
    rng = random.Random(seed)
    for h in range(int(hours * 3600 / every_s)):
        for i, model in enumerate(models):
            t0 = start + h * every_s + i * 60.0
            data = DATA_S * (1 + rng.uniform(-noise, noise))
            if (
                regress is not None
                and model == regress.model
                and regress.start <= t0 < regress.stop
            ):
                data *= regress.factor
            job = f"{model}-{h:04d}"
            spans, end = job_spans(job, model, teams[i % len(teams)], t0, data)
            yield job, model, t0, end, spans


def load(store: object, jobs: list[tuple[str, str, float, float, list[SpanRecord]]]) -> None:
    """Ingest every job's spans and compute their figures (the real pipeline)."""
    from ett_collector.write.pipeline import Pipeline

    pipeline = Pipeline(store)  # type: ignore[arg-type]
    batch: list[SpanRecord] = []
    for *_, spans in jobs:
        batch.extend(spans)
    for i in range(0, len(batch), 5000):
        pipeline.ingest(batch[i : i + 5000])
    while pipeline.recompute_dirty(limit=1000):
        pass


def job_facts(
    job_id: str,
    model: str,
    alloc: float,
    end: float,
    running: bool,
    lost: dict[str, float],
    **extra: Any,
) -> JobFacts:
    """The facts of a job of 8 GPUs (team ads) from ``alloc`` to ``end``, a ``running`` one's so
    far (``end``: when it is seen), that lost ``lost`` seconds by component, all of them idle:
    its blocking is the checkpoint's, its productive time the rest of its wall time. ``extra``:
    the other fields (``tts`` at least)."""
    wall = end - alloc
    return JobFacts(
        job_id=job_id,
        model=model,
        team="ads",
        state="running" if running else "completed",
        alloc=alloc,
        end=end,
        wall=wall,
        productive=wall - sum(lost.values()),
        idle=sum(lost.values()),
        failure=0.0,
        blocking=lost.get("checkpoint", 0.0),
        unsaved=0.0,
        lost=lost,
        gpus=8,
        **extra,
    )


def startup_job(
    job_id: str,
    model: str,
    alloc: float,
    startup: dict[str, float],
    rng: random.Random,
    now: float,
    **extra: Any,
) -> JobFacts:
    """The facts of a 12 h job (:func:`job_facts`; its length uniform within 20 %) whose first
    start-up spent ``startup`` seconds by component, and that checkpoints ~40 s an hour
    (log-normal, sigma 0.3). Seen at ``now``: a job that would end later is running, its
    figures so far, its start-up once its first batch has come. ``extra``: the other fields."""
    first_batch = alloc + sum(startup.values())
    end = alloc + 12 * 3600.0 * rng.uniform(0.8, 1.2)
    running = end > now
    end = min(end, now)
    lost = {**startup, "checkpoint": 40.0 * (end - alloc) / 3600.0 * rng.lognormvariate(0, 0.3)}
    started = first_batch <= now
    seen = {"first_batch": first_batch if started else None, "startup": startup if started else {}}
    return job_facts(
        job_id, model, alloc, end, running, lost, tts=first_batch - alloc, **seen, **extra
    )
