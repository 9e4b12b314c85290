"""The ``regression`` rule: a component of a model (or team) that costs more than it did, found
by a test that knows the quantity's noise, not by a threshold on a ratio of two small samples.

At an instant ``t``, for each group and each watched quantity, the recent jobs (those that ended,
or last reported, in ``(t - window, t]``) are compared with the baseline jobs (the ``baseline``
before the recent window):

- each component's lost seconds per job-hour of the training jobs, with a one-sided rank test
  (Mann-Whitney); the ``publish`` component over the standalone publishing jobs, in seconds per
  job;
- the failures per training hour, with the exact conditional test of two Poisson rates
  (component ``failure``).

A fresh change is scanned: the test also runs on the newest 3, 5, 8, ... jobs of the window, the
smallest p-value kept under a weighted Bonferroni correction (:func:`weighted_scan`), so a change
that began inside the window is not diluted by the jobs before it. Only jobs that ended are
samples (:meth:`Window.ended`), except in the start-up view of :data:`STARTUP_VIEW`'s components,
whose samples are the first start-ups of the jobs that reached their first batch. Every p-value
of the evaluation goes through Benjamini-Hochberg; a change fires when its q-value is at most
``fdr`` **and** it costs at least ``min_gpu_hours_per_day`` more than the baseline rate would
(the effect floor). One incident is one (group, component): the ETT, time to start and
checkpoint blocking of the same jobs, and the teams they belong to, are its annotations, not
alerts of their own. Once firing, an incident keeps the baseline it was found against (the
``baseline_until`` of its figures) and resolves only when the recent jobs no longer differ from
that baseline (uncorrected ``p > resolve_p``) or its cost falls under half the floor, in every
view of its component that can be tested (:func:`_judged`): one noisy window does not resolve
it, and a lasting regression does not become its own baseline.

Pure: the state of the firing incidents comes in (``active``), so the live evaluator and the
backtest walk the same steps.
"""

from __future__ import annotations

import copy
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from ._conditions import Finding, OpenAlert, alert_key, held_open, labels_of
from ._fleet import Fleet, JobFacts, Save, Window
from ._lognormal import StratifiedLogBaseline
from ._stats import (
    RankBaseline,
    StratifiedRankBaseline,
    benjamini_hochberg,
    poisson_rate_greater,
    rank_test_greater,
    rank_test_less,
)
from .rules import Rule

FAILURE = "failure"
PUBLISH = "publish"
SHOWN_JOBS = 5
DAY = 86400.0


UNITS = {
    "training": "s per job-hour",
    "publishing": "s per job",
    "startups": "s per first start-up",
    "saves": "s per checkpoint save",
    "failures": "failures per training hour",
}
"""The unit of each population's values."""

STARTUP_VIEW = frozenset(
    {"scheduler", "runtime", "comms", "model", "sharding", "compile", "data", "other"}
)
"""Components of a first start-up, tested twice: per job-hour of the jobs that ended, and per
first start-up of the jobs that reached their first batch (running ones too), the smaller
p-value kept under Bonferroni (doubled). A start-up is whole minutes into a job that may run
for hours, and its seconds are not divided by the job's length, so a slower start-up shows
in the jobs that started after it, long before they end."""


STARTUP_LOG_LEAST = 3
"""The smallest suffix of first start-ups the log-normal test (``startup_test: lognormal``)
scans: one or two start-ups far out in a tail the log-normal model lacks (a 220 s ``model``
start-up against a baseline median of 27 s, on a flat simulated fleet) fired alone from a
suffix of one; three, each above its stratum's baseline median, are needed."""


def _checkpoint_mode(j: JobFacts) -> str:
    return j.checkpoint_mode or "unknown"


def _compile_cache(j: JobFacts) -> str:
    return j.compile_cache or "unknown"


STRATA: dict[str, Callable[[JobFacts], str]] = {
    "checkpoint": _checkpoint_mode,
    "compile": _compile_cache,
}
"""Components whose jobs are of kinds that differ by more than any change the rule should
wait for: ``checkpoint`` (sync saves block ~7x longer than async ones; ``ett.checkpoint.mode``)
and ``compile`` (a start-up compile with a cold cache takes ~8x one with a warm cache: the
first attempt's ``ett.compile.cache``). Their rank test is stratified
(:class:`StratifiedRankBaseline`) in each view of jobs (per job-hour and per first start-up): a
job is ranked among the baseline jobs of its own kind, so an async job whose saves tripled, or
a warm-cache compile that tripled, is not hidden among the other kind's jobs."""


def _end(j: JobFacts) -> float:
    return j.end


def _first_batch(j: JobFacts) -> float:
    return j.first_batch if j.first_batch is not None else j.end


