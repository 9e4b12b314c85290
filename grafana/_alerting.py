"""Grafana-managed alert rules generated from the collector's own rule definitions.

One model, two evaluators: :mod:`ett_collector.alerts.rules` holds the rules (the defaults, or the
file named by ``ETT_ALERT_RULES``); ``ett_collector.alerts.prometheus`` turns each into PromQL over
the ``ett_fleet_*`` series. Here each becomes a Grafana rule whose query A is that same PromQL on
the Prometheus data source; B reduces each series to its last value and C is true for every
series A returns (the PromQL returns only the series whose condition holds). No data means OK.
The ``regression`` kind's PromQL is the export's approximation of the built-in rule; its
``approximation`` annotation, carried over with the others, says so.
"""

from __future__ import annotations

import re
from typing import Any

from grafana_foundation_sdk.builders import alerting, expr, prometheus
from grafana_foundation_sdk.models import alerting as models
from grafana_foundation_sdk.models import dashboard as dashboard_models

from ._panels import FOLDER_TITLE, FOLDER_UID
from ._queries import PROMETHEUS, PROMETHEUS_UID

GROUP = "ett"
"""The rule group's name (its evaluation interval is :data:`INTERVAL`)."""

INTERVAL = "1m"
LOOKBACK_S = 600
EXPR_UID = "__expr__"
_EXPR = dashboard_models.DataSourceRef(type_val=EXPR_UID, uid=EXPR_UID)


def _uid(name: str) -> str:
    """A Grafana rule uid (at most 40 of ``[a-zA-Z0-9_-]``)."""
    return ("ett-" + re.sub(r"[^a-zA-Z0-9_-]", "-", name))[:40]


def _grafana_template(text: str) -> str:
    """Prometheus annotation templates read ``$value``; Grafana's hold it as ``$values.B.Value``."""
    return text.replace("$value ", "$values.B.Value ").replace("$value}", "$values.B.Value}")


def grafana_rule(prom: dict[str, Any]) -> models.Rule:
    """One Grafana rule from one Prometheus alerting rule of the collector's export."""
    promql = prometheus.Dataquery().expr(prom["expr"]).instant().ref_id("A")
    query = (
        alerting.Query("A")
        .datasource_uid(PROMETHEUS_UID)
        .relative_time_range(models.RelativeTimeRange(from_val=LOOKBACK_S, to=0))
        .model(promql.datasource(PROMETHEUS))
    )
    reduce = expr.TypeReduce().ref_id("B").expression("A").reducer("last").datasource(_EXPR)
    last = (
        alerting.Query("B")
        .datasource_uid(EXPR_UID)
        .model(reduce.settings(expr.ExprTypeReduceSettings().mode("dropNN")))
    )
    holds = (
        alerting.Query("C")
        .datasource_uid(EXPR_UID)
        .model(expr.TypeMath().ref_id("C").expression("$B == $B").datasource(_EXPR))
    )
    annotations = {k: _grafana_template(v) for k, v in prom["annotations"].items()}
    return (
        alerting.Rule(prom["alert"])
        .uid(_uid(prom["alert"]))
        .folder_uid(FOLDER_UID)
        .rule_group(GROUP)
        .org_id(1)
        .condition("C")
        .queries([query, last, holds])
        .for_val(prom["for"])
        .no_data_state("OK")
        .exec_err_state("Error")
        .labels(dict(prom["labels"]))
        .annotations(annotations)
        .build()
    )


def rules(path: str | None = None) -> list[models.Rule]:
    """Every enabled rule of the collector's rule set (the defaults, overridden by the rules file
    at ``path`` as ``ett serve`` reads it) that has PromQL, as Grafana rules (the kinds without,
    ``ett_collector.alerts.prometheus.has_promql``, run in ``ett serve`` only).

    Raises:
        ett_collector.alerts.RulesError: for a bad rules file.
    """
    from ett_collector.alerts.prometheus import NotPromQL, prometheus_rule
    from ett_collector.alerts.rules import load_rules

    out = []
    for r in load_rules(path).enabled():
        try:
            out.append(grafana_rule(prometheus_rule(r)))
        except NotPromQL:
            continue  # no PromQL (the loop's kinds): only the built-in evaluator runs it
    return out


def rule_groups(path: str | None = None) -> list[dict[str, Any]]:
    """The rule group in Grafana's file-provisioning shape."""
    file_rules = []
    for rule in rules(path):
        data = rule.to_json()
        for key in ("folderUID", "ruleGroup", "orgID"):  # the group carries them in a file
            data.pop(key, None)
        file_rules.append(_plain(data))
    group = {"orgId": 1, "name": GROUP, "folder": FOLDER_TITLE, "interval": INTERVAL}
    return [group | {"rules": file_rules}]


def _plain(value: Any) -> Any:
    """SDK objects (``to_json``) down to dicts, lists and scalars."""
    if hasattr(value, "to_json"):
        return _plain(value.to_json())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def provisioning_file(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """The alerting provisioning file holding ``groups``."""
    return {"apiVersion": 1, "groups": groups}


def api_rule_group(folder_uid: str, path: str | None = None) -> dict[str, Any]:
    """The rule group in the shape of Grafana's provisioning HTTP API (``PUT .../rule-groups``)."""
    return {
        "title": GROUP,
        "folderUid": folder_uid,
        "interval": 60,
        "rules": [_plain(r.to_json()) for r in rules(path)],
    }
