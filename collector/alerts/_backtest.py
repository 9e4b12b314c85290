"""Backtests: the rules replayed over stored history, to see what would have fired and when.

The replay walks the same states as the evaluator (:func:`advance`) over the same conditions,
at every instant where a condition can change: a job's end (it enters a window), a job's end
plus a window's length (it leaves it), the same for restart allocations, first batches (a
first start-up is whole) and checkpoint saves' ends (a save is whole), and those instants
plus each rule's ``for:`` (a pending alert may fire). Between them every figure is constant, so
the replay is exact for the jobs as they are stored now, and a firing is reported at the
instant its last job ended (the live evaluator, ticking every ``--alert-interval``, fires at most
one interval later). ``presumed_dead`` is a live condition and is not replayed.

A backtest starts its walk the rules' reach before ``since`` (:func:`replay_from`), as the live
evaluator's catch-up and its replay of late history do: a change already under way at ``since``
is then found from its own onset against the baseline before it, and listed with its own firing
time, marked as before the window, instead of firing at ``since`` against a baseline that holds
it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from ._conditions import Finding, evaluate
from ._fleet import Fleet, JobFacts, load_facts
from ._state import Alert, AlertState, advance
from .rules import WINDOWS, RuleSet


# kept alike: Finding (_conditions.py) is a live condition, Firing its replayed outcome
@dataclass(frozen=True)
class Firing:
    """One alert that would have fired."""

    rule: str
    labels: dict[str, str]
    fired_at: float
    resolved_at: float | None
    value: float | None
    baseline: float | None
    jobs: tuple[str, ...]
    description: str
    before_window: bool = False
    """Whether it fired before the backtest's window (``--since``) and was still firing when
    the window began: its ``fired_at`` is when it fired, found by the walk before the window."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``ett alerts backtest --json``."""
        return {
            "rule": self.rule,
            "labels": dict(self.labels),
            "fired_at": self.fired_at,
            "resolved_at": self.resolved_at,
            "before_window": self.before_window,
            "value": self.value,
            "baseline": self.baseline,
            "jobs": list(self.jobs),
            "description": self.description,
        }


def replay_from(t: float) -> float:
    """Where a walk of the rules starts that must hold at ``t`` the incidents the live
    evaluator would (it has walked the history): the rules' reach before ``t``, their longest
    window (7 days), so that a change whose onset lies in it is found from its own jobs against
    the baseline before them. The evaluator's catch-up and its replay of late history start
    there, and so does a backtest's walk before its ``since``."""
    return t - max(WINDOWS.values())


def reach(t: float, active: Mapping[tuple[str, str], Alert]) -> float:
    """Since when the jobs must be read to evaluate at ``t``: the rules' longest window back,
    and further for an open incident whose frozen baseline (``figures.baseline_until``, the
    baseline window before it) lies further back. Reading only a week back, the frozen baseline
    of an incident open for days lost its oldest jobs at every evaluation, until too few were
    left to test and the incident could no longer resolve (a fixed regression kept firing),
    where the backtest, reading from its start's week before, resolved it."""
    horizon = max(WINDOWS.values())
    frozen = (
        float(a.figures["baseline_until"])
        for a in active.values()
        if isinstance(a.figures.get("baseline_until"), int | float)
    )
    return min([t, *frozen]) - horizon


def instants(jobs: list[JobFacts], rules: RuleSet, since: float, until: float) -> list[float]:
    """Every instant in ``[since, until]`` where a rule's condition or state can change."""
    lengths = {0.0} | {WINDOWS[r.window] for r in rules.enabled()}
    lengths |= {WINDOWS[r.baseline] for r in rules.enabled()}
    lengths |= {WINDOWS[w] for r in rules.enabled() for w in r.windows}  # SLO burn: long, short
    fors = {0.0} | {r.for_s for r in rules.enabled()}
    points: set[float] = {since, until}
    for j in jobs:
        firsts = () if j.first_batch is None else (j.first_batch,)
        for x in (j.end, *j.restarts, *firsts, *(end for end, _ in j.saves)):
            for w in lengths:
                for f in fors:
                    t = x + w + f
                    if since <= t <= until:
                        points.add(t)
    return sorted(points)