@dataclass(frozen=True)
class Test:
    """One quantity of one group compared at one instant."""

    key: str
    component: str
    p: float
    excess_gpu_h_per_day: float
    ratio: float
    recent_value: float
    baseline_value: float
    recent: tuple[JobFacts, ...]
    baseline: tuple[JobFacts, ...]
    baseline_until: float
    value_of: Callable[[JobFacts], float]
    varies: bool
    """Whether the pooled values differ at all: a quantity that is the same in every job (a
    component no job was charged) cannot show a change and is left out of the family."""
    population: str
    """A key of :data:`UNITS`: what one job's value is."""
    when: Callable[[JobFacts], float] = _end
    """The instant a job became a sample (its end; its first batch for ``startups``): the
    order of the scan and of the change point."""
    samples: tuple[int, int] | None = None
    """``(recent, baseline)`` samples when they are not jobs (``saves``)."""
    shown: tuple[JobFacts, ...] = ()
    """The jobs that show the change, worst first, when the samples are not jobs."""
    change_point: Callable[[], float] | None = None
    """The onset, when the samples are not jobs (computed only for an alert that fires)."""
    stratum: Callable[[JobFacts], str] | None = None
    """The kind of job each recent job was ranked and costed among, when the test was
    stratified (:data:`STRATA`): its baseline value is its own kind's."""
    costs_all: bool = True
    """Whether a cost under half the floor resolves an open incident judged on it: false for a
    view of first start-ups or saves (part of the component's cost) judged while the per-job
    view cannot be tested (:func:`_judged`)."""


def _rate_of(component: str) -> Callable[[JobFacts], float]:
    def rate(j: JobFacts) -> float:
        return j.rates[component]

    return rate


def _seconds_of(component: str) -> Callable[[JobFacts], float]:
    def seconds(j: JobFacts) -> float:
        return j.lost.get(component, 0.0)

    return seconds


def _startup_of(component: str) -> Callable[[JobFacts], float]:
    def seconds(j: JobFacts) -> float:
        return j.startup.get(component, 0.0)

    return seconds


def _pooled(jobs: Sequence[JobFacts], component: str) -> float:
    """Lost seconds of ``component`` per job-hour over ``jobs``."""
    wall = sum([j.hours for j in jobs])
    return sum([j.lost.get(component, 0.0) for j in jobs]) / wall if wall > 0 else 0.0


def _values(jobs: Sequence[JobFacts], c: str, population: str) -> list[float]:
    """The value of component ``c`` of each job, as ``_component_test`` tests it: seconds per
    job-hour (``training``), seconds of the first start-up (``startups``), seconds per job
    (``publishing``). Written out, not through ``value_of``: a replay reads every baseline
    job's value at every instant where a window of its group moved."""
    if population == "training":
        return [j.rates[c] for j in jobs]
    if population == "startups":
        return [j.startup.get(c, 0.0) for j in jobs]
    return [j.lost.get(c, 0.0) for j in jobs]


def _ratio(now: float, then: float) -> float:
    if then > 0:
        return now / then
    return math.inf if now > 0 else 1.0


def suffix_sizes(n: int, least: int) -> list[int]:
    """The sizes of the newest-jobs suffixes a fresh change is scanned over: ``least``, then
    half as many again each time (3, 5, 8, 12, ...), and all ``n``; a geometric ladder, so the
    Bonferroni factor of the scan (its length) grows with the log of the window's jobs."""
    sizes, k = {n}, least
    while k < n:
        sizes.add(k)
        k = math.ceil(k * 1.5)
    return sorted(sizes)


WHOLE_WINDOW_WEIGHT = 0.75
"""The share of a test's level spent on the whole recent window; the rest is split evenly over
the shorter suffixes of the scan (a weighted Bonferroni): a change that fills the window loses
only a factor 4/3 of significance to the scan, and one that began inside it needs to be strong
enough to stand out of the few jobs after its onset anyway."""


def weighted_scan(ps: Sequence[float], sizes: Sequence[int]) -> tuple[float, int]:
    """The scan's p-value and the suffix size it came from: ``ps[i]`` of suffix ``sizes[i]``
    (the last one the whole window), each divided by its weight, the smallest kept."""
    if len(sizes) == 1:
        return min(1.0, ps[0]), sizes[0]
    share = (1.0 - WHOLE_WINDOW_WEIGHT) / (len(sizes) - 1)
    weights = [share] * (len(sizes) - 1) + [WHOLE_WINDOW_WEIGHT]
    p, k = min(
        ((q / w, n) for q, w, n in zip(ps, weights, sizes, strict=True)),
        key=lambda pk: (pk[0], -pk[1]),
    )
    return min(1.0, p), k


def _scanned(
    make: Callable[[Sequence[JobFacts]], Test], recent: Sequence[JobFacts], least: int
) -> Test:
    """The most significant of ``make`` over the newest suffixes of ``recent`` (by end), by the
    weighted Bonferroni of :func:`weighted_scan` (the scan stays a valid test). A change that began
    inside the window is tested on the jobs after it, undiluted by those before it; one that
    fills the window is tested on all of them."""
    jobs = sorted(recent, key=lambda j: (j.end, j.job_id))
    sizes = suffix_sizes(len(jobs), least)
    tries = [make(jobs[len(jobs) - k :]) for k in sizes]
    p, k = weighted_scan([x.p for x in tries], sizes)
    return replace(tries[sizes.index(k)], p=p)


