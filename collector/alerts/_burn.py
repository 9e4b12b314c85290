"""SLO burn-rate alerts (kind ``ett_slo_burn``): the multi-window, multi-burn-rate test of
Google's SRE workbook over a group's ETT objective, for the built-in evaluator and the backtest
(:func:`findings`) and for Prometheus (:func:`expression`). ``docs/alerts.md`` derives the
thresholds of the shipped examples.

- the error budget of an objective ``o`` (0-1) is ``1 - o``;
- ETT over a window ``W`` = productive / wall seconds summed over the group's jobs in ``W``
  (those that ended, or last reported, in ``(t - W, t]``);
- the burn rate over ``W`` is ``(1 - ETT(W)) / (1 - o)``: 1 spends the budget exactly over the
  SLO period, ``b`` spends it ``b`` times as fast;
- the rule fires when the burn rate is above ``burn_rate`` over both the long and the short
  window, with at least ``min_jobs`` jobs in the long window and a job that trained in the
  short one. A window without wall time has no burn rate, and does not fire; a short window of
  standalone jobs alone (a publishing job, ETT 0 % by construction) says nothing about how the
  training burns now, and does not fire either.

The test is made on ETT: ``burn > b`` is ``ETT < 1 - b (1 - o)`` (:func:`ett_threshold`), one
number that both evaluators compare against, so a figure on the edge falls the same way in
Python and in PromQL (the burn rate itself, a quotient of rounded numbers, need not).

The alert's component label is the fixed ``burn``: a page keeps one identity while it fires,
where a computed component could flip between two close ones and re-fire. The components that
lost the most seconds in the short window (what burns now) and in the long one (where the budget
went) are named in the description and the figures.
"""

from __future__ import annotations

from collections.abc import Collection

from ._conditions import SHOWN_JOBS, Finding, alert_key
from ._fleet import Fleet, WindowSums
from .rules import COMPONENTS, WINDOWS, Rule

COMPONENT = "burn"
"""The ``component`` label of every burn alert."""


def _pct(rule: Rule) -> tuple[float, float]:
    """The objective (percent) and the burn-rate threshold of a validated rule."""
    if rule.objective_pct is None or rule.burn_rate is None:  # pragma: no cover - validated
        raise ValueError(f"rule {rule.name!r}: an ett_slo_burn needs objective_pct and burn_rate")
    return rule.objective_pct, rule.burn_rate


def budget(rule: Rule) -> float:
    """The error budget ``1 - o`` (0-1)."""
    objective, _ = _pct(rule)
    return (100.0 - objective) / 100.0


def ett_threshold(rule: Rule) -> float:
    """The ETT (0-1) below which the budget burns faster than ``burn_rate``: ``1 - b (1 - o)``,
    computed in percentage points so that round figures stay exact (90% and 3x: 0.7)."""
    objective, rate = _pct(rule)
    return (100.0 - rate * (100.0 - objective)) / 100.0


def ett(s: WindowSums) -> float:
    """Productive / wall seconds of a window (NaN without wall time)."""
    return s.productive / s.wall if s.wall > 0 else float("nan")


def burn_rate(rule: Rule, s: WindowSums) -> float:
    """``(1 - ETT) / (1 - o)`` over a window (NaN without wall time)."""
    return (1.0 - ett(s)) / budget(rule)


def _top_lost(s: WindowSums) -> tuple[str, float]:
    """The component that lost the most seconds (ties: first in COMPONENTS), and its share."""
    comp = max(COMPONENTS, key=lambda c: s.lost.get(c, 0.0))
    total = sum(max(v, 0.0) for v in s.lost.values())
    return comp, s.lost.get(comp, 0.0) / total if total > 0 else 0.0


