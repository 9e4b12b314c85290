"""The PromQL export of the ``regression`` rule is an approximation; these tests keep what is said
of it true. The ``regression_by_model`` cases of ``promtool/rules_test.yml`` (which promtool runs
in ``test_prometheus.py``) hold the figures of the fleets of ``promql_cases.py``; on those fleets
the built-in evaluator agrees with the cases' expectations where the file says it does, and says
the opposite where the file says the two differ. The same formula in Python (:func:`promql`),
checked against the cases, measures the choice of K."""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from promql_cases import (
    DAY,
    FAILING,
    FAILING_PHASES,
    FEW,
    FEW_JOBS,
    HOUR,
    LASTING,
    LASTING_JOBS,
    LASTING_ONSET,
    MAIN,
    MAIN_PHASES,
    UNDER_K,
    UNDER_K_JOBS,
    WIDE,
    WIDE_JOBS,
    T,
    series,
)

from ett_collector.alerts import Finding, Fleet, JobFacts, Rule, evaluate, load_rules, replay
from ett_collector.alerts._detect import FAILURE, RESTART_COSTS
from ett_collector.alerts.prometheus import RATIO, expression, rules_file
from ett_collector.alerts.rules import RuleSet

CASES = Path(__file__).resolve().parent / "promtool" / "rules_test.yml"
PHASES = {"noise": "5m", "regression": "15m", "back": "25m"}
"""A phased case's phases and the instant its alerts are checked at."""
FLEETS: dict[str, dict[str, list[JobFacts]]] = {
    MAIN: MAIN_PHASES,
    FAILING: FAILING_PHASES,
    FEW: {"5m": FEW_JOBS, "15m": FEW_JOBS},
    UNDER_K: {"5m": UNDER_K_JOBS, "15m": UNDER_K_JOBS},
    WIDE: {"5m": WIDE_JOBS, "15m": WIDE_JOBS},
    LASTING: {"5m": LASTING_JOBS, "15m": LASTING_JOBS},
}


def _rule() -> Rule:
    rule = load_rules().get("regression_by_model")
    assert rule is not None
    return rule


def _groups() -> dict[str, dict[str, Any]]:
    """The promtool test groups by the model their regression series are of."""
    out = {}
    for group in yaml.safe_load(CASES.read_text())["tests"]:
        names = " ".join(s["series"] for s in group["input_series"])
        models = set(re.findall(r'model="([^"]+)"', names))
        assert len(models) == 1, models
        out[models.pop()] = group
    return out


def _values(text: str) -> list[float]:
    """promtool's expanding notation, as far as the file uses it (``a+0xN``, ``a``)."""
    out: list[float] = []
    for token in text.split():
        m = re.fullmatch(r"(-?[0-9.e+]+?)\+0x(\d+)", token)
        out += [float(m.group(1))] * (int(m.group(2)) + 1) if m else [float(token)]
    return out


def _minute(eval_time: str) -> int:
    assert eval_time.endswith("m")
    return int(eval_time[:-1])


def _input(group: Mapping[str, Any], eval_time: str) -> dict[str, float]:
    """The regression rule's series of a test group at ``eval_time`` (live series left out)."""
    return {
        s["series"]: _values(s["values"])[_minute(eval_time)]
        for s in group["input_series"]
        if not s["series"].startswith(("ett_fleet_live_jobs", "ett_fleet_job_restarts_max"))
    }


def _expected(group: Mapping[str, Any], eval_time: str) -> set[tuple[str, str]]:
    """(model, component) of the regression alerts the group expects at ``eval_time``."""
    for test in group["alert_rule_test"]:
        if test["alertname"] == "regression_by_model" and test["eval_time"] == eval_time:
            return {
                (a["exp_labels"]["model"], a["exp_labels"]["component"]) for a in test["exp_alerts"]
            }
    raise AssertionError(f"no regression_by_model test at {eval_time}")


