"""The loop's alert kinds (issue 26): throughput regression and persistent straggler, their rules,
the backtest, the truth scoring and the Prometheus export; last, a simulated fleet end to end."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from ett_collector.alerts import backtest, load_facts
from ett_collector.alerts._backtest import Firing, replay
from ett_collector.alerts._fleet import Fleet, JobFacts, Straggling
from ett_collector.alerts._perf import straggler_findings, throughput_findings
from ett_collector.alerts._quality import planted_from, score
from ett_collector.alerts.prometheus import prometheus_rule, rules_file
from ett_collector.alerts.rules import (
    REGRESSION_KINDS,
    Kind,
    RulesError,
    RuleSet,
    load_rules,
    parse_rules,
    rule_to_dict,
    with_changes,
)

HOUR = 3600.0
DAY = 86400.0
T0 = 1_800_000_000.0


def _rule(kind: Kind):  # type: ignore[no-untyped-def]
    rule = next(r for r in load_rules().rules if r.kind is kind)
    return with_changes(rule, enabled=True)


def _job(i: int, end: float, rate: float, model: str = "m", **kw: object) -> JobFacts:
    return JobFacts(
        job_id=f"j{i:04d}",
        model=model,
        team="t",
        state="completed",
        alloc=end - 3 * HOUR,
        end=end,
        wall=3 * HOUR,
        productive=2.8 * HOUR,
        idle=0.1 * HOUR,
        failure=0.1 * HOUR,
        blocking=0.05 * HOUR,
        unsaved=0.0,
        tts=60.0,
        gpus=8,
        throughput=rate,
        loop_rank_s=8 * 2.7 * HOUR,
        **kw,  # type: ignore[arg-type]
    )


def _fleet(drop_at: float | None, factor: float = 1.3, days: int = 10) -> list[JobFacts]:
    """Six jobs a day of model ``m`` and ``n`` with 3 % noise; ``m`` slower from ``drop_at``."""
    rng = random.Random(7)
    jobs, i = [], 0
    for k in range(days * 6):
        end = T0 + k * 4 * HOUR
        for model in ("m", "n"):
            slow = drop_at is not None and model == "m" and end - 3 * HOUR >= drop_at
            rate = 30000.0 * rng.lognormvariate(0, 0.03) / (factor if slow else 1.0)
            jobs.append(_job(i, end, rate, model))
            i += 1
    return jobs


def test_the_new_kinds_parse_and_say_what_is_wrong() -> None:
    rules = parse_rules(
        "rules:\n"
        "  - {name: tp, kind: throughput_regression, window: 24h, baseline: 7d, fdr: 0.01}\n"
        "  - {name: st, kind: straggler, window: 24h, min_score: 1.5, min_windows: 5}\n"
    )
    tp, st = rules.rules
    assert (tp.kind, tp.fdr, tp.component) == (Kind.THROUGHPUT_REGRESSION, 0.01, "step")
    assert (st.min_score, st.min_windows, st.component, st.windows) == (
        1.5,
        5,
        "straggler",
        ("24h",),
    )
    assert rule_to_dict(st)["min_score"] == 1.5 and "baseline" not in rule_to_dict(st)
    assert {Kind.THROUGHPUT_REGRESSION, Kind.STRAGGLER} <= REGRESSION_KINDS
    with pytest.raises(RulesError, match=r"'min_score'.*above 1"):
        parse_rules("rules:\n  - {name: st, kind: straggler, min_score: 1.0}\n")
    with pytest.raises(RulesError, match="unknown field 'min_score' for kind throughput"):
        parse_rules("rules:\n  - {name: tp, kind: throughput_regression, min_score: 2}\n")
    with pytest.raises(RulesError, match=r"'baseline'.*longer than window"):
        parse_rules("rules:\n  - {name: tp, kind: throughput_regression, baseline: 24h}\n")


def test_a_slower_model_fires_and_a_flat_fleet_stays_quiet() -> None:
    rule = _rule(Kind.THROUGHPUT_REGRESSION)
    onset = T0 + 7 * DAY
    fired = replay(_fleet(onset), RuleSet((rule,)), T0 + 7 * DAY, T0 + 10 * DAY)
    assert [f.labels["model"] for f in fired] == ["m"]
    first = fired[0]
    assert first.labels["component"] == "step" and onset <= first.fired_at <= onset + DAY
    assert first.value is not None and first.baseline is not None
    assert first.value / first.baseline == pytest.approx(1 / 1.3, rel=0.05)
    assert "GPU-hours/day" in first.description
    assert replay(_fleet(None), RuleSet((rule,)), T0 + 7 * DAY, T0 + 10 * DAY) == []


def test_a_change_below_the_effect_floor_stays_quiet() -> None:
    rule = with_changes(_rule(Kind.THROUGHPUT_REGRESSION), min_gpu_hours_per_day=500.0)
    assert replay(_fleet(T0 + 7 * DAY), RuleSet((rule,)), T0 + 7 * DAY, T0 + 10 * DAY) == []


def test_an_open_throughput_alert_keeps_its_baseline() -> None:
    rule = _rule(Kind.THROUGHPUT_REGRESSION)
    fleet = Fleet(_fleet(T0 + 7 * DAY))
    t = T0 + 8 * DAY
    (found,) = throughput_findings(rule, fleet, t, {})
    until = found.figures["baseline_until"]
    later = T0 + 9.9 * DAY  # by now the plain baseline holds slow jobs too
    (kept,) = throughput_findings(rule, fleet, later, {found.key: (found.labels, found.figures)})
    assert (
        kept.figures["baseline_until"] == until and kept.figures["onset"] == found.figures["onset"]
    )


def _straggling(windows: int, ratio: float = 1.5) -> tuple[Straggling, ...]:
    return (Straggling(0, 3, ratio, ((ratio, windows), (1.02, 400))),)


def test_a_persistent_straggler_fires_and_a_brief_one_does_not() -> None:
    rule = _rule(Kind.STRAGGLER)
    jobs = [
        _job(1, T0, 3e4, stragglers=_straggling(rule.min_windows)),
        _job(2, T0 + HOUR, 3e4, model="n", stragglers=_straggling(rule.min_windows - 1)),
        _job(3, T0 + HOUR, 3e4, model="k", stragglers=_straggling(500, 1.2)),
    ]
    (found,) = straggler_findings(rule, Fleet(jobs), T0 + 2 * HOUR)
    assert found.labels["model"] == "m" and found.labels["component"] == "straggler"
    assert found.jobs == ("j0001",) and found.value == 1.5
    assert found.figures["stragglers"][0]["rank"] == 3
    assert "rank 3 of j0001" in found.description
    assert straggler_findings(rule, Fleet(jobs), T0 + 2 * DAY) == []  # out of the window


def test_truth_scoring_reads_stragglers_and_their_throughput_consequence() -> None:
    planted = planted_from(
        [
            {"record": "straggler", "model": "m", "rank": 3, "factor": 1.5, "at": T0},
            {
                "record": "regression",
                "model": "n",
                "team": None,
                "component": "step",
                "factor": 1.3,
                "at": T0,
            },
        ]
    )
    assert [(p.component, p.model) for p in planted] == [("straggler", "m"), ("step", "n")]

    def firing(model: str, component: str, at: float) -> Firing:
        labels = {"rule": "r", "model": model, "component": component}
        return Firing("r", labels, at, None, 1.0, None, (), "")

    firings = [
        firing("m", "straggler", T0 + HOUR),
        firing("m", "step", T0 + HOUR),
        firing("n", "step", T0 + 2 * HOUR),
        firing("n", "step", T0 - HOUR),
    ]
    q = score(firings, planted, T0 - DAY, T0 + 3 * DAY)
    assert (q.true_firings, q.false_firings, q.recall) == (3, 1, 1.0)
    assert [d.delay_s for d in q.detections] == [HOUR, 2 * HOUR]


def test_the_prometheus_export_approximates_the_loop_kinds_by_model() -> None:
    rules = RuleSet(
        (_rule(Kind.THROUGHPUT_REGRESSION), _rule(Kind.STRAGGLER), *load_rules().enabled())
    )
    text = rules_file(rules)
    assert "- alert: throughput_regression_by_model" in text
    assert "- alert: straggler_by_model" in text
    assert "ett_model_straggler_score" in text and "ett_model_rank_seconds" in text
    assert "- alert: regression_by_model" in text
    rule = prometheus_rule(_rule(Kind.STRAGGLER))
    assert "approximation" in rule["annotations"]


def test_a_simulated_straggler_is_found_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The simulator plants, the pipeline keeps the loop facts, the backtest finds it; the
    read API's job object stays as it was (no loop facts in it)."""
    from ett_collector.storage import Store
    from ett_simulator import simulate_into_db

    url = f"sqlite:///{tmp_path / 'fleet.db'}"
    start = T0
    simulate_into_db(
        url,
        jobs=40,
        days=4,
        seed=9,
        start=start,
        models=["dcn-v2"],
        stragglers=["model=dcn-v2 rank=1 factor=1.5 at=2027-01-17T08:00:00Z"],
    )
    store = Store(url)
    try:
        facts = load_facts(store.engine, None)
        trained = [j for j in facts if j.trained]
        assert trained and all(j.throughput and j.loop_rank_s > 0 for j in trained)
        late = [j for j in trained if j.alloc > T0 + 2 * DAY and j.gpus > 1]
        assert late and all(
            any(s.rank == 1 and s.windows_at(1.3) >= 20 for s in j.stragglers) for j in late
        )
        early = [j for j in trained if j.end < T0 + 2 * DAY]
        assert all(s.windows_at(1.3) == 0 for j in early for s in j.stragglers)
        rules = RuleSet((_rule(Kind.STRAGGLER),))
        fired = backtest(store.engine, rules, T0, T0 + 4 * DAY)
        assert fired and all(f.fired_at >= T0 + 2 * DAY for f in fired)
        assert fired[0].labels == {
            "rule": "straggler_by_model",
            "model": "dcn-v2",
            "component": "straggler",
            "severity": "warning",
        }
        job = store.get_job(trained[0].job_id)
        assert job is not None and "loop_facts" not in job
        _running_facts_are_throttled(store, late[0].job_id)
        _a_failing_computation_saves_no_facts(store, late[0].job_id, monkeypatch)
    finally:
        store.engine.dispose()


