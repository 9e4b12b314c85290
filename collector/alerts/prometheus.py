"""The rules as a Prometheus rules file over the fleet metrics (``ett alerts export-prometheus``).

Each rule becomes one alerting rule whose PromQL computes what the built-in evaluator computes
(``_conditions.py``), from the ``ett_fleet_*`` series of ``/metrics``:

- ``S(m, W)`` = ``sum by (G) (ett_fleet_m{window="W"})`` for the rule's group ``G`` (model or team);
- the baseline of a sum is ``S(m, B) - S(m, W)``;
- ETT is ``S(productive_seconds) / S(wall_seconds)``; a rate is ``3600 * S(x) / S(wall_seconds)``
  (seconds per job-hour).
"""

from __future__ import annotations

from typing import Any

from .rules import Kind, Rule, RuleSet, format_duration


def _s(metric: str, window: str, by: str, extra: str = "") -> str:
    sel = f'window="{window}"' + (f",{extra}" if extra else "")
    return f"sum by ({by}) (ett_fleet_{metric}{{{sel}}})"


def _recent_base(metric: str, rule: Rule, by: str, extra: str = "") -> tuple[str, str]:
    recent = _s(metric, rule.window, by, extra)
    base = f"({_s(metric, rule.baseline, by, extra)} - {recent})"
    return recent, base


def _counts(rule: Rule, on: str) -> str:
    recent, base = _recent_base("jobs", rule, on)
    return f"({recent} >= {rule.min_jobs}) and on ({on}) ({base} >= {rule.min_baseline_jobs})"


def _rate(metric: str, rule: Rule, by: str, extra: str = "") -> tuple[str, str]:
    """Recent and baseline rates (seconds per job-hour); ``by`` may hold component too."""
    group = rule.by.value
    lost_r, lost_b = _recent_base(metric, rule, by, extra)
    wall_r, wall_b = _recent_base("wall_seconds", rule, group)
    on = f"on ({group}) group_left()" if by != group else ""
    return (f"(3600 * {lost_r} / {on} {wall_r})", f"(3600 * {lost_b} / {on} {wall_b})")


def _top_component(rule: Rule) -> str:
    """The component whose lost seconds per job-hour grew most (labels: group, component)."""
    group = rule.by.value
    now, then = _rate("lost_seconds", rule, f"{group}, component")
    return f"topk by ({group}) (1, {now} - {then})"


def expression(rule: Rule) -> str:
    """The PromQL of one rule's condition."""
    g = rule.by.value
    if rule.kind is Kind.ETT_REGRESSION:
        prod_r, prod_b = _recent_base("productive_seconds", rule, g)
        wall_r, wall_b = _recent_base("wall_seconds", rule, g)
        ett_r, ett_b = f"({prod_r} / {wall_r})", f"({prod_b} / {wall_b})"
        conds = []
        if rule.drop_points is not None:
            conds.append(f"(({ett_r} < {ett_b} - {rule.drop_points / 100:g}) and on ({g}) "
                         f"{_counts(rule, g)})")  # fmt: skip
        if rule.slo_pct is not None:
            recent_jobs = _s("jobs", rule.window, g)
            conds.append(f"(({ett_r} < {rule.slo_pct / 100:g}) and on ({g}) "
                         f"({recent_jobs} >= {rule.min_jobs}))")  # fmt: skip
        return f"{_top_component(rule)} and on ({g}) ({' or '.join(conds)})"
    if rule.kind is Kind.COMPONENT_REGRESSION:
        comps = "|".join(rule.components)
        now, then = _rate("lost_seconds", rule, f"{g}, component", f'component=~"{comps}"')
        return (f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
                f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})")  # fmt: skip
    if rule.kind is Kind.TTS_REGRESSION:
        sum_r, sum_b = _recent_base("tts_seconds_sum", rule, g)
        n_r, n_b = _recent_base("tts_seconds_count", rule, g)
        now, then = f"({sum_r} / {n_r})", f"({sum_b} / {n_b})"
        cond = (f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
                f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})")  # fmt: skip
        return f"{_top_component(rule)} and on ({g}) ({cond})"
    if rule.kind is Kind.CHECKPOINT_BLOCKING_REGRESSION:
        now, then = _rate("checkpoint_blocking_seconds", rule, g)
        return (f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
                f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})")  # fmt: skip
    if rule.kind is Kind.PRESUMED_DEAD:
        return f'sum by ({g}) (ett_fleet_live_jobs{{state="presumed_dead"}}) >= {rule.min_jobs}'
    most = f'max by ({g}) (ett_fleet_job_restarts_max{{window="{rule.window}"}})'
    return f"{most} > {rule.max_restarts}"


_V = '{{{{ $value | printf "%.0f" }}}}'
_G, _C = "{{{{ $labels.{g} }}}}", "{{{{ $labels.component }}}}"
_DESCRIPTIONS = {
    Kind.ETT_REGRESSION: f"ETT of {{g}} {_G} over the last {{w}} fell below its baseline ({{b}}) "
    f"or SLO; lost time grew most in {_C} (+{_V} s per job-hour)",
    Kind.COMPONENT_REGRESSION: f"{_C} lost {_V} s per job-hour of {{g}} {_G} over the last {{w}}, "
    "a regression on its {b} baseline",
    Kind.TTS_REGRESSION: f"time to start of {{g}} {_G} over the last {{w}} regressed on its {{b}} "
    f"baseline; lost time grew most in {_C}",
    Kind.CHECKPOINT_BLOCKING_REGRESSION: f"checkpoints blocked training {_V} s per job-hour for "
    f"{{g}} {_G} over the last {{w}}, a regression on its {{b}} baseline",
    Kind.PRESUMED_DEAD: f"{_V} job(s) of {{g}} {_G} presumed dead",
    Kind.RESTART_STORM: f"a job of {{g}} {_G} restarted {_V} times in the last {{w}}",
}


def prometheus_rule(rule: Rule) -> dict[str, Any]:
    """One Prometheus alerting rule."""
    labels = {"rule": rule.name, "severity": rule.severity}
    if rule.component is not None:
        labels["component"] = rule.component
    desc = _DESCRIPTIONS[rule.kind].format(g=rule.by.value, w=rule.window, b=rule.baseline)
    return {
        "alert": rule.name,
        "expr": expression(rule),
        "for": format_duration(rule.for_s),
        "labels": labels,
        "annotations": {"summary": rule.summary or desc, "description": desc},
    }


def rules_file(rules: RuleSet) -> str:
    """The YAML text of a Prometheus rules file with every enabled rule."""
    import yaml

    doc = {"groups": [{"name": "ett", "rules": [prometheus_rule(r) for r in rules.enabled()]}]}
    header = (
        "# Generated by `ett alerts export-prometheus` from the ETT alert rules "
        f"({rules.source.rstrip('!')}); do not edit.\n"
        "# It reads the ett_fleet_* series that `ett serve` exposes on /metrics.\n"
    )
    body: str = yaml.safe_dump(doc, sort_keys=False, width=10_000)
    return header + body