def _checked(group: str) -> dict[str, list[JobFacts]]:
    """A case's fleets by the eval time its alerts are checked at."""
    fleets = FLEETS[group]
    return {PHASES.get(k, k): v for k, v in fleets.items()}


def _built_in(
    jobs: Sequence[JobFacts], active: Mapping[tuple[str, str], Finding] | None = None, t: float = T
) -> list[Finding]:
    return evaluate(_rule(), Fleet(jobs), t, False, active or {})


def _named(findings: Sequence[Finding]) -> set[tuple[str, str]]:
    return {(f.labels["model"], f.labels["component"]) for f in findings}


# --- the exported formula, in Python (regression_expression) ----------------------------------


def _sums(figures: Mapping[str, float], model: str, window: str) -> dict[str, Any]:
    """One model's sums over one window from promtool series names."""
    out: dict[str, Any] = {"lost": {}, "failures": 0.0, "has_failures": False}
    for name, value in figures.items():
        labels = dict(re.findall(r'(\w+)="([^"]*)"', name))
        if labels.get("model") != model or labels.get("window") != window:
            continue
        metric = name.split("{")[0].removeprefix("ett_fleet_")
        if metric == "lost_seconds":
            out["lost"][labels["component"]] = value
        elif metric == "failures":
            out["failures"] += value
            out["has_failures"] = True
        else:
            out[metric] = value
    return out


def _div(a: float, b: float) -> float:
    """PromQL's float division (x / 0 is ±Inf, 0 / 0 NaN)."""
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def promql(rule: Rule, figures: Mapping[str, float], model: str) -> set[str]:
    """The components of ``model`` that the exported PromQL fires for, given its series."""
    r, long = _sums(figures, model, rule.window), _sums(figures, model, rule.baseline)
    if not r or "jobs" not in r or "jobs" not in long:
        return set()
    if not (r["jobs"] >= rule.min_jobs and long["jobs"] - r["jobs"] >= rule.min_baseline_jobs):
        return set()
    per_day = rule.window_s / 24
    wall_r, wall_b = r["wall_seconds"], long["wall_seconds"] - r["wall_seconds"]
    fired = set()
    for c in rule.components:
        if c == FAILURE or c not in long["lost"]:
            continue
        lost_r, lost_b = r["lost"][c], long["lost"][c] - r["lost"][c]
        excess = (lost_r - _div(lost_b * wall_r, wall_b)) / per_day
        if excess >= rule.min_gpu_hours_per_day and _div(3600 * lost_r, wall_r) > RATIO * _div(
            3600 * lost_b, wall_b
        ):
            fired.add(c)
    if FAILURE in rule.components and r["has_failures"]:
        k_r, k_b = r["failures"], long["failures"] - r["failures"]
        p_r, p_b = r["productive_seconds"], long["productive_seconds"] - r["productive_seconds"]
        f_r = r["lost"].get(FAILURE, 0.0)
        f_b = long["lost"].get(FAILURE, 0.0) - f_r
        per_failure = f_b / k_b if k_b > 0 else _div(f_r, k_r)
        excess = (k_r - _div(k_b * p_r, p_b)) * per_failure / per_day
        if excess >= rule.min_gpu_hours_per_day and _div(3600 * k_r, p_r) > RATIO * _div(
            3600 * k_b, p_b
        ):
            fired = {c for c in fired if c not in RESTART_COSTS} | {FAILURE}
    return fired


# --- the cases hold the fleets' figures, and PromQL's answers ---------------------------------