def _component_test(
    rule: Rule,
    key: str,
    c: str,
    recent: Sequence[JobFacts],
    base: Sequence[JobFacts],
    until: float,
    scan: bool,
    population: str = "training",
) -> Test | None:
    """The rank test of component ``c`` of the recent jobs against the baseline's (scanned over
    the newest suffixes when ``scan``): seconds per job-hour of the training jobs, seconds per
    job of the standalone ones (``publish``), seconds of the first start-up (``startups``: the
    jobs are those that reached their first batch in the windows), stratified for the
    components of :data:`STRATA`. With ``test: lognormal`` (``startup_test`` for the start-up
    view) the predictive t-test of the log values instead, stratified the same way and scanned
    from one job (from :data:`STARTUP_LOG_LEAST` start-ups in the start-up view), where
    :meth:`StratifiedLogBaseline.fitted`."""
    trained = population != "publishing"  # publish: the standalone publishing jobs
    rj = [j for j in recent if j.trained is trained]
    bj = [j for j in base if j.trained is trained]
    if len(rj) < rule.min_jobs or len(bj) < rule.min_baseline_jobs:
        return None
    days = rule.window_s / DAY
    per_hour = population == "training"
    when = _first_batch if population == "startups" else _end
    if per_hour:  # seconds per job-hour
        value_of = _rate_of(c)
        then = _pooled(bj, c)
    else:  # seconds per job, or per first start-up
        value_of = _startup_of(c) if population == "startups" else _seconds_of(c)
    ys = _values(bj, c, population)
    if not per_hour:
        then = sum(ys) / len(bj)
    newest = sorted(rj, key=lambda j: (when(j), j.job_id), reverse=True)
    xs = _values(newest, c, population)
    stratum = STRATA.get(c)
    chosen = rule.startup_test if population == "startups" else rule.test
    base_kinds: list[tuple[str, float]] = []
    recent_kinds: list[tuple[str, float]] = []
    if stratum is not None or chosen == "lognormal":  # the plain rank test needs no kinds
        kind = stratum or (lambda j: "")
        base_kinds = [(kind(j), y) for j, y in zip(bj, ys, strict=True)]
        recent_kinds = [(kind(j), x) for j, x in zip(newest, xs, strict=True)]
    logs = None
    if chosen == "lognormal":
        logs = StratifiedLogBaseline.fitted(base_kinds, recent_kinds)
    if logs is None:
        least = rule.min_jobs
    else:
        least = STARTUP_LOG_LEAST if population == "startups" else StratifiedLogBaseline.least
    sizes = suffix_sizes(len(newest), least) if scan else [len(newest)]
    if logs is not None:
        ps = logs.scan(recent_kinds, sizes)
    elif stratum is not None:
        ps = StratifiedRankBaseline(base_kinds).scan(recent_kinds, sizes)
    else:
        ps = RankBaseline(ys).scan(xs, sizes)
    p, k = weighted_scan(ps, sizes)
    part, mine = newest[:k], xs[:k]
    # each recent job against its own stratum's baseline; one whose stratum the baseline
    # lacks is no evidence, of the test (StratifiedRankBaseline) or of the cost
    if stratum is None:
        known = [(j, x, then) for j, x in zip(part, mine, strict=True)]
    else:
        own = _own_baselines(stratum, bj, ys, c, per_hour)
        kinds = [stratum(j) for j in part]
        known = [(j, x, own[s]) for j, x, s in zip(part, mine, kinds, strict=True) if s in own]
    if per_hour:
        hours = sum(j.hours for j, _, _ in known)
        now = _pooled([j for j, _, _ in known], c)
        if stratum is not None and hours > 0:
            then = sum(e * j.hours for j, _, e in known) / hours
        extra = sum((j.lost.get(c, 0.0) - e * j.hours) * j.gpus for j, _, e in known)
    else:
        now = sum(x for _, x, _ in known) / len(known) if known else 0.0
        if stratum is not None and known:
            then = sum(e for _, _, e in known) / len(known)
        extra = sum((x - e) * j.gpus for j, x, e in known)
    first = ys[0]  # whether any value differs (the first that does ends the pass)
    varies = any(y != first for y in ys) or any(x != first for x in mine)
    return Test(
        key=key,
        component=c,
        p=p,
        excess_gpu_h_per_day=extra / 3600.0 / days,
        ratio=_ratio(now, then),
        recent_value=now,
        baseline_value=then,
        recent=tuple(reversed(part)),
        baseline=tuple(bj),
        baseline_until=until,
        value_of=value_of,
        varies=varies,
        population=population,
        when=when,
        stratum=stratum,
    )