def _running_facts_are_throttled(store: object, job_id: str) -> None:
    """A running job's facts are computed at most every RUNNING_EVERY_S (kept in between)."""
    import dataclasses

    from ett_collector.domain import summarize
    from ett_collector.domain.model import JobState
    from ett_collector.write._job_loop import RUNNING_EVERY_S, job_loop_facts

    ended = summarize(store.load_spans(job_id), T0 + 5 * DAY, 60.0)  # type: ignore[attr-defined]
    running = dataclasses.replace(ended, state=JobState.RUNNING)
    first = job_loop_facts(store, running, clock=lambda: 1000.0)  # type: ignore[arg-type]
    assert first is not None and first["stragglers"]
    again = job_loop_facts(store, running, clock=lambda: 1000.0 + RUNNING_EVERY_S / 2)  # type: ignore[arg-type]
    assert again is first  # kept, not recomputed
    later = job_loop_facts(store, running, clock=lambda: 1001.0 + RUNNING_EVERY_S)  # type: ignore[arg-type]
    assert later == first and later is not first
    done = job_loop_facts(store, ended)  # type: ignore[arg-type]
    assert done == first and done is not first


def _a_failing_computation_saves_no_facts(
    store: object, job_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ett_collector.domain import summarize
    from ett_collector.write import _job_loop

    def broken(*_: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(_job_loop, "loop_facts", broken)
    ended = summarize(store.load_spans(job_id), T0 + 5 * DAY, 60.0)  # type: ignore[attr-defined]
    assert _job_loop.job_loop_facts(store, ended) is None  # type: ignore[arg-type]
