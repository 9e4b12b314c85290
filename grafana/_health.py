"""Alerts and the collector's health: Grafana's alert list of the ETT folder and PromQL panels
over the collectors' ``/metrics`` (scraped by Prometheus), among them the per-model figures of
inside the loop (``ett_model_*``: throughput per rank and slow time, issue 26)."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash

from ._panels import FOLDER_UID, dashboard, series_panel
from ._queries import promql

UID = "ett-alerts"

_W = 'window="24h"'

PROMQL: dict[str, tuple[str, str, str]] = {
    "Fleet ETT % by model (jobs of the last 24 h)": (
        f"100 * sum by (model) (ett_fleet_productive_seconds{{{_W}}})"
        f" / sum by (model) (ett_fleet_wall_seconds{{{_W}}})", "{{model}}", "percent",
    ),
    "Lost seconds per job-hour by component (last 24 h)": (
        f"3600 * sum by (component) (ett_fleet_lost_seconds{{{_W}}})"
        f" / scalar(sum(ett_fleet_wall_seconds{{{_W}}}))", "{{component}}", "s",
    ),
    "Throughput per rank by model (samples/s, jobs of the last 24 h)": (
        "ett_model_samples_per_second_per_rank", "{{model}}", "short",
    ),
    "Slow time inside the loop by model (jobs of the last 24 h)": (
        "ett_model_slow_seconds", "{{model}}", "s",
    ),
    "Ingest requests by HTTP code": (
        "sum by (code) (rate(ett_ingest_requests_total[5m]))", "{{code}}", "reqps",
    ),
    "Spans accepted and rejected": (
        "sum by (outcome) (rate(ett_ingest_spans_total[5m]))", "{{outcome}}", "ops",
    ),
    "Recompute time per job, p95": (
        "histogram_quantile(0.95, sum by (le) (rate(ett_recompute_duration_seconds_bucket[5m])))",
        "p95", "s",
    ),
    "Spans and attributes outside the ETT vocabulary": (
        "sum(rate(ett_ingest_unknown_span_names_total[5m]))", "unknown span names", "ops",
    ),
}  # fmt: skip
"""Panel title -> (PromQL, legend, unit). Every expression is run on a real Prometheus in the
tests."""


def build() -> dash.Dashboard:
    """The alerts and collector dashboard."""
    d = dashboard(
        UID,
        "ETT alerts and collector",
        "Grafana-managed ETT alert rules (folder ETT), the fleet series they read, and the "
        "collector's own metrics: ingest rate and errors, recompute latency.",
        ["alerts", "collector"],
    )
    alerts = (
        dash.Panel()
        .type("alertlist")
        .title("ETT alert rules")
        .options(
            {
                "viewMode": "list",
                "groupMode": "default",
                "maxItems": 50,
                "sortOrder": 1,
                "folderUid": FOLDER_UID,
                "stateFilter": {"firing": True, "pending": True, "normal": True, "error": True,
                                "noData": True},
                "alertInstanceLabelFilter": "",
                "dashboardAlerts": False,
            }
        )
        .span(24)
        .height(8)
    )  # fmt: skip
    d = d.with_panel(alerts)
    for title, (expr, legend, unit) in PROMQL.items():
        d = d.with_panel(series_panel(title, promql(expr, legend), unit, prometheus=True))
    return d