def _own_baselines(
    stratum: Callable[[JobFacts], str],
    bj: Sequence[JobFacts],
    ys: Sequence[float],
    c: str,
    per_hour: bool,
) -> dict[str, float]:
    """Each stratum's baseline value of component ``c``: the pooled seconds per job-hour of its
    baseline jobs (``per_hour``), else the mean of their values ``ys``."""
    groups: dict[str, list[tuple[JobFacts, float]]] = {}
    for j, y in zip(bj, ys, strict=True):
        groups.setdefault(stratum(j), []).append((j, y))
    if per_hour:
        return {s: _pooled([j for j, _ in g], c) for s, g in groups.items()}
    return {s: sum(y for _, y in g) / len(g) for s, g in groups.items()}


def _either(a: Test | None, b: Test | None) -> Test | None:
    """The more significant of two views of one component, its p-value doubled (Bonferroni
    over the two) when both could show a change; a view whose values never vary is no view."""
    views = [x for x in (a, b) if x is not None and x.varies]
    if len(views) < 2:
        return views[0] if views else (a or b)
    best = min(views, key=lambda x: x.p)
    return replace(best, p=min(1.0, 2.0 * best.p))


def still_holds(rule: Rule, test: Test) -> bool:
    """Whether an open incident's ``test`` still shows its change: the recent samples differ
    from the frozen baseline (uncorrected ``p <= resolve_p``) and cost at least half the floor,
    or differ in a view whose cost is not the component's (``Test.costs_all`` false)."""
    return test.p <= rule.resolve_p and (
        test.excess_gpu_h_per_day >= rule.min_gpu_hours_per_day / 2 or not test.costs_all
    )


def _judged(rule: Rule, views: Sequence[Test | None], opened: bool) -> Test | None:
    """The one test of a component over its views (``views[0]`` the per-job one, then the
    first start-ups' or the saves'): the one :func:`_either` picks, except for an ``opened``
    incident, which is judged on the most significant of the views that still hold it
    (:func:`still_holds`, the p-value doubled as :func:`_either` doubles it), where one does.

    The views must agree that the change is gone. A first start-up or a save is part of a
    component's cost (restarts, restores and the rest are not in it), so such a view's cost
    under half the floor is no evidence that the change stopped mattering while the per-job
    view, the component's whole cost per job-hour, cannot be tested: then it holds the
    incident for as long as it still differs. A probe's checkpoint x5 resolved 27 minutes before
    its end on the saves of 2 jobs, 4.9x at p = 0.018 costing 0.06 GPU-hours a day, its
    per-job view short of jobs that ended (0.8 GPU-hours a day the evaluation before)."""
    either: Test | None = None
    for view in views:
        either = _either(either, view)
    shown = [x for x in views if x is not None and x.varies]
    if not opened or not shown:
        return either
    whole = views[0] is not None
    double = 2.0 if len(shown) > 1 else 1.0
    judged = [replace(x, p=min(1.0, double * x.p), costs_all=whole) for x in shown]
    holding = [x for x in judged if still_holds(rule, x)]
    return min(holding, key=lambda x: x.p) if holding else either


SAVE_VIEW = "checkpoint"
"""The component also tested per save: each checkpoint save that blocked training is a sample
once it ended, the running jobs' saves too (:func:`_save_test`)."""


def _save_stratum(j: JobFacts) -> str:
    """The kind of a job's saves: its checkpoint mode and its width (the loop waits for the
    slowest rank's save, so a job of more ranks blocks longer at no change)."""
    return f"{_checkpoint_mode(j)}/{j.gpus}"


SAVE_VIEW_MIN_JOBS = 2
"""The save view's p-value is the largest over leaving out each recent job's saves in turn,
so no one job (on a slow file system, say) makes an alert on its own; it needs saves of this
many jobs in the recent window."""