def replay(
    jobs: list[JobFacts],
    rules: RuleSet,
    since: float,
    until: float,
    step_s: float | None = None,
    warm_from: float | None = None,
) -> list[Firing]:
    """What ``rules`` would have fired in ``[since, until]`` over ``jobs``, by firing time.
    ``step_s`` adds a regular grid of instants to the event instants. ``warm_from`` (before
    ``since``): the walk starts there; what fired and resolved before ``since`` is left out,
    and what fired before it and was still firing then is listed with its own firing time
    (:attr:`Firing.before_window`)."""
    fleet = Fleet(jobs)
    start = since if warm_from is None else min(warm_from, since)
    points = set(instants(jobs, rules, start, until))
    if step_s:
        t = since
        while t < until:
            points.add(t)
            t += step_s
    fired: dict[tuple[str, str, float], Alert] = {}
    descriptions: dict[tuple[str, str], str] = {}
    for _, findings, changed in walk(fleet, rules, sorted(points), {}):
        for f in findings:
            descriptions[(f.rule.name, f.key)] = f.description
        for a in changed:
            if a.fired_at is not None:
                fired[(a.rule, a.key, a.fired_at)] = a
    out = [
        Firing(
            rule=a.rule,
            labels=a.labels,
            fired_at=a.fired_at or 0.0,
            resolved_at=a.resolved_at,
            value=a.value,
            baseline=a.baseline,
            jobs=a.jobs,
            description=a.annotations.get("description", descriptions.get(a.identity, "")),
            before_window=(a.fired_at or 0.0) < since,
        )
        for a in fired.values()
        if a.resolved_at is None or a.resolved_at > since
    ]
    out.sort(key=lambda f: (f.fired_at, f.rule, sorted(f.labels.items())))
    return out


def walk(
    fleet: Fleet,
    rules: RuleSet,
    points: Iterable[float],
    active: dict[tuple[str, str], Alert],
    dashboard_url: str = "",
) -> Iterator[tuple[float, list[Finding], list[Alert]]]:
    """The replayable rules evaluated at each of ``points`` in turn, as the evaluator would:
    yields each instant with its findings and changed alerts, keeping ``active`` (the pending
    and firing alerts) up to date in place (a caller may also replace its contents between
    instants: the evaluator's catch-up puts the stored alerts, with their ids, back in)."""
    replayed = [r for r in rules.enabled() if r.replayable]
    for t in points:
        findings = [f for r in replayed for f in evaluate(r, fleet, t, False, active)]
        changed = advance(active, findings, t, dashboard_url)
        for a in changed:
            if a.state in (AlertState.PENDING, AlertState.FIRING):
                active[a.identity] = a
            else:
                active.pop(a.identity, None)
        yield t, findings, changed


def held_open(
    jobs: list[JobFacts], rules: RuleSet, since: float, until: float, dashboard_url: str = ""
) -> dict[tuple[str, str], Alert]:
    """The alerts a replay of ``[since, until]`` over ``jobs`` holds pending or firing at
    ``until``: what the backtest says is open now."""
    active: dict[tuple[str, str], Alert] = {}
    for _ in walk(Fleet(jobs), rules, instants(jobs, rules, since, until), active, dashboard_url):
        pass
    return active


def backtest(
    engine: Engine, rules: RuleSet, since: float, until: float, step_s: float | None = None
) -> list[Firing]:
    """:func:`replay` over the jobs stored in ``engine`` (those that could be in a window), its
    walk started at :func:`replay_from` ``since``: the firings of ``[since, until]``, those that
    fired before ``since`` and were still firing then among them. Without that walk, a backtest
    that began in the middle of an incident fired it at its own start, judged against a baseline
    that already held the change (a probe: x5 planted two days before ``--since 2d``, fired
    2.8 h after it, "3.6x since" a day after the onset; the same fleet walked from its start
    fired a day after the onset, 4.6x)."""
    start = replay_from(since)
    jobs = [j for j in load_facts(engine, reach(start, {})) if j.end <= until]
    return replay(jobs, rules, since, until, step_s, warm_from=start)
