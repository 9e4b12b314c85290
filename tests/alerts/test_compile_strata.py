"""The ``compile`` component of the ``regression`` rule, stratified by the first attempt's
start-up compile-cache outcome: a warm-cache compile that tripled still lands between the cold
and the warm mode, where the pooled rank test calls it ordinary, and fires; more cold caches at
the same compile times do not; the summary's ``startup_compile_cache`` comes from real spans
through the real pipeline on SQLite; figures stored before it existed still give facts, of the
stratum ``unknown``."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from fleet_builder import load, startup_job

from ett import semconv as sc
from ett_collector.alerts import Fleet, JobFacts, evaluate, facts_from_summary, load_facts
from ett_collector.alerts._detect import STRATA
from ett_collector.alerts._detect import tests_at as views_at
from ett_collector.alerts.rules import Rule, rules_from_mappings
from ett_collector.domain import SpanRecord
from ett_collector.storage import Store, job_summaries
from tests.support.spans import attempt_end, first_batch, phase, span, window

HOUR, DAY = 3600.0, 86400.0
T0 = 1_800_000_000.0
ONSET = T0 + 9 * DAY
WARM_S, COLD_S = 15.0, 120.0
"""Median start-up compile with a warm and a cold cache (simulator/default_profile.toml)."""
PER_DAY = 24


def rule() -> Rule:
    spec = {"name": "regression_by_model", "kind": "regression", "window": "24h", "baseline": "7d"}
    [only] = rules_from_mappings([spec]).rules
    return only


def job(
    i: int, alloc: float, model: str, rng: random.Random, hits: float, warm: float, now: float
) -> JobFacts:
    """A 12 h job of 8 GPUs (:func:`startup_job`) whose first start-up builds its model (~25 s)
    and compiles it: with a warm cache (probability ``hits``) in ~15 s times ``warm``, else cold
    in ~120 s (log-normal, sigma 0.3)."""
    cache = "hit" if rng.random() < hits else "miss"
    compile_s = (WARM_S * warm if cache == "hit" else COLD_S) * rng.lognormvariate(0, 0.3)
    startup = {"model": 25.0 * rng.lognormvariate(0, 0.4), "compile": compile_s}
    return startup_job(f"{model}-{i:04d}", model, alloc, startup, rng, now, compile_cache=cache)


def fleet(seed: int, now: float, hits: float = 0.5, warm: float = 1.0) -> list[JobFacts]:
    """Two models, :data:`PER_DAY` jobs a day each, allocated up to ``now``, half of them with
    a warm cache; from :data:`ONSET` m1's jobs find a warm cache with probability ``hits``, and
    a warm compile takes ``warm`` times as long."""
    rng = random.Random(seed)
    out = []
    for model in ("m1", "m2"):
        alloc, i = T0, 0
        while alloc < now:
            after = model == "m1" and alloc >= ONSET
            p, factor = (hits, warm) if after else (0.5, 1.0)
            out.append(job(i, alloc, model, rng, p, factor, now))
            alloc += rng.expovariate(PER_DAY / DAY)
            i += 1
    return out


def _compile_p(jobs: list[JobFacts], at: float) -> float:
    """The p-value of m1's ``compile`` test at ``at`` (of the more significant of its views,
    doubled)."""
    found = views_at(rule(), Fleet(jobs), at, {})
    [test] = [x for x in found if (x.key, x.component) == ("m1", "compile")]
    return test.p


def test_tripled_warm_compiles_fire_though_they_sit_between_the_modes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Half the jobs find a warm cache, before and after; from the onset m1's warm compiles
    take 3x as long (~45 s), still faster than most cold ones (~120 s)."""
    now = ONSET + 12 * HOUR  # 12 h jobs: the start-up view sees them, few have ended
    jobs = fleet(0, now, warm=3.0)
    slow = [j for j in jobs if j.model == "m1" and j.first_batch and j.alloc >= ONSET]
    slow = [j for j in slow if j.compile_cache == "hit"]
    cold = [j.startup["compile"] for j in jobs if j.alloc < ONSET and j.compile_cache == "miss"]
    assert len(slow) >= 4 and sum(j.state == "completed" for j in slow) < 3
    # the tripled warm compiles are still faster than the cold ones' median
    assert max(j.startup["compile"] for j in slow) < sorted(cold)[len(cold) // 2]
    findings = evaluate(rule(), Fleet(jobs), now, live=False, active={})
    assert [(f.labels["model"], f.labels["component"]) for f in findings] == [("m1", "compile")]
    [f] = findings
    assert f.figures["unit"] == "s per first start-up"
    assert f.figures["excess_gpu_hours_per_day"] > 0.25  # each job against its own stratum
    assert f.figures["ratio"] > 1.2
    assert set(f.jobs) <= {j.job_id for j in slow}  # the warm jobs show it, not the cold ones
    stratified = _compile_p(jobs, now)
    # the same fleet, the compile test pooled over both modes
    monkeypatch.delitem(STRATA, "compile")
    pooled = _compile_p(jobs, now)
    assert stratified < 1e-4 and pooled > 100 * stratified
    assert evaluate(rule(), Fleet(jobs), now, live=False, active={}) == []


def test_tripled_warm_compiles_fire_as_warm_caches_grow_common() -> None:
    """From the onset 90 % of m1's jobs find a warm cache (half did before) and a warm compile
    takes 3x as long: fewer compile seconds per start-up than before, as most skip the cold
    compile, but each warm one costs three times its kind's. The cost and the ratio are each
    job's against the baseline of its own kind, as its rank is."""
    now = ONSET + 12 * HOUR
    jobs = fleet(1, now, hits=0.9, warm=3.0)
    started = [j for j in jobs if j.model == "m1" and j.first_batch]
    after = [j.startup["compile"] for j in started if j.alloc >= ONSET]
    before = [j.startup["compile"] for j in started if j.alloc < ONSET]
    assert sum(after) / len(after) < sum(before) / len(before)
    findings = evaluate(rule(), Fleet(jobs), now, live=False, active={})
    assert [(f.labels["model"], f.labels["component"]) for f in findings] == [("m1", "compile")]
    [f] = findings
    assert f.figures["excess_gpu_hours_per_day"] > 0.25
    assert 2.0 < f.figures["ratio"] < 4.5  # planted 3x on the warm compiles


def test_more_cold_caches_at_the_same_compile_times_stay_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """From the onset 90 % of m1's jobs find a cold cache (half did before), each compile as
    slow as before: more compile seconds, and no compile slower than its kind."""
    end = ONSET + 3 * DAY
    fleets = [fleet(100 + seed, end, hits=0.1) for seed in range(4)]

    def fired() -> list[tuple[str, str]]:
        out = []
        for jobs in fleets:
            f = Fleet(jobs)
            for hour in range(0, 72, 3):
                found = evaluate(rule(), f, ONSET + hour * HOUR, live=False, active={})
                out += [(x.labels["model"], x.labels["component"]) for x in found]
        return out

    assert fired() == []
    monkeypatch.delitem(STRATA, "compile")
    assert ("m1", "compile") in fired()  # the pooled test mistakes the cold caches for a change


# --- the summary's field, from spans ----------------------------------------------------------


def _job_spans(job: str, caches: tuple[str, ...], t0: float) -> list[SpanRecord]:
    """A completed job of two ranks: model_init [0, 10], ``ett.compile`` spans [10, 10 + 60]
    with the ``caches`` of rank 0's then rank 1's compile (none: no compile), first batch at 80,
    training to 600; a recompile (miss) in training on rank 0 when it compiled."""
    spans: list[SpanRecord] = []
    ident = {sc.MODEL: "dlrm"}
    for r in (0, 1):
        spans += [
            phase("model_init", t0, t0 + 10, rank=r, job=job, **ident),
            first_batch(t0 + 80, rank=r, job=job, **ident),
            window(t0 + 80, t0 + 600, rank=r, job=job, **ident),
            attempt_end(t0, t0 + 600, sc.EndReasonValues.COMPLETED.value, rank=r, job=job),
        ]
    for r, cache in enumerate(caches):
        attrs = {sc.COMPILE_CACHE: cache, **ident}
        spans.append(span(sc.SPAN_COMPILE, t0 + 10, t0 + 70, rank=r, job=job, **attrs))
    if caches:
        attrs = {sc.COMPILE_CACHE: "miss", **ident}
        spans.append(span(sc.SPAN_COMPILE, t0 + 300, t0 + 320, job=job, **attrs))
    return spans


JOBS = {"warm": ("hit", "hit"), "cold": ("miss", "miss"), "eager": (), "mixed": ("hit", "miss")}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A SQLite store with the figures of the jobs of :data:`JOBS`, computed by the pipeline."""
    s = Store(f"sqlite:///{tmp_path / 'c.db'}")
    s.upgrade()
    jobs = [(name, "", 0.0, 0.0, _job_spans(name, caches, T0)) for name, caches in JOBS.items()]
    load(s, jobs)
    try:
        yield s
    finally:
        s.engine.dispose()


def test_the_start_up_cache_outcome_comes_from_spans_through_the_pipeline(store: Store) -> None:
    facts = {j.job_id: j for j in load_facts(store.engine, None)}
    stored = {s["job_id"]: s for s in job_summaries(store.engine, None)}
    assert {k: j.compile_cache for k, j in facts.items()} == {
        "warm": "hit",  # the recompile in training (a miss) is not the start-up's
        "cold": "miss",
        "eager": None,
        "mixed": "partial",
    }
    assert {k: s["startup_compile_cache"] for k, s in stored.items()} == {
        k: j.compile_cache for k, j in facts.items()
    }
    assert {k: STRATA["compile"](j) for k, j in facts.items()} == {
        "warm": "hit",
        "cold": "miss",
        "eager": "unknown",
        "mixed": "partial",
    }
    assert facts["warm"].startup["compile"] == pytest.approx(60.0)
    assert "compile" not in facts["eager"].startup


def test_figures_stored_before_the_field_give_facts_of_an_unknown_stratum(store: Store) -> None:
    summaries = job_summaries(store.engine, None)
    assert len(summaries) == len(JOBS)
    for summary in summaries:
        now = facts_from_summary(summary)
        old = {k: v for k, v in summary.items() if k != "startup_compile_cache"}
        then = facts_from_summary(old)
        assert then.compile_cache is None
        assert STRATA["compile"](then) == "unknown"
        assert then == dataclasses.replace(now, compile_cache=None)