def _save_test(
    rule: Rule,
    key: str,
    recent: Sequence[Save],
    base: Sequence[Save],
    until: float,
    scan: bool,
) -> Test | None:
    """The stratified rank test of the recent checkpoint saves' blocking seconds against the
    baseline's, each save ranked among the baseline saves of jobs of its job's checkpoint mode
    and width (:func:`_save_stratum`), scanned over the newest saves when ``scan``. The saves of
    one stratum are assumed exchangeable under no change; a job-level effect (one job's slow
    storage) is guarded against by leaving out each recent job in turn and keeping the largest
    p-value (:data:`SAVE_VIEW_MIN_JOBS`) before a change is found. An open incident (``scan``
    false) is judged on its saves since the onset (:func:`_since`) without leaving any out: it
    resolves when they no longer differ."""
    jobs_of = {j.job_id for _, _, j in recent}
    base_jobs = {j.job_id: j for _, _, j in base}
    if (
        len(recent) < rule.min_jobs
        or len(jobs_of) < SAVE_VIEW_MIN_JOBS
        or len(base_jobs) < rule.min_baseline_jobs
    ):
        return None
    strata = StratifiedRankBaseline([(_save_stratum(j), x) for _, x, j in base])
    newest = sorted(recent, key=lambda s: (s[0], s[2].job_id), reverse=True)

    def scanned(saves: Sequence[Save]) -> tuple[float, int]:
        if len(saves) < rule.min_jobs:
            return 1.0, len(saves)
        sizes = suffix_sizes(len(saves), rule.min_jobs) if scan else [len(saves)]
        ps = strata.scan([(_save_stratum(j), x) for _, x, j in saves], sizes)
        return weighted_scan(ps, sizes)

    p, k = scanned(newest)
    if scan and p <= rule.fdr:  # else no leave-one-out can make it a finding
        for job_id in jobs_of:
            p = max(p, scanned([s for s in newest if s[2].job_id != job_id])[0])
    part = newest[:k]
    means: dict[str, list[float]] = {}
    for _, x, j in base:
        means.setdefault(_save_stratum(j), []).append(x)
    expect = {m: sum(v) / len(v) for m, v in means.items()}
    pairs = [(x, expect.get(_save_stratum(j)), j) for _, x, j in part]
    known = [(x, e, j) for x, e, j in pairs if e is not None]
    per_day = len(base) / (rule.baseline_s - rule.window_s) * DAY  # the baseline's saves a day
    extra = sum((x - e) * j.gpus for x, e, j in known) / len(known) * per_day if known else 0.0
    now = sum(x for x, _, _ in known) / len(known) if known else 0.0
    then = sum(e for _, e, _ in known) / len(known) if known else 0.0
    worst: dict[str, tuple[float, JobFacts]] = {}
    for x, e, j in known:
        r = x / e if e else math.inf
        if j.job_id not in worst or r > worst[j.job_id][0]:
            worst[j.job_id] = (r, j)
    shown = tuple(j for _, j in sorted(worst.values(), key=lambda rj: (-rj[0], rj[1].job_id)))
    recent_jobs = tuple(sorted({j.job_id: j for _, _, j in part}.values(), key=_end))
    values = [x for _, x, _ in base] + [x for x, _, _ in known]
    return Test(
        key=key,
        component=SAVE_VIEW,
        p=min(1.0, p),
        excess_gpu_h_per_day=extra / 3600.0,
        ratio=_ratio(now, then),
        recent_value=now,
        baseline_value=then,
        recent=recent_jobs,
        baseline=tuple(base_jobs.values()),
        baseline_until=until,
        value_of=_rate_of(SAVE_VIEW),
        varies=bool(values) and min(values) < max(values),
        population="saves",
        samples=(len(part), len(base)),
        shown=shown,
        change_point=lambda: _save_onset(base, part, expect),
    )


def _since(saves: Sequence[Save], onset: float | None, least: int) -> Sequence[Save]:
    """The saves that ended at or after ``onset`` (an open incident's), or all of them when
    there is no onset or fewer than ``least`` are left: an open save view is judged on the
    saves since its change, undiluted by the day's saves before it."""
    if onset is None:
        return saves
    after = [s for s in saves if s[0] >= onset]
    return after if len(after) >= least else saves


def _save_onset(base: Sequence[Save], part: Sequence[Save], expect: Mapping[str, float]) -> float:
    """The change point of a save view: the split of the saves (by end, each over its stratum's
    baseline mean) that separates them most, the after part starting among the recent saves;
    the onset is the later of the first after-save's start and the last before-save's end."""
    saves = sorted((*base, *part), key=lambda s: (s[0], s[2].job_id))
    values = [x / (expect.get(_save_stratum(j)) or 1.0) for _, x, j in saves]
    first_recent = len(saves) - len(part)
    best_i, best_p = first_recent, 2.0
    for i in range(max(1, first_recent), len(saves)):
        p = rank_test_greater(values[i:], values[:i])
        if p < best_p:
            best_i, best_p = i, p
    end, seconds, _ = saves[best_i]
    start = end - seconds
    return start if best_i == 0 else max(start, saves[best_i - 1][0])


def _failure_test(
    rule: Rule,
    key: str,
    recent: Sequence[JobFacts],
    base: Sequence[JobFacts],
    until: float,
    scan: bool,
) -> Test | None:
    rj = [j for j in recent if j.trained]
    bj = [j for j in base if j.trained]
    if len(rj) < rule.min_jobs or len(bj) < rule.min_baseline_jobs:
        return None
    t0 = sum(j.productive for j in bj) / 3600.0
    if t0 <= 0 or sum(j.productive for j in rj) <= 0:
        return None
    if scan:
        return _scanned(lambda part: _failure_on(rule, key, part, bj, until), rj, rule.min_jobs)
    return _failure_on(rule, key, rj, bj, until)


