"""The ``alerts`` table (migration 0003): the evaluator's state and the delivery outbox."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    Double,
    Engine,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    delete,
    func,
    insert,
    select,
    update,
)

from ._state import Alert, AlertState

metadata = MetaData()
"""The alert tables (the storage tables are in ``ett_collector.storage._tables.metadata``)."""

alerts = Table(
    "alerts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("rule", String(), nullable=False),
    Column("alert_key", String(), nullable=False),
    Column("state", String(16), nullable=False),
    Column("labels", Text, nullable=False),
    Column("annotations", Text, nullable=False),
    Column("value", Double),
    Column("baseline", Double),
    Column("jobs", Text, nullable=False),
    Column("figures", Text, nullable=False),
    Column("active_since", Double, nullable=False),
    Column("fired_at", Double),
    Column("resolved_at", Double),
    Column("last_eval", Double, nullable=False),
    Column("sent_at", Double),
    Column("resolved_sent", Boolean, nullable=False),
    Index("ix_alerts_state", "state", "last_eval"),
    Index("ix_alerts_rule_key", "rule", "alert_key"),
)
"""Mirror of the table that migration 0003 creates."""

alert_clock = Table(
    "alert_clock",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("evaluated_at", Double, nullable=False),
)
"""Mirror of the table that migration 0010 creates: one row (``id`` 1), the last evaluation."""

STATES = tuple(s.value for s in AlertState if s is not AlertState.INACTIVE)
"""The states a stored alert can have."""

_ACTIVE = (AlertState.PENDING.value, AlertState.FIRING.value)


def _finite_or_none(v: float | None) -> float | None:
    """NaN and infinities are stored as NULL (JSON and SQL both dislike them)."""
    return None if v is None or v != v or v in (float("inf"), float("-inf")) else v


def _alert_row(a: Alert) -> dict[str, Any]:
    return {
        "rule": a.rule,
        "alert_key": a.key,
        "state": a.state.value,
        "labels": json.dumps(a.labels, sort_keys=True),
        "annotations": json.dumps(a.annotations, sort_keys=True),
        "value": _finite_or_none(a.value),
        "baseline": _finite_or_none(a.baseline),
        "jobs": json.dumps(list(a.jobs)),
        "figures": json.dumps(
            {k: _finite_or_none(v) if isinstance(v, float) else v for k, v in a.figures.items()}
        ),
        "active_since": a.active_since,
        "fired_at": a.fired_at,
        "resolved_at": a.resolved_at,
        "last_eval": a.last_eval,
        "sent_at": a.sent_at,
        "resolved_sent": a.resolved_sent,
    }


def _alert_of_row(r: Any) -> Alert:
    return Alert(
        rule=r.rule,
        key=r.alert_key,
        labels=json.loads(r.labels),
        annotations=json.loads(r.annotations),
        state=AlertState(r.state),
        active_since=r.active_since,
        last_eval=r.last_eval,
        value=r.value,
        baseline=r.baseline,
        jobs=tuple(json.loads(r.jobs)),
        figures=json.loads(r.figures),
        fired_at=r.fired_at,
        resolved_at=r.resolved_at,
        id=r.id,
        sent_at=r.sent_at,
        resolved_sent=bool(r.resolved_sent),
    )


class AlertStore:
    """Reads and writes of the ``alerts`` table (the schema comes from the migrations)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def active(self) -> dict[tuple[str, str], Alert]:
        """Pending and firing alerts by ``(rule, key)``."""
        q = select(alerts).where(alerts.c.state.in_(_ACTIVE))
        with self.engine.connect() as conn:
            return {(a.rule, a.key): a for a in map(_alert_of_row, conn.execute(q))}

    def last_evaluation(self) -> float | None:
        """The latest instant the evaluator evaluated at (None: it never did here)."""
        with self.engine.connect() as conn:
            clock = conn.execute(select(alert_clock.c.evaluated_at)).scalar()
            kept = conn.execute(select(func.max(alerts.c.last_eval))).scalar()
        return max((t for t in (clock, kept) if t is not None), default=None)

    def save(self, changed: Iterable[Alert], evaluated_at: float | None = None) -> None:
        """Write one evaluation's changes in one transaction (inactive ones are deleted), with
        the instant it evaluated at (:meth:`last_evaluation`) when given."""
        with self.engine.begin() as conn:
            if evaluated_at is not None:
                moved = conn.execute(update(alert_clock).values(evaluated_at=evaluated_at))
                if moved.rowcount == 0:
                    conn.execute(insert(alert_clock).values(id=1, evaluated_at=evaluated_at))
            for a in changed:
                if a.id is None:
                    if a.state is not AlertState.INACTIVE:
                        conn.execute(insert(alerts).values(**_alert_row(a)))
                elif a.state is AlertState.INACTIVE:
                    conn.execute(delete(alerts).where(alerts.c.id == a.id))
                else:
                    row = _alert_row(a)
                    del row["sent_at"], row["resolved_sent"]  # owned by the delivery
                    conn.execute(update(alerts).where(alerts.c.id == a.id).values(**row))

    def alerts(self, state: str | None = None, limit: int = 500) -> list[Alert]:
        """Alerts, newest activity first; ``state`` filters (pending, firing, resolved)."""
        q = select(alerts)
        if state is not None:
            q = q.where(alerts.c.state == state)
        q = q.order_by(alerts.c.last_eval.desc(), alerts.c.id.desc()).limit(limit)
        with self.engine.connect() as conn:
            return [_alert_of_row(r) for r in conn.execute(q)]

    def outbox(self, now: float, resend_s: float) -> list[Alert]:
        """Alerts Alertmanager should hear about now: firing ones not sent within ``resend_s``
        and resolved ones whose resolution it has not accepted."""
        unsent = alerts.c.sent_at.is_(None) | (alerts.c.sent_at <= now - resend_s)
        firing = (alerts.c.state == AlertState.FIRING.value) & unsent
        resolved = (alerts.c.state == AlertState.RESOLVED.value) & alerts.c.resolved_sent.is_(False)
        q = select(alerts).where(firing | resolved).order_by(alerts.c.id)
        with self.engine.connect() as conn:
            return [_alert_of_row(r) for r in conn.execute(q)]

    def mark_sent(self, sent: Iterable[Alert], now: float) -> None:
        """Record that Alertmanager accepted ``sent``."""
        with self.engine.begin() as conn:
            for a in sent:
                values: dict[str, Any] = {"sent_at": now}
                if a.state is AlertState.RESOLVED:
                    values["resolved_sent"] = True
                conn.execute(update(alerts).where(alerts.c.id == a.id).values(**values))
