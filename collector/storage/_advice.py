"""Checkpoint interval advice across jobs and models (docs/metrics.md, "Figures": Young's interval),
read from the stored summaries: one query, one row per job, one row per model.

A model's optimum pools its jobs: ``I* = sqrt(2·B·T/F)`` with ``B`` the mean blocking per
checkpoint over its checkpoints, ``T`` the training seconds and ``F`` the failures of its jobs.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, select

from ett_collector.domain import young_interval, young_training
from ett_collector.schemas import MIN_ADVICE_FAILURES, advice_ok
from ett_collector.storage._tables import job_figures


def _job_row(summary: dict[str, Any]) -> dict[str, Any]:
    advice = summary.get("checkpoint_advice") or {}
    attempts = summary.get("attempts") or []
    ranks = max((len(a.get("ranks") or ()) for a in attempts), default=1) or 1
    failures = int(summary.get("failures") or 0)
    # the training time T of Young's formula, recovered from the job's own optimum where it
    # has one; else its productive seconds
    training = young_training(
        advice.get("optimal_interval_s"), advice.get("mean_blocking_s"), failures
    )
    if training is None:
        training = float(summary.get("productive_s") or 0.0)
    return {
        "job_id": summary["job_id"],
        "model": summary.get("model"),
        "team": summary.get("team"),
        "state": summary.get("state"),
        "ranks": ranks,
        "failures": failures,
        "training_s": training,
        "checkpoints": int(advice.get("checkpoints") or 0),
        "mean_blocking_s": advice.get("mean_blocking_s"),
        "interval_s": advice.get("interval_s"),
        "optimal_interval_s": advice.get("optimal_interval_s"),
        "saving_s": advice.get("saving_s"),
        "advice_ok": advice_ok(failures),
    }


def _model_row(model: str | None, rows: list[dict[str, Any]]) -> dict[str, Any]:
    failures = sum(r["failures"] for r in rows)
    training = sum(r["training_s"] for r in rows)
    ckpts = sum(r["checkpoints"] for r in rows)
    blocking = sum((r["mean_blocking_s"] or 0.0) * r["checkpoints"] for r in rows)
    mean_b = blocking / ckpts if ckpts else None
    used = [(r["interval_s"], r["checkpoints"]) for r in rows if r["interval_s"]]
    weight = sum(w for _, w in used)
    interval = sum(i * w for i, w in used) / weight if weight else None
    optimal = young_interval(mean_b or 0.0, training, failures)  # the figures' own formula
    return {
        "model": model,
        "jobs": len(rows),
        "failures": failures,
        "training_s": training,
        "failures_per_day": failures / (training / 86400.0) if training > 0 else None,
        "checkpoints": ckpts,
        "mean_blocking_s": mean_b,
        "interval_s": interval,
        "optimal_interval_s": optimal,
        "advice_ok": advice_ok(failures),
        "ranks": max((r["ranks"] for r in rows), default=1),
    }


def checkpoint_advice(
    engine: Engine,
    since: float | None,
    model: str | None,
    team: str | None,
    limit: int = 500,
) -> dict[str, Any]:
    """``{"models": [...], "jobs": [...], "min_failures": n}``: per model the pooled figures, per
    job its own advice (the ``limit`` jobs a change would save the most on, first); each row's
    ``advice_ok`` says whether its failures reach ``min_failures``, below which readers withhold
    the optimum (the figures stay, for the what-if)."""
    fig = job_figures.c
    q = select(fig.summary)
    if since is not None:
        q = q.where(fig.end >= since)
    if model is not None:
        q = q.where(fig.model == model)
    if team is not None:
        q = q.where(fig.team == team)
    with engine.connect() as conn:
        rows = [_job_row(json.loads(s)) for s in conn.execute(q).scalars()]
    # a job with no training, no checkpoint and no failure (a standalone publishing job) has
    # nothing to advise and adds nothing to its model's figures: not counted among its jobs
    rows = [r for r in rows if r["training_s"] > 0 or r["checkpoints"] or r["failures"]]
    by_model: dict[str | None, list[dict[str, Any]]] = {}
    for r in rows:
        by_model.setdefault(r["model"], []).append(r)
    models = [_model_row(m, rs) for m, rs in by_model.items()]
    models.sort(key=lambda m: (m["model"] is None, m["model"] or ""))
    rows.sort(key=lambda r: (-(r["saving_s"] or 0.0), r["job_id"]))
    return {"models": models, "jobs": rows[:limit], "min_failures": MIN_ADVICE_FAILURES}
