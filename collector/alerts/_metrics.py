"""Fleet metrics for Prometheus, read from the stored job figures at scrape time.

A custom collector on the collector's own registry: a scrape reads the jobs of the last 7 days
once (cached ``ttl_s``, so scrapes close together, or every worker of ``ett serve --workers N``
in turn, do not each hit the database) and sums them per (model, team) and window. Every series
is labelled by model, team and window (and component, cause or ``le``), never by job, so the
number of series is bounded by

    pairs x (3 windows x (12 + 12 components + 7 causes + 2 x 13 histogram series) + 2)

where ``pairs`` is the number of (model, team) pairs with a job in the last 7 days: 173 series
per pair, whatever the number of jobs (``SERIES_PER_PAIR``). Model and team names come from the
emitters, so ``pairs`` is bounded too: past ``max_pairs`` (``ETT_METRICS_MAX_PAIRS``, 200) the
pairs with the most wall seconds in the 7 days keep their labels and the others are summed into
one pair, ``model="__other__", team="__other__"`` (fleet sums stay whole);
``ett_fleet_pairs_folded`` says how many were, and the log says it once.

The windowed figures are gauges: each scrape is a snapshot of the jobs that ended (or, live, last
reported) in the window. TTS and TTR are histograms of those jobs (a snapshot too: read them with
``histogram_quantile`` or ``_sum / _count``, not ``rate``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine

from ett.semconv import FailureCauseValues

from ._fleet import JobFacts, load_facts
from .rules import COMPONENTS, WINDOWS

TIME_BUCKETS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0)
"""Bucket bounds (seconds) of the TTS and TTR histograms."""

CAUSES: tuple[str, ...] = tuple(c.value for c in FailureCauseValues)

SERIES_PER_PAIR = (
    len(WINDOWS) * (12 + len(COMPONENTS) + len(CAUSES) + 2 * (len(TIME_BUCKETS) + 3)) + 2
)
"""The most series one (model, team) pair can have."""

_GAUGES = (
    ("jobs", "Jobs that ended (or, live, last reported) in the window.", None),
    (
        "training_jobs",
        "Jobs of the window that trained (reached a first batch); the others are standalone "
        "jobs such as publishing.",
        None,
    ),
    ("wall_seconds", "Wall seconds of the window's jobs.", "wall"),
    ("productive_seconds", "Productive seconds of the window's jobs.", "productive"),
    ("idle_seconds", "Idle seconds of the window's jobs.", "idle"),
    ("failure_seconds", "Failure seconds of the window's jobs.", "failure"),
    ("checkpoint_blocking_seconds", "Seconds checkpoints blocked training.", "blocking"),
    ("unsaved_seconds", "Training seconds lost to failures after the last checkpoint.", "unsaved"),
)
_RATIOS = (
    ("ett_ratio", "ETT: productive / wall seconds of the window's jobs (0-1).", "productive"),
    ("idle_ratio", "Idle / wall seconds of the window's jobs (0-1).", "idle"),
    ("failure_ratio", "Failure / wall seconds of the window's jobs (0-1).", "failure"),
)
_PAIR = ["model", "team", "window"]
OTHER = "__other__"
"""The model and team of the pair the smallest pairs are summed into past ``max_pairs``."""

log = logging.getLogger(__name__)


class FleetMetrics(Collector):
    """The ``ett_fleet_*`` families (see the module docstring)."""

    def __init__(
        self,
        engine: Engine,
        ttl_s: float = 5.0,
        max_pairs: int = 200,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine = engine
        self.ttl_s = ttl_s
        self.max_pairs = max_pairs
        self.clock = clock
        self._said = False
        self._lock = threading.Lock()
        self._cached: tuple[float, list[GaugeMetricFamily | HistogramMetricFamily]] | None = None

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []  # no read at registration: the families are built at scrape time

    def collect(self) -> Iterator[GaugeMetricFamily | HistogramMetricFamily]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.ttl_s:
                self._cached = (now, self.families(self.clock()))
            families = self._cached[1]
        yield from families

    def families(self, t: float) -> list[GaugeMetricFamily | HistogramMetricFamily]:
        """Every family at instant ``t`` (uncached)."""
        jobs = load_facts(self.engine, t - max(WINDOWS.values()))
        pairs: dict[tuple[str, str], list[JobFacts]] = {}
        for j in jobs:
            pairs.setdefault((j.model, j.team), []).append(j)
        pairs, folded = self._bounded(pairs)
        out = _Families()
        out.folded.add_metric([], folded)
        for (model, team), members in sorted(pairs.items()):
            for window, length in WINDOWS.items():
                inside = [j for j in members if t - length < j.end <= t]
                out.add_window([model, team, window], inside, t, length)
            for state in ("running", "presumed_dead"):
                count = sum(1 for j in members if j.state == state)
                out.live.add_metric([model, team, state], count)
        return out.all()

    def _bounded(
        self, pairs: dict[tuple[str, str], list[JobFacts]]
    ) -> tuple[dict[tuple[str, str], list[JobFacts]], int]:
        """``pairs`` with at most ``max_pairs`` keys, and how many were summed into one."""
        if len(pairs) <= self.max_pairs:
            return pairs, 0
        ranked = sorted(pairs, key=lambda p: (-sum(j.wall for j in pairs[p]), p))
        kept = {p: pairs[p] for p in ranked[: self.max_pairs - 1]}
        rest = ranked[self.max_pairs - 1 :]
        kept.setdefault((OTHER, OTHER), []).extend(j for p in rest for j in pairs[p])
        if not self._said:
            self._said = True
            log.warning(
                "/metrics: %d (model, team) pairs had jobs in the last 7 days, more than "
                "ETT_METRICS_MAX_PAIRS=%d; the %d with the least wall time are summed into "
                'model="%s" (ett_fleet_pairs_folded says how many, each scrape)',
                len(pairs),
                self.max_pairs,
                len(rest),
                OTHER,
            )
        return kept, len(rest)


class _Families:
    """The families of one scrape, filled one (model, team, window) at a time."""

    def __init__(self) -> None:
        self.gauges = {
            name: GaugeMetricFamily(f"ett_fleet_{name}", doc, labels=_PAIR)
            for name, doc, _ in (*_GAUGES, *_RATIOS)
        }
        self.restarts_max = GaugeMetricFamily(
            "ett_fleet_job_restarts_max",
            "The most restarts of one job in the window (attempts allocated in it).",
            labels=_PAIR,
        )
        self.lost = GaugeMetricFamily(
            "ett_fleet_lost_seconds",
            "Idle + failure seconds of the window's jobs by component.",
            labels=[*_PAIR, "component"],
        )
        self.causes = GaugeMetricFamily(
            "ett_fleet_failures",
            "Failed attempts of the window's jobs by cause.",
            labels=[*_PAIR, "cause"],
        )
        self.tts = HistogramMetricFamily(
            "ett_fleet_tts_seconds", "Time to start of the window's jobs.", labels=_PAIR
        )
        self.ttr = HistogramMetricFamily(
            "ett_fleet_ttr_seconds",
            "Time to recover of the window's jobs' failures.",
            labels=_PAIR,
        )
        self.live = GaugeMetricFamily(
            "ett_fleet_live_jobs",
            "Jobs running or presumed dead now.",
            labels=["model", "team", "state"],
        )
        self.folded = GaugeMetricFamily(
            "ett_fleet_pairs_folded",
            '(model, team) pairs of the last 7 days summed into model="__other__" because '
            "there were more than ETT_METRICS_MAX_PAIRS (0: none).",
        )

    def add_window(
        self, labels: list[str], inside: list[JobFacts], t: float, length: float
    ) -> None:
        """The series of the jobs ``inside`` the window ``(t - length, t]`` of one pair."""
        g = self.gauges
        sums = {attr: sum(getattr(j, attr) for j in inside) for _, _, attr in _GAUGES if attr}
        g["jobs"].add_metric(labels, len(inside))
        g["training_jobs"].add_metric(labels, sum(1 for j in inside if j.trained))
        for name, _, attr in _GAUGES[2:]:
            assert attr is not None
            g[name].add_metric(labels, sums[attr])
        if sums["wall"]:  # no job time in the window: no ratio (0 read as "ETT 0 %")
            for name, _, attr in _RATIOS:
                g[name].add_metric(labels, sums[attr] / sums["wall"])
        restarts = (sum(1 for a in j.restarts if t - length < a <= t) for j in inside)
        self.restarts_max.add_metric(labels, max(restarts, default=0))
        for comp in COMPONENTS:
            self.lost.add_metric([*labels, comp], sum(j.lost.get(comp, 0.0) for j in inside))
        counted: dict[str, int] = {}
        for j in inside:
            for cause, n in j.causes.items():
                key = cause if cause in CAUSES else "unknown"
                counted[key] = counted.get(key, 0) + n
        for cause, n in sorted(counted.items()):
            self.causes.add_metric([*labels, cause], n)
        _histogram(self.tts, labels, [j.tts for j in inside if j.tts is not None])
        _histogram(self.ttr, labels, [x for j in inside for x in j.ttr])

    def all(self) -> list[GaugeMetricFamily | HistogramMetricFamily]:
        """The families in exposition order."""
        gauges = [*self.gauges.values(), self.restarts_max]
        return [*gauges, self.lost, self.causes, self.tts, self.ttr, self.live, self.folded]


def _histogram(family: HistogramMetricFamily, labels: list[str], values: list[float]) -> None:
    buckets = [(_le(b), float(sum(1 for v in values if v <= b))) for b in TIME_BUCKETS]
    buckets.append(("+Inf", float(len(values))))
    family.add_metric(labels, buckets, sum(values))


def _le(bound: float) -> str:
    return f"{bound:g}" if bound != int(bound) else f"{int(bound)}.0"


__all__ = ["OTHER", "SERIES_PER_PAIR", "TIME_BUCKETS", "FleetMetrics"]
