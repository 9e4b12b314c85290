"""The alerts' read of the stored figures: every job's facts, through the storage facade
(the fleet model, the conditions and the rules read no storage)."""

from __future__ import annotations

from sqlalchemy import Engine

from ett_collector.storage import checkpoint_saves, first_startups, job_summaries

from ._fleet import JobFacts, facts_from_summary


def load_facts(engine: Engine, since: float | None) -> list[JobFacts]:
    """Facts of every computed job whose end is after ``since`` (None: all), by end, with the
    seconds of its first start-up and its checkpoint saves."""
    startups = first_startups(engine, since)
    saves = checkpoint_saves(engine, since)
    return [
        facts_from_summary(s, startups.get(s["job_id"]), saves.get(s["job_id"], ()))
        for s in job_summaries(engine, since)
    ]
