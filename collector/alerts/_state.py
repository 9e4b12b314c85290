"""Alert state, as Prometheus keeps it: pending while the condition holds for less than the
rule's ``for:``, then firing, then resolved once the condition stops holding.

:func:`advance` is pure: the evaluator persists its output in SQL, the backtest keeps it in
memory, so both walk the same states.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any
from urllib.parse import quote

from ._conditions import Finding


class AlertState(StrEnum):
    """The states an alert goes through (``inactive``: a pending alert that went away)."""

    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"
    INACTIVE = "inactive"


@dataclass(frozen=True)
class Alert:
    """One alert: a rule's condition over one label set, from first seen to resolved."""

    rule: str
    key: str
    labels: dict[str, str]
    annotations: dict[str, str]
    state: AlertState
    active_since: float
    last_eval: float
    value: float | None = None
    baseline: float | None = None
    jobs: tuple[str, ...] = ()
    figures: dict[str, Any] = field(default_factory=dict)
    fired_at: float | None = None
    resolved_at: float | None = None
    id: int | None = None
    sent_at: float | None = None
    """When Alertmanager last accepted it (None: never)."""
    resolved_sent: bool = False
    """Whether Alertmanager accepted its resolution."""

    @property
    def identity(self) -> tuple[str, str]:
        """``(rule, key)``: at most one pending or firing alert has it at a time."""
        return self.rule, self.key

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``GET /api/v1/alerts`` and ``ett alerts --json``."""
        return {
            "id": self.id,
            "rule": self.rule,
            "state": self.state.value,
            "labels": dict(self.labels),
            "annotations": dict(self.annotations),
            "value": self.value,
            "baseline": self.baseline,
            "jobs": list(self.jobs),
            "figures": dict(self.figures),
            "active_since": self.active_since,
            "fired_at": self.fired_at,
            "resolved_at": self.resolved_at,
            "last_eval": self.last_eval,
        }


def job_link(dashboard_url: str, job_id: str) -> str:
    """The dashboard's page of one job: ``{dashboard_url}/job?job=<job_id>`` (issue 14's address;
    the id percent-encoded, so any id is one query value)."""
    return f"{dashboard_url.rstrip('/')}/job?job={quote(job_id, safe='')}"


def annotations_of(finding: Finding, dashboard_url: str) -> dict[str, str]:
    """The annotations of an alert: the figures behind it, the baseline, the jobs, a link."""
    out = {
        "summary": finding.rule.summary or finding.description,
        "description": finding.description,
        "value": f"{finding.value:.6g}",
    }
    if finding.baseline is not None:  # an SLO burn has none: no empty annotation
        out["baseline"] = f"{finding.baseline:.6g}"
    if finding.jobs:
        out["jobs"] = ", ".join(finding.jobs)
        out["dashboard"] = job_link(dashboard_url, finding.jobs[0])
    return out


def advance(
    active: Mapping[tuple[str, str], Alert],
    findings: Iterable[Finding],
    t: float,
    dashboard_url: str,
) -> list[Alert]:
    """The alerts changed by one evaluation at ``t``: new pending or firing ones, updated ones,
    resolved ones and pending ones gone ``inactive`` (to be forgotten).

    ``active`` holds the pending and firing alerts before ``t``; one without a finding at ``t``
    (its condition stopped holding, or its rule was removed from the file) resolves.
    """
    changed: list[Alert] = []
    seen: set[tuple[str, str]] = set()
    for f in findings:
        ident = (f.rule.name, f.key)
        seen.add(ident)
        prior = active.get(ident)
        since = prior.active_since if prior is not None else t
        firing = t - since >= f.rule.for_s
        state = AlertState.FIRING if firing else AlertState.PENDING
        fired_at = prior.fired_at if prior is not None and prior.fired_at is not None else None
        if firing and fired_at is None:
            fired_at = t
        base = prior or Alert(f.rule.name, f.key, {}, {}, state, since, t)
        changed.append(
            replace(
                base,
                labels=dict(f.labels),
                annotations=annotations_of(f, dashboard_url),
                state=state,
                last_eval=t,
                value=f.value,
                baseline=f.baseline,
                jobs=f.jobs,
                figures=dict(f.figures),
                fired_at=fired_at,
            )
        )
    for ident, alert in active.items():
        if ident in seen:
            continue
        if alert.state is AlertState.FIRING:
            changed.append(replace(alert, state=AlertState.RESOLVED, resolved_at=t, last_eval=t))
        else:
            changed.append(replace(alert, state=AlertState.INACTIVE, last_eval=t))
    return changed