def test_the_export_is_marked_an_approximation_and_keeps_the_component_label() -> None:
    rule = _rule()
    text = rules_file(RuleSet((rule,)))
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == f"- alert: {rule.name}")
    first = at
    while lines[first - 1].lstrip().startswith("#"):
        first -= 1
    above = " ".join(line.strip().removeprefix("# ") for line in lines[first:at])
    assert first < at and lines[first - 1].strip() == "rules:"  # the comment is the rule's
    assert "approximation of the built-in regression rule" in above
    assert 'docs/alerts.md, section "The regression rule in PromQL"' in above
    [exported] = yaml.safe_load(text)["groups"][0]["rules"]
    assert "The regression rule in PromQL" in exported["annotations"]["approximation"]
    assert exported["expr"] == expression(rule)
    assert "by (model, component)" in exported["expr"]  # an alert names model and component
    assert "label_replace(" in exported["expr"] and f'"component", "{FAILURE}"' in exported["expr"]


@pytest.mark.parametrize("model", sorted(FLEETS))
def test_the_promtool_cases_hold_the_figures_of_their_fleets(model: str) -> None:
    group = _groups()[model]
    for eval_time, jobs in _checked(model).items():
        assert _input(group, eval_time) == series(jobs, model), (model, eval_time)


@pytest.mark.parametrize("model", sorted(FLEETS))
def test_the_formula_in_python_gives_the_cases_answers(model: str) -> None:
    """promtool checks the cases' answers with the real PromQL; this Python copy of the formula
    gives the same answers, so it may measure K below."""
    group = _groups()[model]
    for eval_time in _checked(model):
        got = {(model, c) for c in promql(_rule(), _input(group, eval_time), model)}
        assert got == _expected(group, eval_time), (model, eval_time)


# --- the built-in rule on the same fleets ------------------------------------------------------


def test_where_they_agree_the_built_in_fires_and_resolves_as_the_cases_say() -> None:
    groups = _groups()
    for model, comp, phases in ((MAIN, "data", MAIN_PHASES), (FAILING, FAILURE, FAILING_PHASES)):
        group = groups[model]
        assert _named(_built_in(phases["noise"])) == _expected(group, "5m") == set()
        fired = _built_in(phases["regression"])
        assert _named(fired) == _expected(group, "15m") == {(model, comp)}
        active = {(_rule().name, f.key): f for f in fired}  # the open incident, its baseline
        assert _named(_built_in(phases["back"], active)) == _expected(group, "25m") == set()
    # the failure incident holds the restarts' data loading, as PromQL's `unless` does
    [failing] = _built_in(FAILING_PHASES["regression"])
    assert [c.split()[0] for c in failing.figures["restart_costs"]] == ["data"]


def test_few_noisy_jobs_promql_fires_the_built_in_does_not() -> None:
    """Test 3: one slow job in three passes the ratio; the rank test sees two ordinary jobs."""
    assert _expected(_groups()[FEW], "15m") == {(FEW, "data")}
    rule = _rule()
    figures = series(FEW_JOBS, FEW)
    assert promql(rule, figures, FEW) == {"data"}
    assert _built_in(FEW_JOBS) == []
    from ett_collector.alerts._detect import tests_at

    [data] = [x for x in tests_at(rule, Fleet(FEW_JOBS), T, {}) if x.component == "data"]
    assert data.ratio > RATIO and data.excess_gpu_h_per_day >= rule.min_gpu_hours_per_day
    assert data.p > 0.2  # not a change the jobs show, one job's outlier


@pytest.mark.parametrize(
    ("model", "jobs", "component"),
    [(UNDER_K, UNDER_K_JOBS, "data"), (WIDE, WIDE_JOBS, "checkpoint")],
)
def test_a_significant_change_the_built_in_finds_and_promql_misses(
    model: str, jobs: list[JobFacts], component: str
) -> None:
    """Test 4: a 1.6x change of every recent job, under K; test 5: a 4x change of 8-GPU jobs
    that costs more than the floor in GPU-hours and less than it in job-hours."""
    assert _expected(_groups()[model], "15m") == set()
    assert promql(_rule(), series(jobs, model), model) == set()
    [found] = _built_in(jobs)
    assert _named([found]) == {(model, component)}
    assert found.figures["q"] <= _rule().fdr
    assert found.figures["excess_gpu_hours_per_day"] >= _rule().min_gpu_hours_per_day
    if model == UNDER_K:
        assert found.figures["ratio"] == pytest.approx(1.6) and found.figures["ratio"] < RATIO
    else:
        gpu_hours = found.figures["excess_gpu_hours_per_day"]
        assert gpu_hours / 8 < _rule().min_gpu_hours_per_day <= gpu_hours  # 8 GPUs a job


