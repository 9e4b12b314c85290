"""Each rule's condition at one instant, over the fleet: the findings (would-be alerts).

The formulas are those of the Prometheus export (``prometheus.py``), over the same windowed
figures, so both evaluators agree:

- ETT = productive / wall seconds summed over the group's jobs in the window;
- a rate is seconds per job-hour: ``3600 * seconds / wall``;
- the baseline is the baseline window's sums less the recent window's;
- a regression's component (when the kind does not fix one) is the one whose lost seconds per
  job-hour grew most from the baseline to the recent window.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._fleet import Fleet, JobFacts, WindowSums, max_restarts
from .rules import COMPONENTS, Kind, Rule

SHOWN_JOBS = 5
"""How many jobs an alert lists (worst first)."""


@dataclass(frozen=True)
class Finding:
    """A rule's condition holding for one label set at one instant."""

    rule: Rule
    labels: dict[str, str]
    value: float
    baseline: float | None
    jobs: tuple[str, ...]
    description: str
    figures: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The identity of the alert: its labels, canonical."""
        return alert_key(self.labels)


OpenAlert = tuple[Mapping[str, str], Mapping[str, Any]]
"""``(labels, figures)`` of a pending or firing alert of a rule."""


def labels_of(rule: Rule, key: str, component: str) -> dict[str, str]:
    """The labels of one alert of ``rule``: its group ``key`` and ``component``."""
    return {
        "rule": rule.name,
        rule.by.value: key,
        "component": component,
        "severity": rule.severity,
    }


def alert_key(labels: Mapping[str, str]) -> str:
    """The canonical key of a label set (:attr:`Finding.key`)."""
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def held_open(rule: Rule, labels: Mapping[str, str], figures: Mapping[str, Any]) -> Finding:
    """An open alert whose group has too few jobs to test now (no evidence that the change is
    gone): kept, with the figures it was last found with."""
    kept = dict(figures)
    return Finding(
        rule=rule,
        labels=dict(labels),
        value=float(kept.get("recent_value") or 0.0),
        baseline=kept.get("baseline_value"),
        jobs=tuple(kept.get("jobs") or ()),
        description=str(kept["description"]),
        figures=kept,
    )


def _rate(seconds: float, wall: float) -> float:
    return 3600.0 * seconds / wall if wall > 0 else float("nan")


def _ett(s: WindowSums) -> float:
    return s.productive / s.wall if s.wall > 0 else float("nan")


def _enough(rule: Rule, recent: WindowSums, base: WindowSums) -> bool:
    return recent.jobs >= rule.min_jobs and base.jobs >= rule.min_baseline_jobs


def _top_component(recent: WindowSums, base: WindowSums) -> tuple[str, float]:
    """The component whose lost seconds per job-hour grew most (ties: first in COMPONENTS)."""
    best, grow = COMPONENTS[0], float("-inf")
    for c in COMPONENTS:
        g = _rate(recent.lost.get(c, 0.0), recent.wall) - _rate(base.lost.get(c, 0.0), base.wall)
        if g > grow:
            best, grow = c, g
    return best, grow


def _worst(jobs: list[JobFacts], score: Any) -> tuple[str, ...]:
    ranked = sorted(jobs, key=lambda j: (-score(j), j.job_id))
    return tuple(j.job_id for j in ranked[:SHOWN_JOBS])


def evaluate(
    rule: Rule,
    fleet: Fleet,
    t: float,
    live: bool = True,
    active: Mapping[tuple[str, str], Any] | None = None,
) -> list[Finding]:
    """The findings of ``rule`` at ``t``. ``live`` False (the backtest) skips live-only kinds.
    ``active``: the pending and firing alerts before ``t`` by ``(rule, key)`` (the regression
    kind keeps an open incident's baseline and onset in its ``figures``)."""
    mine: dict[str, OpenAlert] = {
        key: (alert.labels, alert.figures)
        for (name, key), alert in (active or {}).items()
        if name == rule.name
    }
    if rule.kind is Kind.REGRESSION:
        from ._detect import detect  # _detect imports this module

        return detect(rule, fleet, t, mine)
    if rule.kind is Kind.ETT_SLO_BURN:
        from ._burn import findings  # _burn imports this module (Finding)

        return findings(rule, fleet, t, mine.keys())
    if rule.kind in (Kind.THROUGHPUT_REGRESSION, Kind.STRAGGLER):
        from ._perf import straggler_findings, throughput_findings  # _perf imports this module

        if rule.kind is Kind.STRAGGLER:
            return straggler_findings(rule, fleet, t)
        return throughput_findings(rule, fleet, t, mine)
    if rule.kind is Kind.PRESUMED_DEAD:
        return _presumed_dead(rule, fleet) if live else []
    if rule.kind is Kind.RESTART_STORM:
        return _restart_storm(rule, fleet, t)
    out: list[Finding] = []
    for key in fleet.groups(rule.by):
        recent = fleet.sums(rule.by, key, t, rule.window_s)
        if recent.jobs < rule.min_jobs:
            continue
        base = fleet.sums(rule.by, key, t, rule.baseline_s).minus(recent)
        out.extend(_regression(rule, fleet, key, t, recent, base))
    return out


@dataclass(frozen=True)
class _Window:
    """One group of a windowed kind at ``t``: its sums over the recent window and the
    baseline before it."""

    rule: Rule
    fleet: Fleet
    key: str
    t: float
    recent: WindowSums
    base: WindowSums

    def members(self) -> list[JobFacts]:
        """The group's jobs of the recent window."""
        return self.fleet.members(self.rule.by, self.key, self.t, self.rule.window_s)

    def figures(self, **more: Any) -> dict[str, Any]:
        """The figures every windowed finding carries, then ``more``."""
        return {
            "recent_jobs": self.recent.jobs,
            "baseline_jobs": self.base.jobs,
            "window": self.rule.window,
            "baseline_window": self.rule.baseline,
            **more,
        }


def _regression(
    rule: Rule, fleet: Fleet, key: str, t: float, recent: WindowSums, base: WindowSums
) -> list[Finding]:
    w = _Window(rule, fleet, key, t, recent, base)
    if rule.kind is Kind.ETT_REGRESSION:
        return _ett_drop(w)
    if not _enough(rule, recent, base):
        return []
    if rule.kind is Kind.COMPONENT_REGRESSION:
        return _component_rise(w)
    if rule.kind is Kind.TTS_REGRESSION:
        return _tts_rise(w)
    return _blocking_rise(w)


def _ett_drop(w: _Window) -> list[Finding]:
    rule, recent, base = w.rule, w.recent, w.base
    now_ett, then_ett = _ett(recent), _ett(base)
    fired = False
    if rule.drop_points is not None and _enough(rule, recent, base):
        fired = now_ett < then_ett - rule.drop_points / 100.0
    if rule.slo_pct is not None:
        fired = fired or now_ett < rule.slo_pct / 100.0
    if not fired:
        return []
    comp, grow = _top_component(recent, base)
    jobs = _worst(w.members(), lambda j: -(j.productive / j.wall if j.wall > 0 else 1.0))
    baseline = then_ett if base.wall > 0 else None
    against = (
        f"against {100 * then_ett:.1f}% before it ({rule.baseline} baseline)"
        if baseline is not None
        else "(no baseline)"
    )
    slo = f", SLO {rule.slo_pct:g}%" if rule.slo_pct is not None else ""
    desc = (
        f"ETT of {rule.by.value} {w.key} over the last {rule.window} is {100 * now_ett:.1f}% "
        f"{against}{slo}; lost time grew most in {comp} (+{grow:.0f} s per job-hour)"
    )
    figures = w.figures(
        ett_pct=100 * now_ett,
        baseline_ett_pct=None if baseline is None else 100 * then_ett,
        component_increase_s_per_hour=grow,
    )
    return [Finding(rule, labels_of(rule, w.key, comp), now_ett, baseline, jobs, desc, figures)]


def _component_rise(w: _Window) -> list[Finding]:
    rule, recent, base = w.rule, w.recent, w.base
    out = []
    for comp in rule.components:
        now_r = _rate(recent.lost.get(comp, 0.0), recent.wall)
        then_r = _rate(base.lost.get(comp, 0.0), base.wall)
        if not _grew(rule, now_r, then_r):
            continue
        jobs = _worst(w.members(), lambda j, c=comp: j.lost.get(c, 0.0) / max(j.wall, 1e-9))
        desc = (
            f"{comp} lost {now_r:.0f} s per job-hour of {rule.by.value} {w.key} over the last "
            f"{rule.window}, against {then_r:.0f} s before it ({rule.baseline} baseline)"
        )
        figures = w.figures(rate_s_per_hour=now_r, baseline_s_per_hour=then_r)
        labels = labels_of(rule, w.key, comp)
        out.append(Finding(rule, labels, now_r, then_r, jobs, desc, figures))
    return out


def _tts_rise(w: _Window) -> list[Finding]:
    rule, recent, base = w.rule, w.recent, w.base
    if recent.tts_n < 1 or base.tts_n < 1:
        return []
    now_m, then_m = recent.tts_sum / recent.tts_n, base.tts_sum / base.tts_n
    if not _grew(rule, now_m, then_m):
        return []
    comp, _ = _top_component(recent, base)
    jobs = _worst(w.members(), lambda j: j.tts or 0.0)
    desc = (
        f"mean time to start of {rule.by.value} {w.key} over the last {rule.window} is "
        f"{now_m:.0f} s against {then_m:.0f} s before it ({rule.baseline} baseline); lost "
        f"time grew most in {comp}"
    )
    figures = w.figures(tts_mean_s=now_m, baseline_tts_mean_s=then_m)
    return [Finding(rule, labels_of(rule, w.key, comp), now_m, then_m, jobs, desc, figures)]


def _blocking_rise(w: _Window) -> list[Finding]:
    rule, recent, base = w.rule, w.recent, w.base
    now_r, then_r = _rate(recent.blocking, recent.wall), _rate(base.blocking, base.wall)
    if not _grew(rule, now_r, then_r):
        return []
    jobs = _worst(w.members(), lambda j: j.blocking / max(j.wall, 1e-9))
    desc = (
        f"checkpoints blocked training {now_r:.0f} s per job-hour for {rule.by.value} {w.key} "
        f"over the last {rule.window}, against {then_r:.0f} s before it ({rule.baseline} "
        "baseline)"
    )
    figures = w.figures(rate_s_per_hour=now_r, baseline_s_per_hour=then_r)
    labels = labels_of(rule, w.key, rule.component or "checkpoint")
    return [Finding(rule, labels, now_r, then_r, jobs, desc, figures)]


def _grew(rule: Rule, now: float, then: float) -> bool:
    """The regression test of the rate and mean kinds (False on NaN)."""
    return now > then * (1 + rule.increase_pct / 100.0) and now - then >= rule.min_increase


def _presumed_dead(rule: Rule, fleet: Fleet) -> list[Finding]:
    out = []
    for key in fleet.groups(rule.by):
        dead = fleet.live(rule.by, key, "presumed_dead")
        if len(dead) < rule.min_jobs:
            continue
        jobs = tuple(j.job_id for j in sorted(dead, key=lambda j: j.end)[:SHOWN_JOBS])
        desc = f"{len(dead)} job(s) of {rule.by.value} {key} presumed dead (no span for 3 windows)"
        labels = labels_of(rule, key, rule.component or "failure")
        out.append(Finding(rule, labels, float(len(dead)), None, jobs, desc, {"jobs": len(dead)}))
    return out


def _restart_storm(rule: Rule, fleet: Fleet, t: float) -> list[Finding]:
    out = []
    for key in fleet.groups(rule.by):
        n, who = max_restarts(fleet.members(rule.by, key, t, rule.window_s), t, rule.window_s)
        if n <= rule.max_restarts or who is None:
            continue
        desc = (
            f"job {who} of {rule.by.value} {key} restarted {n} times in the last {rule.window} "
            f"(more than {rule.max_restarts})"
        )
        labels = labels_of(rule, key, rule.component or "failure")
        out.append(Finding(rule, labels, float(n), None, (who,), desc, {"restarts": n}))
    return out