def findings(rule: Rule, fleet: Fleet, t: float, open_keys: Collection[str] = ()) -> list[Finding]:
    """The groups whose budget burns faster than ``burn_rate`` over both windows at ``t``.

    ``open_keys``: the keys of this rule's pending and firing alerts. A short window in which no
    job of an open group trained says nothing about whether the loss goes on, so the alert is
    held while the long window still burns: an SRE probe's page (dlrm-small, ETT 61 to 69 %
    against 70 % for a day) fired and resolved 7 times, each time an hour passed without a job
    ending, a new page and a "resolved" each time. A short window with training in it that
    burns less resolves it, as before."""
    limit = ett_threshold(rule)
    objective, rate = _pct(rule)
    long_s, short_s = WINDOWS[rule.long_window], WINDOWS[rule.short_window]
    by = rule.by.value
    out = []
    for key in fleet.groups(rule.by):
        long = fleet.sums(rule.by, key, t, long_s)
        if long.jobs < rule.min_jobs or not ett(long) < limit:
            continue
        short = fleet.sums(rule.by, key, t, short_s)
        # a standalone publishing job alone (ETT 0 %) says no training burns now; nor does an
        # empty short window (no ETT), which holds an open alert as it is
        trained = any(j.trained for j in fleet.members(rule.by, key, t, short_s))
        labels = {"rule": rule.name, by: key, "component": COMPONENT, "severity": rule.severity}
        held = not trained and alert_key(labels) in open_keys
        if not held and not (trained and ett(short) < limit):
            continue
        now, recent = burn_rate(rule, long), burn_rate(rule, short)
        recent_text = "no job trained, held" if held else f"{recent:.1f}x"
        comp, share = _top_lost(short)
        long_comp, long_share = _top_lost(long)
        members = fleet.members(rule.by, key, t, long_s)
        worst = sorted(members, key=lambda j: (-(j.wall - j.productive), j.job_id))
        desc = (
            f"ETT of {by} {key} {100 * ett(long):.1f}% over {rule.long_window} burns the "
            f"{objective:g}% objective's budget {now:.1f}x ({rule.short_window}: {recent_text}; "
            f"threshold {rate:g}x); most lost time in {comp} over {rule.short_window} "
            f"({100 * share:.0f}%), in {long_comp} over {rule.long_window} "
            f"({100 * long_share:.0f}%)"
        )
        figures = {
            "objective_pct": objective,
            "burn_rate_threshold": rate,
            "long_window": rule.long_window,
            "short_window": rule.short_window,
            "ett_pct": 100 * ett(long),
            "short_ett_pct": None if held else 100 * ett(short),
            "burn_rate": now,
            "short_burn_rate": None if held else recent,
            "held": held,
            "long_jobs": long.jobs,
            "short_jobs": short.jobs,
            "top_component": comp,
            "top_component_lost_s": short.lost.get(comp, 0.0),
            "long_top_component": long_comp,
            "long_top_component_lost_s": long.lost.get(long_comp, 0.0),
        }
        jobs = tuple(j.job_id for j in worst[:SHOWN_JOBS])
        out.append(Finding(rule, labels, now, None, jobs, desc, figures))
    return out


def _sum(metric: str, window: str, by: str) -> str:
    from .prometheus import fleet_sum

    return fleet_sum(metric, by, f'window="{window}"')


def _ett_expr(window: str, by: str) -> str:
    return f"({_sum('productive_seconds', window, by)} / {_sum('wall_seconds', window, by)})"


def expression(rule: Rule) -> str:
    """The PromQL of the condition; its value is the long window's burn rate. Thresholds are
    written with ``repr`` so that Prometheus reads back the very numbers Python compares to.

    The hold of :func:`findings` reads the rule's own ``ALERTS`` series (pending or firing at
    the previous evaluation): a group whose long window burns, with no job that trained in the
    short window, stays in the result while its alert is open. Where no ``ALERTS`` series of
    this name exists (a Grafana-managed rule over a Prometheus that does not run the export),
    that term is empty and the expression is the stateless one."""
    g, lw, sw = rule.by.value, rule.long_window, rule.short_window
    limit = repr(ett_threshold(rule))
    long_ett, short_ett = _ett_expr(lw, g), _ett_expr(sw, g)
    trained = f"({_sum('training_jobs', sw, g)} >= 1)"
    burns_now = f"(({short_ett} < {limit}) and on ({g}) {trained})"
    held = f'(ALERTS{{alertname="{rule.name}"}} unless on ({g}) {trained})'
    return (
        f"((1 - {long_ett}) / {budget(rule)!r})"
        f" and on ({g}) ({long_ett} < {limit})"
        f" and on ({g}) ({_sum('jobs', lw, g)} >= {rule.min_jobs})"
        f" and on ({g}) ({burns_now} or {held})"
    )


def description(rule: Rule) -> str:
    """The Prometheus annotation (a template: ``$value`` is the long window's burn rate)."""
    objective, rate = _pct(rule)
    g = rule.by.value
    return (
        f"ETT of {g} {{{{ $labels.{g} }}}} over {rule.long_window} burns the {objective:g}% "
        f'objective\'s budget {{{{ $value | printf "%.1f" }}}}x, above {rate:g}x over both '
        f"{rule.long_window} and {rule.short_window} (held on {rule.long_window} alone while no "
        f"job trains in {rule.short_window})"
    )