def _failure_on(
    rule: Rule, key: str, rj: Sequence[JobFacts], bj: Sequence[JobFacts], until: float
) -> Test:
    """The Poisson test of the failure rate of ``rj`` against ``bj``."""
    k1, k0 = sum(j.failures for j in rj), sum(j.failures for j in bj)
    t1 = sum(j.productive for j in rj) / 3600.0
    t0 = sum(j.productive for j in bj) / 3600.0
    if t1 <= 0:  # a suffix of jobs that never trained: no exposure, no evidence
        return Test(
            key=key,
            component=FAILURE,
            p=1.0,
            excess_gpu_h_per_day=0.0,
            ratio=1.0,
            recent_value=0.0,
            baseline_value=k0 / t0,
            recent=tuple(rj),
            baseline=tuple(bj),
            baseline_until=until,
            value_of=lambda j: 0.0,
            varies=False,
            population="failures",
        )
    r1, r0 = k1 / t1, k0 / t0
    cost_jobs = bj if k0 else rj
    failures = k0 if k0 else k1
    gpu_s = sum(j.lost.get(FAILURE, 0.0) * j.gpus for j in cost_jobs)
    per_failure = gpu_s / failures if failures else 0.0
    excess = (k1 - r0 * t1) * per_failure / 3600.0 / (rule.window_s / DAY)
    p = poisson_rate_greater(k1, t1, k0, t0)
    return Test(
        key=key,
        component=FAILURE,
        p=p,
        excess_gpu_h_per_day=excess,
        ratio=_ratio(r1, r0),
        recent_value=r1,
        baseline_value=r0,
        recent=tuple(rj),
        baseline=tuple(bj),
        baseline_until=until,
        value_of=lambda j: j.failures / max(j.productive / 3600.0, 1e-9),
        varies=k1 + k0 > 0,
        population="failures",
    )


def _samples(
    w: Window, startups: bool, saving: bool
) -> tuple[list[JobFacts], list[JobFacts], list[Save]]:
    """The ended jobs of ``w`` (the samples: a running job's figures so far are not comparable
    with whole jobs', a young one being mostly start-up, and the backtest sees every job at its
    end, so leaving running jobs out keeps the live evaluator and the replay one), and its first
    start-ups and saves where the rule has those views (none where it has not)."""
    return w.ended(), w.started() if startups else [], w.saves() if saving else []


def tests_at(
    rule: Rule,
    fleet: Fleet,
    t: float,
    frozen: Mapping[tuple[str, str], float],
    onsets: Mapping[tuple[str, str], float] | None = None,
) -> list[Test]:
    """Every test of ``rule`` at ``t``; ``frozen``: ``(group, component) -> baseline_until`` of
    the incidents already open (their baseline stays where it was when they fired), ``onsets``
    their onsets (an open save view is judged on the saves since its onset). Each view
    is computed once per change of its samples (:meth:`Fleet.memo`): a test depends on its
    instant only through which samples are in its windows, and its ``baseline_until``."""
    out: list[Test] = []
    length = rule.baseline_s - rule.window_s
    startups = any(c in STARTUP_VIEW for c in rule.components)
    saving = SAVE_VIEW in rule.components
    by = rule.by
    for key in fleet.groups(by):
        now = fleet.window(by, key, t, rule.window_s)
        recent, started, saves = _samples(now, startups, saving)
        if len(recent) < rule.min_jobs and len(started) < rule.min_jobs and len(saves) < 1:
            continue
        bases: dict[float, tuple[Window, list[JobFacts], list[JobFacts], list[Save]]] = {}
        for c in rule.components:
            until = frozen.get((key, c), t - rule.window_s)
            if until not in bases:
                then = fleet.window(by, key, until, length)
                bases[until] = (then, *_samples(then, startups, saving))
            then, base, base_started, base_saves = bases[until]
            scan = (key, c) not in frozen  # an open incident is judged on its whole window
            views: list[tuple[int, Callable[..., Test | None], tuple[Any, ...]]] = [
                (0, _failure_test, (rule, key, recent, base, until, scan))
                if c == FAILURE
                else (0, _component_test, (rule, key, c, recent, base, until, scan))
            ]
            if c in STARTUP_VIEW:
                first = (rule, key, c, started, base_started, until, scan, "startups")
                views.append((1, _component_test, first))
            onset = None if scan else (onsets or {}).get((key, c))
            if c == SAVE_VIEW:
                mine = _since(saves, onset, rule.min_jobs)
                views.append((2, _save_test, (rule, key, mine, base_saves, until, scan)))
            judged: list[Test | None] = []
            for n, fn, args in views:  # n: the population's index in Window.ranges
                slot = (rule.name, by, key, c, n)
                inputs = (now.ranges[n], then.ranges[n], scan, onset if n == 2 else None)
                judged.append(fleet.memo(slot, inputs, fn, *args))
            test = _judged(rule, judged, opened=not scan)
            if test is not None:
                out.append(_until(test, until))
    return out


def _until(test: Test, until: float) -> Test:
    """``test`` with ``baseline_until`` set: a shallow copy (a memoized test serves every
    instant where its samples stayed, each with its own ``baseline_until``), without
    ``dataclasses.replace``'s checks of every field, which a replay pays half a million times."""
    if test.baseline_until == until:
        return test
    out = copy.copy(test)
    object.__setattr__(out, "baseline_until", until)
    return out


