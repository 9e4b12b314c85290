"""Prometheus exposition of the collector itself, on its own registry.

Names: ``ett_`` prefix, base units, ``_total`` for counters; no unbounded labels.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_LATEST


class CollectorMetrics:
    """The collector's own counters and histograms."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._shared: list[Collector] = []
        self._database_up = _DatabaseUp()
        # kept alike: one declaration per metric (each its own name, help and labels)
        self.requests = self._counter(
            "ett_ingest_requests",
            "OTLP export requests by HTTP status code.",
            "code",
        )
        self.spans = self._counter(
            "ett_ingest_spans",
            "Spans received, by outcome (accepted or rejected) and, for rejected ones, reason "
            "(invalid: refused by decoding's checks; pruned_job: of a job whose raw spans "
            "retention pruned).",
            "outcome",
            "reason",
        )
        self.unknown_span_names = self._counter(
            "ett_ingest_unknown_span_names",
            "Accepted spans whose name is not in the ETT vocabulary (kept).",
        )
        self.unknown_attributes = self._counter(
            "ett_ingest_unknown_attributes",
            "Attributes under the ett. namespace that are not in the vocabulary (kept).",
        )
        self.recompute_seconds = Histogram(
            "ett_recompute_duration_seconds",
            "Time to re-derive one job's segments and figures.",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5),
            registry=self.registry,
        )
        self.auth_refusals = self._counter(
            "ett_auth_refusals",
            "Requests refused for their credentials, by reason: missing, wrong (not a valid "
            "token), forbidden (a valid token without the route's scope), url (a credential in "
            "the query string) or banned (an address past ETT_AUTH_MAX_FAILURES wrong tokens).",
            "reason",
        )
        self.recompute_failures = self._counter(
            "ett_recompute_failures",
            "Recomputes that raised (the job is marked failed with the reason until a new span).",
        )
        self.unfolded_windows = self._counter(
            "ett_windows_unfolded",
            "Heartbeat windows that start where their rank's run ends yet could not be folded "
            "into it, by reason: steps_missing, steps_back (a step counter that went back) or "
            "attributes (another attribute changed); each is kept as a run of its own.",
            "reason",
        )

    def _counter(self, name: str, documentation: str, *labels: str) -> Counter:
        """A counter of ``name`` on this registry, with ``labels``."""
        return Counter(name, documentation, labels, registry=self.registry)

    def observe_recompute_failure(self, job_id: str, reason: str) -> None:
        """Count one failed recompute (job id and reason go to the log and the job, not to a
        label: both are unbounded)."""
        del job_id, reason
        self.recompute_failures.inc()

    def observe_recompute(self, job_id: str, seconds: float) -> None:
        """Record one recompute (the job id is not a label: it is unbounded)."""
        del job_id
        self.recompute_seconds.observe(seconds)

    def register_shared(self, collector: Collector) -> None:
        """Add a collector whose figures come from the shared database (the fleet metrics):
        with several worker processes it is read once per scrape, never summed over them.
        Through a database outage it gives no series, and ``ett_database_up`` says 0: the
        scrape still answers 200 with the process's own counters (the outage's 503s among
        them), where a 503 left Prometheus without the one signal of the outage."""
        if self._shared:  # kept last: it says what this scrape's reads found
            self.registry.unregister(self._database_up)
        guarded = _Guarded(collector, self._database_up)
        self.registry.register(guarded)
        self._shared.append(guarded)
        self.registry.register(self._database_up)

    def exposition(self) -> bytes:
        """The text exposition format; summed over worker processes when ``ett serve --workers``
        runs several (prometheus_client's multiprocess mode, ``PROMETHEUS_MULTIPROC_DIR``)."""
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            for collector in self._shared:
                registry.register(collector)
            if self._shared:
                registry.register(self._database_up)
            return generate_latest(registry)
        return generate_latest(self.registry)


class _DatabaseUp(Collector):
    """``ett_database_up``: 1 when this scrape read the shared figures, 0 when a database
    outage kept them out (:class:`_Guarded` sets it as it reads; it is collected after them)."""

    def __init__(self) -> None:
        self.up = 1.0

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        up, self.up = self.up, 1.0  # the next scrape starts up until a read fails
        yield GaugeMetricFamily(
            "ett_database_up",
            "1 when this scrape read the fleet figures from the database, 0 through an outage "
            "(the ett_fleet_* series are then left out).",
            value=up,
        )


class _Guarded(Collector):
    """A shared collector whose database outage gives no series (and ``ett_database_up`` 0)
    instead of failing the whole scrape."""

    def __init__(self, inner: Collector, up: _DatabaseUp) -> None:
        self.inner, self.up = inner, up

    def describe(self) -> Any:
        return []  # no read at registration: the families are built at scrape time

    def collect(self) -> Any:
        from ..storage import is_transient_db_error

        try:
            families = list(self.inner.collect())
        except Exception as exc:
            if not is_transient_db_error(exc):
                raise
            self.up.up = 0.0
            return []
        return families


class ReplicationMetrics(Collector):
    """A read-only collector's standby, read at each scrape from ``state()`` (the replication
    state of ``storage._replica``): ``ett_replication_lag_seconds`` (left out while unknown) and
    ``ett_replication_streaming``."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def describe(self) -> Any:
        return []  # no read at registration

    def collect(self) -> Any:
        from prometheus_client.core import GaugeMetricFamily

        state = self.state()
        if not state.get("standby"):
            return
        lag = state["replication_lag_s"]
        if lag is not None:
            yield GaugeMetricFamily(
                "ett_replication_lag_seconds",
                "How far this read-only collector's standby is behind its primary: 0 when it "
                "has replayed all it received, else the age of its newest replayed commit (which "
                "grows while it is not streaming).",
                value=lag,
            )
        yield GaugeMetricFamily(
            "ett_replication_streaming",
            "1 while the standby's WAL receiver streams from its primary, 0 while not (its "
            "figures are then frozen).",
            value=1.0 if state.get("replication_streaming") else 0.0,
        )
