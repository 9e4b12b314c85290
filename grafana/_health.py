"""Alerts and the collector's health: Grafana's alert list of the ETT folder and PromQL panels
over the collectors' ``/metrics`` (scraped by Prometheus), among them the per-model figures of
inside the loop (``ett_model_*``: throughput per rank and slow time, ``docs/metrics.md``)."""

from __future__ import annotations

from typing import NamedTuple

from grafana_foundation_sdk.builders import dashboard as dash

from ._panels import FOLDER_UID, dashboard, series_panel
from ._queries import promql

UID = "ett-alerts"

DESCRIPTION = (
    "Grafana-managed ETT alert rules (folder ETT), the fleet series they read, and the "
    "collector's own metrics: ingest rate and errors, recompute latency."
)
"""The dashboard's description, shown under its title in Grafana."""

_W = 'window="24h"'


class Series(NamedTuple):
    """A PromQL panel's query, the legend of each of its series, and the unit of its values."""

    expr: str
    legend: str
    unit: str


PROMQL: dict[str, Series] = {
    "Fleet ETT % by model (jobs of the last 24 h)": Series(
        expr=f"100 * sum by (model) (ett_fleet_productive_seconds{{{_W}}})"
        f" / sum by (model) (ett_fleet_wall_seconds{{{_W}}})",
        legend="{{model}}",
        unit="percent",
    ),
    "Lost seconds per job-hour by component (last 24 h)": Series(
        expr=f"3600 * sum by (component) (ett_fleet_lost_seconds{{{_W}}})"
        f" / scalar(sum(ett_fleet_wall_seconds{{{_W}}}))",
        legend="{{component}}",
        unit="s",
    ),
    "Throughput per rank by model (samples/s, jobs of the last 24 h)": Series(
        expr="ett_model_samples_per_second_per_rank", legend="{{model}}", unit="short"
    ),
    "Slow time inside the loop by model (jobs of the last 24 h)": Series(
        expr="ett_model_slow_seconds", legend="{{model}}", unit="s"
    ),
    "Ingest requests by HTTP code": Series(
        expr="sum by (code) (rate(ett_ingest_requests_total[5m]))", legend="{{code}}", unit="reqps"
    ),
    "Spans accepted and rejected": Series(
        expr="sum by (outcome) (rate(ett_ingest_spans_total[5m]))",
        legend="{{outcome}}",
        unit="ops",
    ),
    "Recompute time per job, p95": Series(
        expr="histogram_quantile(0.95,"
        " sum by (le) (rate(ett_recompute_duration_seconds_bucket[5m])))",
        legend="p95",
        unit="s",
    ),
    "Spans and attributes outside the ETT vocabulary": Series(
        expr="sum(rate(ett_ingest_unknown_span_names_total[5m]))",
        legend="unknown span names",
        unit="ops",
    ),
}
"""Panel title -> its series. Every expression is run on a real Prometheus in the tests."""

ALERT_LIST = {
    "viewMode": "list",
    "groupMode": "default",
    "maxItems": 50,
    "sortOrder": 1,
    "folderUid": FOLDER_UID,
    "stateFilter": {"firing": True, "pending": True, "normal": True, "error": True, "noData": True},
    "alertInstanceLabelFilter": "",
    "dashboardAlerts": False,
}
"""The options of the alert list panel: every rule of the ETT folder, in every state."""


def build() -> dash.Dashboard:
    """The alerts and collector dashboard."""
    d = dashboard(
        UID, title="ETT alerts and collector", description=DESCRIPTION, tags=["alerts", "collector"]
    )
    alerts = dash.Panel().type("alertlist").title("ETT alert rules").options(ALERT_LIST)
    d = d.with_panel(alerts.span(24).height(8))
    for title, series in PROMQL.items():
        target = promql(series.expr, series.legend)
        d = d.with_panel(series_panel(title, target, series.unit, prometheus=True))
    return d