def _onset(test: Test) -> float:
    """The change point: the split of the group's jobs (by end) into before and after that
    separates them most (smallest rank-test p-value), the after part starting in the recent
    window;
    the onset is the later of the first after-job's start and the last before-job's end (its
    start for ``startups``: its start-up began there); a view whose samples are not jobs has
    its own (``Test.change_point``)."""
    if test.change_point is not None:
        return test.change_point()
    jobs = sorted((*test.baseline, *test.recent), key=lambda j: (test.when(j), j.job_id))
    values = [test.value_of(j) for j in jobs]
    first_recent = len(test.baseline)
    best_i, best_p = first_recent, 2.0
    for i in range(max(1, first_recent), len(jobs)):
        p = rank_test_greater(values[i:], values[:i])
        if p < best_p:
            best_i, best_p = i, p
    start = jobs[best_i].alloc
    if best_i == 0:
        return start
    last = jobs[best_i - 1]  # a start-up of the last job before began at its allocation
    return max(start, last.alloc if test.population == "startups" else last.end)


def utc_minute(t: float) -> str:
    """Instant ``t`` as ``YYYY-MM-DD HH:MM UTC`` (an alert's onset)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _growth(ratio: float) -> str:
    """A recent-to-baseline ratio as the alert says it (``2.5×``; ``new`` without a baseline)."""
    return "new (none before)" if math.isinf(ratio) else f"{ratio:.1f}×"


def _annotations(test: Test) -> dict[str, Any]:
    """ETT, time to start and checkpoint blocking of the same jobs, and their teams."""
    rj, bj = test.recent, test.baseline

    def ett(jobs: Sequence[JobFacts]) -> float | None:
        wall = sum(j.wall for j in jobs)
        return 100.0 * sum(j.productive for j in jobs) / wall if wall > 0 else None

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    def blocking_rate(jobs: Sequence[JobFacts]) -> float | None:
        wall = sum(j.hours for j in jobs)
        return sum(j.blocking for j in jobs) / wall if wall > 0 else None

    r_tts = [j.tts for j in rj if j.tts is not None]
    b_tts = [j.tts for j in bj if j.tts is not None]
    ett_of = [j.productive / j.wall for j in rj if j.wall > 0]
    ett_base = [j.productive / j.wall for j in bj if j.wall > 0]
    showing = _showing(test)
    teams = Counter(j.team for j in showing)
    return {
        "ett_pct": ett(rj),
        "baseline_ett_pct": ett(bj),
        "ett_drop_p": rank_test_less(ett_of, ett_base),
        "tts_mean_s": mean(r_tts),
        "baseline_tts_mean_s": mean(b_tts),
        "tts_rise_p": rank_test_greater(r_tts, b_tts),
        "blocking_s_per_hour": blocking_rate(rj),
        "baseline_blocking_s_per_hour": blocking_rate(bj),
        "teams": dict(sorted(teams.items(), key=lambda kv: (-kv[1], kv[0]))),
    }


def _showing(test: Test) -> list[JobFacts]:
    """The recent jobs above the baseline's median (their own stratum's, when the test was
    stratified), worst first: by their value over that median, then by value (all recent ones
    if none is above)."""
    if test.shown:
        return list(test.shown)
    kind = test.stratum or (lambda j: "")
    values: dict[str, list[float]] = {}
    for j in test.baseline:
        values.setdefault(kind(j), []).append(test.value_of(j))
    medians = {s: sorted(v)[len(v) // 2] for s, v in values.items()}
    lacking = 0.0 if test.stratum is None else math.inf  # a stratum the baseline lacks: none

    def median(j: JobFacts) -> float:
        return medians.get(kind(j), lacking)

    def worse(j: JobFacts) -> tuple[float, float, str]:
        x, m = test.value_of(j), median(j)
        return -(x / m if m > 0 else math.inf), -x, j.job_id

    ranked = sorted(test.recent, key=worse)
    above = [j for j in ranked if test.value_of(j) > median(j)]
    return above or ranked


RESTART_COSTS = frozenset(
    {"scheduler", "runtime", "comms", "model", "sharding", "data", "checkpoint", "compile"}
)
"""Components every restart pays again (its wait, start-up, restore and compile): while a
group's failure rate is up, their rise is a consequence of the extra restarts, an annotation of
the failure incident rather than an incident of its own."""


def _merge_restart_costs(rule: Rule, incidents: list[Finding]) -> list[Finding]:
    by = rule.by.value
    failing = {i.labels[by] for i in incidents if i.labels["component"] == FAILURE}
    out: list[Finding] = []
    also: dict[str, list[str]] = {}
    for inc in incidents:
        labels = inc.labels
        group = labels[by]
        if group in failing and labels["component"] in RESTART_COSTS:
            excess = float(inc.figures.get("excess_gpu_hours_per_day") or 0.0)
            also.setdefault(group, []).append(f"{labels['component']} +{excess:.1f} GPU-h/day")
            continue
        out.append(inc)
    for n, inc in enumerate(out):
        group = inc.labels[by]
        if inc.labels["component"] == FAILURE and group in also:
            desc = inc.description + "; with the restarts' costs: " + ", ".join(also[group])
            figures = {**inc.figures, "restart_costs": also[group], "description": desc}
            out[n] = replace(inc, description=desc, figures=figures)
    return out


def detect(
    rule: Rule, fleet: Fleet, t: float, open_incidents: Mapping[str, OpenAlert]
) -> list[Finding]:
    """The incidents of ``rule`` holding at ``t``: ``(labels, value, baseline, jobs,
    description, figures)`` each. ``open_incidents``: this rule's open (pending or firing)
    alerts by alert key; an open incident keeps its baseline and onset."""
    by = rule.by.value
    frozen: dict[tuple[str, str], float] = {}
    for labels, figures in open_incidents.values():
        if by in labels and "component" in labels and "baseline_until" in figures:
            frozen[(labels[by], labels["component"])] = float(figures["baseline_until"])
    onsets = {
        (labels[by], labels["component"]): float(figures["onset"])
        for labels, figures in open_incidents.values()
        if by in labels and "component" in labels and "onset" in figures
    }
    tests = tests_at(rule, fleet, t, frozen, onsets)
    # the family of this evaluation is the changes not yet found: an open incident's tiny
    # p-value would otherwise loosen every other test's threshold for as long as it lasts
    fresh = [x for x in tests if (x.key, x.component) not in frozen and x.varies]
    q_of = dict(zip(map(id, fresh), benjamini_hochberg([x.p for x in fresh]), strict=True))
    out: list[Finding] = []
    tested: set[str] = set()
    for test in tests:
        q = q_of.get(id(test), test.p)
        labels = labels_of(rule, test.key, test.component)
        key = alert_key(labels)
        tested.add(key)
        opened = open_incidents.get(key)
        prior = opened[1] if opened is not None else None
        if prior is None:
            holds = q <= rule.fdr and test.excess_gpu_h_per_day >= rule.min_gpu_hours_per_day
        else:
            holds = still_holds(rule, test)
        if holds:
            onset = float(prior["onset"]) if prior and "onset" in prior else _onset(test)
            out.append(_incident(rule, test, q, labels, onset))
    out = _merge_restart_costs(rule, out)
    for key, (labels, figures) in open_incidents.items():
        if key in tested or "description" not in figures:
            continue
        out.append(held_open(rule, labels, figures))  # too few recent or baseline jobs now
    return out


def _sampled(test: Test) -> str:
    """What the recent samples were: ``5 jobs``, ``5 jobs started``, ``12 saves of 3 jobs``."""
    if test.samples is not None:
        return f"{test.samples[0]} saves of {len(test.recent)} jobs"
    return f"{len(test.recent)} jobs{' started' if test.population == 'startups' else ''}"


def _incident(rule: Rule, test: Test, q: float, labels: dict[str, str], onset: float) -> Finding:
    """The alert of a change that holds: its description, jobs and figures."""
    jobs = tuple(j.job_id for j in _showing(test)[:SHOWN_JOBS])
    unit = UNITS[test.population]
    desc = (
        f"{test.component} of {rule.by.value} {test.key}: {_growth(test.ratio)} since "
        f"{utc_minute(onset)}, +{test.excess_gpu_h_per_day:.1f} GPU-hours/day "
        f"({test.recent_value:.3g} against {test.baseline_value:.3g} {unit}; "
        f"p = {test.p:.2g}, q = {q:.2g}; {_sampled(test)} in the last {rule.window} against "
        f"{test.samples[1] if test.samples else len(test.baseline)} before)"
    )
    notes = _annotations(test)
    if notes["ett_pct"] is not None and notes["baseline_ett_pct"] is not None:
        desc += f"; ETT {notes['ett_pct']:.1f}% against {notes['baseline_ett_pct']:.1f}%"
    if notes["teams"]:
        desc += "; teams " + ", ".join(f"{k} ({v})" for k, v in notes["teams"].items())
    figures = {
        "description": desc,
        "jobs": list(jobs),
        "onset": onset,
        "baseline_until": test.baseline_until,
        "p": test.p,
        "q": q,
        "ratio": None if math.isinf(test.ratio) else test.ratio,
        "excess_gpu_hours_per_day": test.excess_gpu_h_per_day,
        "recent_value": test.recent_value,
        "baseline_value": test.baseline_value,
        "unit": unit,
        "recent_jobs": len(test.recent),
        "baseline_jobs": len(test.baseline),
        **(
            {}
            if test.samples is None
            else {"recent_saves": test.samples[0], "baseline_saves": test.samples[1]}
        ),
        "window": rule.window,
        "baseline_window": rule.baseline,
        **notes,
    }
    return Finding(
        rule=rule,
        labels=labels,
        value=test.recent_value,
        baseline=test.baseline_value,
        jobs=jobs,
        description=desc,
        figures=figures,
    )
