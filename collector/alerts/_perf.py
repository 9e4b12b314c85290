"""The loop's alert kinds (issue 26): a model's throughput regression and a persistent straggler.

Both read the loop facts kept with each ended job's figures (``collector/domain/_loop_facts.py``,
:class:`~ett_collector.alerts._fleet.JobFacts` ``throughput``, ``loop_rank_s``, ``stragglers``);
a job without them (running, untimed, or stored before them) is no sample.

**Throughput regression** (``throughput_regression``), at an instant ``t``, for each group:

- the recent jobs: those that ended in ``(t - window, t]`` with a known throughput; the baseline
  jobs: those that ended in the ``baseline - window`` before ``until`` (``t - window``, or, for an
  open incident, the ``baseline_until`` it was found against: its baseline stays);
- a job's value ``x`` is its samples per rank-second; the test is the one-sided rank test
  (Mann-Whitney) that the recent values are lower, scanned over the newest 3, 5, 8, ... jobs and
  all of them with the regression kind's weighted Bonferroni (3/4 of the level on the whole
  window, the rest split over the shorter suffixes; the smallest weighted p-value kept);
- the baseline throughput ``then = sum(x * L) / sum(L)`` over the baseline jobs (``L``: a job's
  loop rank-seconds), and the effect ``sum(L * (1 - x / then)) / 3600 / days(window)`` over the
  tested suffix: the GPU-hours a day the slower steps cost against the baseline's pace;
- Benjamini-Hochberg over the fresh tests of the rule at ``t`` (every group); a change fires when
  its q-value is at most ``fdr`` and its effect at least ``min_gpu_hours_per_day``; an open one
  holds while its uncorrected p-value is at most ``resolve_p`` and its effect at least half the
  floor. One alert per group, component ``step``; its onset is the later of the first tested
  job's start and the end of the job before it (an open alert keeps its own).

**Straggler** (``straggler``): at ``t``, a group's jobs that ended (or, running, last reported)
in ``(t - window, t]`` each
with an attempt whose top rank held a compute-per-step ratio of at least ``min_score`` (against
the other ranks at the same time) in at least ``min_windows`` windows. One alert per group,
component ``straggler``, naming the jobs and ranks (worst first); value: the highest score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ._conditions import SHOWN_JOBS, Finding, OpenAlert, alert_key, held_open, labels_of
from ._detect import suffix_sizes, utc_minute, weighted_scan
from ._fleet import Fleet, JobFacts
from ._stats import RankBaseline, benjamini_hochberg
from .rules import Rule

DAY = 86400.0
STEP = "step"
STRAGGLER = "straggler"


def _samples(jobs: Sequence[JobFacts]) -> list[JobFacts]:
    return [j for j in jobs if j.state != "running" and j.throughput and j.loop_rank_s > 0]


class _ThroughputTest(NamedTuple):
    """The throughput test of one group."""

    p: float
    tested: list[JobFacts]
    """The tested recent jobs, oldest first."""
    now: float
    """Their throughput (samples/s per rank, weighted by loop seconds)."""
    then: float
    """The baseline jobs' throughput."""
    excess: float
    """GPU-hours a day lost to the drop."""
    onset: float
    """The later of the first tested job's start and the end of the job before it."""


def _throughput_test(
    rule: Rule, recent: list[JobFacts], base: list[JobFacts], scan: bool
) -> _ThroughputTest | None:
    """The throughput test of one group's recent jobs against its baseline's, or None with
    too few jobs."""
    if len(recent) < rule.min_jobs or len(base) < rule.min_baseline_jobs:
        return None
    weight = sum(j.loop_rank_s for j in base)
    then = sum((j.throughput or 0.0) * j.loop_rank_s for j in base) / weight
    newest = sorted(recent, key=lambda j: (j.end, j.job_id), reverse=True)
    xs = [-(j.throughput or 0.0) for j in newest]  # lower throughput: a greater negation
    sizes = suffix_sizes(len(newest), rule.min_jobs) if scan else [len(newest)]
    p, k = weighted_scan(
        RankBaseline([-(j.throughput or 0.0) for j in base]).scan(xs, sizes), sizes
    )
    part = list(reversed(newest[:k]))
    loop = sum(j.loop_rank_s for j in part)
    now = sum((j.throughput or 0.0) * j.loop_rank_s for j in part) / loop
    lost = sum(j.loop_rank_s * (1.0 - (j.throughput or 0.0) / then) for j in part)
    before = newest[k].end if k < len(newest) else max(j.end for j in base)
    onset = max(part[0].alloc, before)
    excess = lost / 3600.0 / (rule.window_s / DAY)
    return _ThroughputTest(p=p, tested=part, now=now, then=then, excess=excess, onset=onset)


