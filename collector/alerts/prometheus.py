"""The rules as a Prometheus rules file over the fleet metrics (``ett alerts export-prometheus``).

Each rule becomes one alerting rule over the ``ett_fleet_*`` series of ``/metrics``:

- ``S(m, W)`` = ``sum by (G) (max without (instance, job) (ett_fleet_m{window="W"}))`` for the
  rule's group ``G`` (model or team): several collectors on one database each expose the same
  fleet series, which a plain sum counted once per collector (thresholds halved);
- the baseline of a sum is ``S(m, B) - S(m, W)``;
- ETT is ``S(productive_seconds) / S(wall_seconds)``; a rate is ``3600 * S(x) / S(wall_seconds)``
  (seconds per job-hour);
- an SLO burn rule's PromQL is in ``_burn.py``, beside its Python.

The threshold kinds, presumed dead, restart storm and SLO burn compute in PromQL what the
built-in evaluator computes (``_conditions.py``, ``_burn.py``). The ``regression`` kind cannot be
(PromQL has no per-job values to rank, no Benjamini-Hochberg over one evaluation's tests, no
state to keep an open incident's baseline): it is exported as a documented approximation,
:func:`regression_expression`, marked as such by a comment above it and by its ``approximation``
annotation (``docs/alerts.md``, "The regression rule in PromQL").

The loop's kinds (``throughput_regression``, ``straggler``; issue 26) read per-job facts that
no ``ett_fleet_*`` series carries; their export is an approximation over the per-model
``ett_model_*`` gauges (``_loop_promql.py``), marked as such like the regression kind's. Grouped
by team they cannot be expressed (the gauges carry no team): such a rule is left out of the
exported file, which names it in a comment (:func:`has_promql`); the built-in evaluator
(``ett serve``) runs it.
"""

from __future__ import annotations

import re
from typing import Any

from . import _burn, _loop_promql
from ._detect import FAILURE, RESTART_COSTS
from .rules import Kind, Rule, RuleSet, format_duration

RATIO = 2.0
"""``K`` of the regression kind's approximation: a (group, component) fires when its recent rate
is more than ``K`` times its baseline rate (and the effect floor holds). Without the rank test's
knowledge of the noise, the ratio of two pooled rates is all PromQL has. Measured on draws of 6
jobs a day (``tests/alerts/test_promql_approximation.py``): steady per-job noise never passes 2,
heavy-tailed noise does 8% of the time (1.5: 18%), and a 3x change passes 99.8% of the time
(3: 50%). ``docs/alerts.md``, "The regression rule in PromQL", has the table."""

APPROXIMATED = frozenset({Kind.REGRESSION, *_loop_promql.KINDS})
"""The kinds whose export approximates the built-in rule rather than computing it."""

SECTION = 'docs/alerts.md, section "The regression rule in PromQL"'


class NotPromQL(ValueError):
    """A rule without PromQL (:func:`has_promql` is False) asked for as PromQL."""


def has_promql(rule: Rule) -> bool:
    """Whether ``rule`` has PromQL (exact or approximate): all but the loop's kinds by team."""
    return rule.kind not in _loop_promql.KINDS or _loop_promql.expressible(rule)


def not_promql_note(rule: Rule) -> str:
    """Why ``rule`` is not in the exported file (the comment naming it there)."""
    return _loop_promql.not_expressible_note(rule)


def fleet_sum(metric: str, by: str, sel: str) -> str:
    """``ett_fleet_<metric>{sel}`` summed by ``by``, each series counted once however many
    collectors (Prometheus ``instance``/``job`` targets) expose it."""
    return f"sum by ({by}) (max without (instance, job) (ett_fleet_{metric}{{{sel}}}))"


def _s(metric: str, window: str, by: str, extra: str = "") -> str:
    sel = f'window="{window}"' + (f",{extra}" if extra else "")
    return fleet_sum(metric, by, sel)


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


def _per_day(rule: Rule) -> str:
    """The divisor from seconds lost over the recent window to hours lost per day:
    ``3600 * window / 1 day`` (3600 for 24h, 150 for 1h)."""
    return f"{rule.window_s / 24:g}"


def _costly_and_steep(rule: Rule, excess: str, now: str, then: str) -> str:
    """The approximation's test of one quantity: its excess costs at least the floor (the
    value), its recent rate is more than :data:`RATIO` times the baseline's, with the job
    counts."""
    g = rule.by.value
    return (
        f"(({excess} >= {rule.min_gpu_hours_per_day:g}) and ({now} > {RATIO:g} * {then})"
        f" and on ({g}) ({_counts(rule, g)}))"
    )