def test_a_regression_longer_than_the_baseline_promql_learns_the_built_in_keeps() -> None:
    """Test 6: eight days into a regression the built-in incident still fires against the
    baseline it was found against; PromQL, and the built-in rule without its state, are quiet."""
    assert _expected(_groups()[LASTING], "15m") == set()
    assert promql(_rule(), series(LASTING_JOBS, LASTING), LASTING) == set()
    assert _built_in(LASTING_JOBS) == []  # a fresh evaluation: the 7d window is all regression
    firings = replay(LASTING_JOBS, RuleSet((_rule(),)), T - 10 * DAY, T)
    assert [(f.labels["component"], f.resolved_at) for f in firings] == [("data", None)]
    assert LASTING_ONSET <= firings[0].fired_at <= LASTING_ONSET + DAY


# --- K ---------------------------------------------------------------------------------------


def _draw(
    rng: random.Random,
    n: int,
    factor: float,
    sigma: float,
    first_end: float,
    last_end: float,
    start: int,
) -> list[JobFacts]:
    """``n`` jobs of 1 GPU and 2-4 hours losing 60 s per job-hour to data loading, times a
    lognormal(0, sigma) per job, times ``factor``."""
    out = []
    for i in range(n):
        wall = HOUR * rng.uniform(2.0, 4.0)
        data = 60.0 * wall / HOUR * rng.lognormvariate(0.0, sigma) * factor
        end = first_end + (last_end - first_end) * i / max(n - 1, 1)
        out.append(
            JobFacts(
                job_id=f"j{start + i}",
                model="m",
                team="t",
                state="completed",
                alloc=end - wall,
                end=end,
                wall=wall,
                productive=wall - data,
                idle=data,
                failure=0.0,
                blocking=0.0,
                unsaved=0.0,
                tts=60.0,
                lost={"data": data},
            )
        )
    return out


def _fires(per_day: int, factor: float, sigma: float, draws: int, seed: int = 1) -> float:
    """The share of draws whose 24h window (``per_day`` jobs, data ``factor`` times) fires
    PromQL against six days of the same jobs unchanged."""
    rng, rule, n = random.Random(seed), _rule(), 0
    for _ in range(draws):
        base = _draw(rng, 6 * per_day, 1.0, sigma, T - 7 * DAY + HOUR, T - DAY - HOUR, 0)
        now = _draw(rng, per_day, factor, sigma, T - DAY + HOUR, T - HOUR, 10_000)
        n += bool(promql(rule, series(base + now, "m"), "m"))
    return n / draws


def test_k_keeps_steady_noise_quiet_and_finds_the_changes_that_matter() -> None:
    """The figures docs/alerts.md gives for K = 2 (jobs of 2-4 h and 1 GPU; seeded draws)."""
    assert RATIO == 2.0
    assert _fires(6, 1.0, 0.3, 400) == 0.0  # steady per-job noise: quiet
    assert 0.05 <= _fires(6, 1.0, 1.0, 400) <= 0.10  # heavy-tailed noise: false alarms (7.7%)
    assert 0.45 <= _fires(6, 2.0, 0.3, 400) <= 0.55  # a 2x change: found half the time
    assert _fires(6, 3.0, 0.3, 400) >= 0.99  # a 3x change: found
    assert _fires(24, 1.6, 0.3, 100) == 0.0  # a 1.6x change of 24 jobs a day: missed (test 4)