def throughput_findings(
    rule: Rule, fleet: Fleet, t: float, open_alerts: Mapping[str, OpenAlert]
) -> list[Finding]:
    """The throughput regressions of ``rule`` at ``t`` (see the module docstring)."""
    frozen = {
        alert_key(labels): float(f["baseline_until"])
        for labels, f in open_alerts.values()
        if "baseline_until" in f
    }
    length = rule.baseline_s - rule.window_s
    tests = []
    for key in fleet.groups(rule.by):
        labels = labels_of(rule, key, STEP)
        until = frozen.get(alert_key(labels), t - rule.window_s)
        recent = _samples(fleet.members(rule.by, key, t, rule.window_s))
        base = _samples(fleet.members(rule.by, key, until, length))
        found = _throughput_test(rule, recent, base, alert_key(labels) not in frozen)
        if found is not None:
            tests.append((labels, until, found))
    fresh = [i for i, (labels, _, _) in enumerate(tests) if alert_key(labels) not in frozen]
    qs = dict(zip(fresh, benjamini_hochberg([tests[i][2].p for i in fresh]), strict=True))
    out: list[Finding] = []
    for i, (labels, until, (p, part, now, then, excess, start)) in enumerate(tests):
        prior = open_alerts.get(alert_key(labels))
        if prior is None:
            holds = qs[i] <= rule.fdr and excess >= rule.min_gpu_hours_per_day
        else:
            holds = p <= rule.resolve_p and excess >= rule.min_gpu_hours_per_day / 2
        if not holds:
            continue
        onset = float(prior[1]["onset"]) if prior and "onset" in prior[1] else start
        worst = sorted(part, key=lambda j: (j.throughput or 0.0, j.job_id))[:SHOWN_JOBS]
        jobs = tuple(j.job_id for j in worst)
        desc = (
            f"throughput of {rule.by.value} {labels[rule.by.value]}: {now:.4g} samples/s per "
            f"rank against {then:.4g} ({now / then:.2f}x) since {utc_minute(onset)}, "
            f"+{excess:.1f} GPU-hours/day (p = {p:.2g}, q = {qs.get(i, p):.2g}; {len(part)} "
            f"jobs in the last {rule.window})"
        )
        figures = {
            "description": desc,
            "jobs": list(jobs),
            "onset": onset,
            "baseline_until": until,
            "p": p,
            "q": qs.get(i, p),
            "ratio": now / then,
            "excess_gpu_hours_per_day": excess,
            "recent_value": now,
            "baseline_value": then,
            "unit": "samples/s per rank",
            "recent_jobs": len(part),
            "window": rule.window,
            "baseline_window": rule.baseline,
        }
        out.append(Finding(rule, labels, now, then, jobs, desc, figures))
    tested = {alert_key(labels) for labels, _, _ in tests}
    for key, (was, seen) in open_alerts.items():
        if key in tested or "description" not in seen:
            continue
        out.append(held_open(rule, was, seen))  # too few jobs to test now
    return out


def straggler_findings(rule: Rule, fleet: Fleet, t: float) -> list[Finding]:
    """The persistent stragglers of ``rule`` at ``t`` (see the module docstring)."""
    out: list[Finding] = []
    for key in fleet.groups(rule.by):
        hits = []
        for j in fleet.members(rule.by, key, t, rule.window_s):
            for s in j.stragglers:
                n = s.windows_at(rule.min_score)
                if n >= rule.min_windows:
                    hits.append((n, s.score, j.job_id, s.attempt, s.rank))
        if not hits:
            continue
        hits.sort(key=lambda h: (-h[0], -h[1], h[2], h[3]))
        shown = hits[:SHOWN_JOBS]
        jobs = tuple(dict.fromkeys(h[2] for h in shown))
        named = "; ".join(
            f"rank {r} of {j} (attempt {a}): {sc:.2f}x in {n} windows" for n, sc, j, a, r in shown
        )
        desc = (
            f"{len(hits)} straggler(s) in jobs of {rule.by.value} {key} that ended in the last "
            f"{rule.window}, computing at least {rule.min_score:g}x the other ranks per step in "
            f"{rule.min_windows}+ windows: {named}"
        )
        stragglers = [
            {"job_id": j, "attempt": a, "rank": r, "score": sc, "windows": n}
            for n, sc, j, a, r in shown
        ]
        figures = {"description": desc, "jobs": list(jobs), "stragglers": stragglers}
        value = max(h[1] for h in hits)
        out.append(Finding(rule, labels_of(rule, key, STRAGGLER), value, None, jobs, desc, figures))
    return out