def _component_condition(rule: Rule, components: list[str]) -> str:
    """Per (group, component): ``(L_r - L_b * W_r / W_b) / 3600 / days >= floor`` and
    ``3600 L_r / W_r > K * 3600 L_b / W_b`` and the job counts; its value is the excess in
    job-hours per day (``L``: lost seconds, ``W``: wall seconds, ``_r`` recent, ``_b`` baseline)."""
    g = rule.by.value
    comps = f'component=~"{"|".join(components)}"'
    lost_r, lost_b = _recent_base("lost_seconds", rule, f"{g}, component", comps)
    wall_r, wall_b = _recent_base("wall_seconds", rule, g)
    join = f"on ({g}) group_left ()"
    excess = f"(({lost_r} - {lost_b} * {join} {wall_r} / {join} {wall_b}) / {_per_day(rule)})"
    now, then = f"(3600 * {lost_r} / {join} {wall_r})", f"(3600 * {lost_b} / {join} {wall_b})"
    return _costly_and_steep(rule, excess, now, then)


def _failure_condition(rule: Rule) -> str:
    """Per group: failures per training hour ``3600 k_r / P_r > K * 3600 k_b / P_b`` and the
    excess failures' cost ``(k_r - k_b * P_r / P_b) * F / 3600 / days >= floor`` (``k``:
    failures, ``P``: productive seconds, ``F``: failure seconds per failure of the baseline, or
    of the recent jobs when the baseline had none) and the job counts; its value is the excess
    in job-hours per day. No ``component`` label (the caller adds it)."""
    g = rule.by.value
    k_r, k_b = _recent_base("failures", rule, g)
    p_r, p_b = _recent_base("productive_seconds", rule, g)
    f_r, f_b = _recent_base("lost_seconds", rule, g, f'component="{FAILURE}"')
    per_failure = f"(({f_b} / ({k_b} > 0)) or ({f_r} / {k_r}))"
    excess = f"(({k_r} - {k_b} * {p_r} / {p_b}) * {per_failure} / {_per_day(rule)})"
    now, then = f"(3600 * {k_r} / {p_r})", f"(3600 * {k_b} / {p_b})"
    return _costly_and_steep(rule, excess, now, then)


def regression_expression(rule: Rule) -> str:
    """The PromQL approximation of a ``regression`` rule: one series per (group, component)
    whose rate is more than :data:`RATIO` times its baseline rate and whose excess costs at
    least ``min_gpu_hours_per_day`` job-hours a day (the value), with the job counts. The
    components every restart pays again stay quiet while the group's failure condition holds,
    as the built-in rule folds them into the failure incident."""
    g = rule.by.value
    failure = _failure_condition(rule) if FAILURE in rule.components else None
    restart = [c for c in rule.components if c in RESTART_COSTS]
    other = [c for c in rule.components if c not in RESTART_COSTS and c != FAILURE]
    parts = []
    if restart:
        cond = _component_condition(rule, restart)
        parts.append(f"({cond} unless on ({g}) {failure})" if failure else cond)
    if other:
        parts.append(_component_condition(rule, other))
    if failure:
        parts.append(f'label_replace({failure}, "component", "{FAILURE}", "", "")')
    return " or ".join(parts)


def expression(rule: Rule) -> str:
    """The PromQL of one rule's condition (of the regression kind: an approximation)."""
    g = rule.by.value
    if not has_promql(rule):
        raise NotPromQL(not_promql_note(rule))
    if rule.kind in _loop_promql.KINDS:
        return _loop_promql.expression(rule)
    if rule.kind is Kind.REGRESSION:
        return regression_expression(rule)
    if rule.kind is Kind.ETT_SLO_BURN:
        return _burn.expression(rule)
    if rule.kind is Kind.ETT_REGRESSION:
        prod_r, prod_b = _recent_base("productive_seconds", rule, g)
        wall_r, wall_b = _recent_base("wall_seconds", rule, g)
        ett_r, ett_b = f"({prod_r} / {wall_r})", f"({prod_b} / {wall_b})"
        conds = []
        if rule.drop_points is not None:
            conds.append(
                f"(({ett_r} < {ett_b} - {rule.drop_points / 100:g}) and on ({g}) "
                f"{_counts(rule, g)})"
            )
        if rule.slo_pct is not None:
            recent_jobs = _s("jobs", rule.window, g)
            conds.append(
                f"(({ett_r} < {rule.slo_pct / 100:g}) and on ({g}) "
                f"({recent_jobs} >= {rule.min_jobs}))"
            )
        return f"{_top_component(rule)} and on ({g}) ({' or '.join(conds)})"
    if rule.kind is Kind.COMPONENT_REGRESSION:
        comps = "|".join(rule.components)
        now, then = _rate("lost_seconds", rule, f"{g}, component", f'component=~"{comps}"')
        return (
            f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
            f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})"
        )
    if rule.kind is Kind.TTS_REGRESSION:
        sum_r, sum_b = _recent_base("tts_seconds_sum", rule, g)
        n_r, n_b = _recent_base("tts_seconds_count", rule, g)
        now, then = f"({sum_r} / {n_r})", f"({sum_b} / {n_b})"
        cond = (
            f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
            f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})"
        )
        return f"{_top_component(rule)} and on ({g}) ({cond})"
    if rule.kind is Kind.CHECKPOINT_BLOCKING_REGRESSION:
        now, then = _rate("checkpoint_blocking_seconds", rule, g)
        return (
            f"({now} > {then} * {1 + rule.increase_pct / 100:g}) and ({now} - {then} >= "
            f"{rule.min_increase:g}) and on ({g}) ({_counts(rule, g)})"
        )
    if rule.kind is Kind.PRESUMED_DEAD:
        dead = fleet_sum("live_jobs", g, 'state="presumed_dead"')
        return f"{dead} >= {rule.min_jobs}"
    most = f'max by ({g}) (ett_fleet_job_restarts_max{{window="{rule.window}"}})'
    return f"{most} > {rule.max_restarts}"


