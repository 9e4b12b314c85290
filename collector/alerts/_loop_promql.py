"""The PromQL approximations of the loop's alert kinds (issue 26), over the ``ett_model_*`` gauges.

The built-in rules (``_perf.py``) read per-job loop facts; ``/metrics`` has, per model, figures
of the last 24 hours' jobs (``collector/read/metrics_performance.py``): the median rank
throughput ``R``, the jobs ``N``, the rank-seconds ``L`` and the highest straggler score ``S``.
Prometheus keeps their history, so the baseline is the gauges' own past:

- **throughput_regression**: ``base = avg_over_time(R[B - W] offset W)`` (the gauge's mean over
  the baseline before the recent window); the rule holds when ``base / R`` exceeds
  :data:`THROUGHPUT_RATIO`, the recent window has ``min_jobs`` jobs, the baseline about
  ``min_baseline_jobs`` (``avg_over_time(N[B - W] offset W) * (B - W) / 24h``), and the slower
  steps cost at least ``min_gpu_hours_per_day``: ``L / 3600 * (1 - R / base)`` GPU-hours a day;
  value: ``base / R``.
- **straggler**: the highest score of the last 24 hours' jobs' attempts at least ``min_score``
  (``S`` scores the whole attempt; the built-in rule counts the windows a rank held it in).

Only ``by: model`` can be expressed: the gauges carry no team. The gauges' window is 24 h
whatever the rule's ``window``.
"""

from __future__ import annotations

from .rules import GroupKey, Kind, Rule, format_duration

THROUGHPUT_RATIO = 1.15
"""``K`` of the throughput approximation: the baseline throughput more than ``K`` times the
recent one (a drop of 13 %). The recent figure is a median over a day's jobs (about 6 a model),
the baseline a mean of 6 such days. With a per-attempt log-normal spread of the step time of
0.05 (0.1, 0.15), a flat model passes ``K`` in 0 of 200,000 draws (0.28 %, 3.3 %), a step 1.2x
slower 96 % (81 %, 72 %) of the time and 1.3x slower 100 % (99.4 %, 95 %): a seeded Monte Carlo,
``tests/alerts/test_loop_promql.py``, which keeps these figures true."""

GAUGE_WINDOW_S = 86400.0
"""The window of the ``ett_model_*`` gauges."""

KINDS = frozenset({Kind.THROUGHPUT_REGRESSION, Kind.STRAGGLER})


def expressible(rule: Rule) -> bool:
    """Whether ``rule`` (of a loop kind) has a PromQL approximation: only ``by: model``."""
    return rule.by is GroupKey.MODEL


def expression(rule: Rule) -> str:
    """The PromQL of a loop rule (``by: model``; see the module docstring)."""
    if rule.kind is Kind.STRAGGLER:
        return f"max by (model) (ett_model_straggler_score) >= {rule.min_score:g}"
    span = format_duration(rule.baseline_s - rule.window_s)
    off = format_duration(rule.window_s)
    rate = _one("ett_model_samples_per_second_per_rank")
    base = _one(f"avg_over_time(ett_model_samples_per_second_per_rank[{span}] offset {off})")
    days = (rule.baseline_s - rule.window_s) / GAUGE_WINDOW_S
    jobs = _one("ett_model_performance_jobs")
    base_jobs = _one(f"avg_over_time(ett_model_performance_jobs[{span}] offset {off})")
    cost = f"{_one('ett_model_rank_seconds')} / 3600 * (1 - {rate} / {base})"
    return (
        f"({base} / {rate} > {THROUGHPUT_RATIO:g})"
        f" and on (model) ({jobs} >= {rule.min_jobs})"
        f" and on (model) ({base_jobs} * {days:g} >= {rule.min_baseline_jobs})"
        f" and on (model) ({cost} >= {rule.min_gpu_hours_per_day:g})"
    )


def _one(series: str) -> str:
    """``series`` once per model: every collector process or replica that Prometheus scrapes
    exports the same gauges from one database, under its own ``instance`` (and ``job``)
    label, so the rule reads their maximum (they agree) and fires once per model, as the
    regression rule's :func:`~.prometheus.fleet_sum` does."""
    return f"max without (instance, job) ({series})"


def description(rule: Rule) -> str:
    """The alert's description (a Prometheus template)."""
    v = '{{ $value | printf "%.2f" }}'
    if rule.kind is Kind.STRAGGLER:
        return (
            f"a rank of a job of model {{{{ $labels.model }}}} computed {v}x the other ranks per "
            "step over its attempt (last 24h; a PromQL approximation of the straggler rule)"
        )
    return (
        f"throughput per rank of model {{{{ $labels.model }}}} over the last 24h: its "
        f"{rule.baseline} baseline is {v}x the recent (a PromQL approximation of the "
        "throughput_regression rule)"
    )


def note(rule: Rule) -> str:
    """What the exported PromQL differs in (its ``approximation`` annotation)."""
    window = "" if rule.window_s == GAUGE_WINDOW_S else f" (not the rule's {rule.window})"
    if rule.kind is Kind.STRAGGLER:
        return (
            f"PromQL approximation of the built-in straggler rule {rule.name} (ett serve): the "
            f"highest attempt-wide score of the last 24h's jobs{window} at least "
            f"{rule.min_score:g}, where the built-in rule asks a rank to hold that score in "
            f"{rule.min_windows}+ windows of one attempt. See docs/alerts.md, section "
            '"The loop\'s kinds in PromQL".'
        )
    return (
        f"PromQL approximation of the built-in throughput_regression rule {rule.name} (ett "
        f"serve): the median rank throughput of the last 24h's jobs{window} against the "
        f"gauge's mean over the baseline, a ratio above {THROUGHPUT_RATIO:g} where it runs a "
        "rank test over the jobs; no Benjamini-Hochberg; no frozen baseline. See "
        'docs/alerts.md, section "The loop\'s kinds in PromQL".'
    )


def not_expressible_note(rule: Rule) -> str:
    """Why a loop rule grouped by team is left out of the exported file."""
    return (
        f"rule {rule.name} (kind {rule.kind.value}) is not exported: by {rule.by.value}, and "
        "the ett_model_* gauges its PromQL reads carry only the model; the built-in evaluator "
        "(ett serve) runs it."
    )