_V = '{{{{ $value | printf "%.0f" }}}}'
_V2 = '{{{{ $value | printf "%.2f" }}}}'
_G, _C = "{{{{ $labels.{g} }}}}", "{{{{ $labels.component }}}}"
_DESCRIPTIONS = {
    Kind.REGRESSION: f"{_C} of {{g}} {_G} over the last {{w}}: more than {{k}}x the rate of its "
    f"{{b}} baseline, +{_V2} job-hours/day (a PromQL approximation of the regression rule)",
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


def approximation_note(rule: Rule) -> str:
    """What the exported PromQL of an approximated rule differs in (its ``approximation``
    annotation and the comment above it in the rules file); empty for an exact rule."""
    if rule.kind not in APPROXIMATED:
        return ""
    if rule.kind in _loop_promql.KINDS:
        return _loop_promql.note(rule)
    return (
        f"PromQL approximation of the built-in {rule.kind.value} rule {rule.name} (ett serve): "
        f"a ratio (the recent rate more than {RATIO:g}x the baseline's) where it runs rank and "
        "Poisson tests; no start-up or save views of running jobs and no checkpoint or "
        "compile strata; no Benjamini-Hochberg; no frozen baseline (it resolves when the ratio "
        "drops, and learns a regression longer than its baseline); the effect floor in "
        "job-hours, not GPU-hours (the series have no GPU count); every component per "
        f"job-hour. See {SECTION}."
    )


def _as_text(text: str) -> str:
    """A rules file's ``summary`` (plain text to the built-in evaluator) as a Prometheus
    template that prints it as written: ``{{ .Bad`` made the exported file one that
    ``promtool check rules`` and Prometheus refuse whole, and its export still said 'wrote'."""
    return text.replace("{{", '{{ "{{" }}')


def prometheus_rule(rule: Rule) -> dict[str, Any]:
    """One Prometheus alerting rule (:class:`NotPromQL` where :func:`has_promql` is False)."""
    if not has_promql(rule):
        raise NotPromQL(not_promql_note(rule))
    labels = {"rule": rule.name, "severity": rule.severity}
    if rule.component is not None:
        labels["component"] = rule.component
    if rule.kind is Kind.ETT_SLO_BURN:
        desc = _burn.description(rule)
    elif rule.kind in _loop_promql.KINDS:
        desc = _loop_promql.description(rule)
    else:
        desc = _DESCRIPTIONS[rule.kind].format(
            g=rule.by.value, w=rule.window, b=rule.baseline, k=f"{RATIO:g}"
        )
    annotations = {"summary": _as_text(rule.summary) or desc, "description": desc}
    note = approximation_note(rule)
    if note:
        annotations["approximation"] = note
    return {
        "alert": rule.name,
        "expr": expression(rule),
        "for": format_duration(rule.for_s),
        "labels": labels,
        "annotations": annotations,
    }


def _comment(text: str, indent: str, width: int = 96) -> str:
    """``text`` as YAML comment lines of at most ``width`` characters."""
    lines, line = [], ""
    for word in text.split():
        if line and len(indent) + 2 + len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "".join(f"{indent}# {x}\n" for x in lines)


def rules_file(rules: RuleSet) -> str:
    """The YAML text of a Prometheus rules file with every enabled rule; an approximated rule
    has a comment above it saying so."""
    import yaml

    skipped = [r for r in rules.enabled() if not has_promql(r)]
    enabled = tuple(r for r in rules.enabled() if has_promql(r))
    doc = {"groups": [{"name": "ett", "rules": [prometheus_rule(r) for r in enabled]}]}
    header = (
        "# Generated by `ett alerts export-prometheus` from the ETT alert rules "
        f"({rules.source.rstrip('!')}); do not edit.\n"
        "# It reads the ett_fleet_* series that `ett serve` exposes on /metrics.\n"
    ) + "".join(_comment(not_promql_note(r), "") for r in skipped)
    body: str = yaml.safe_dump(doc, sort_keys=False, width=10_000)
    for rule in enabled:
        note = approximation_note(rule)
        if not note:
            continue
        line = re.compile(rf"^(\s*)- alert: {re.escape(rule.name)}\n", re.MULTILINE)
        found = line.search(body)
        if found is not None:
            body = body[: found.start()] + _comment(note, found.group(1)) + body[found.start() :]
    return header + body
