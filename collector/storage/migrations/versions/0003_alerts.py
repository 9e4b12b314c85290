"""Alert state of the built-in evaluator (collector/alerts).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

One table, ``alerts``: one row per alert from the moment its condition first held (pending) to
its resolution, kept afterwards as history. ``alert_key`` is the canonical label set; at most one
pending or firing row per (rule, alert_key). ``sent_at`` and ``resolved_sent`` are the delivery
outbox of Alertmanager: an alert is kept until Alertmanager accepted it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``alerts`` and its indexes."""
    op.create_table(
        "alerts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("rule", sa.String(), nullable=False),
        sa.Column("alert_key", sa.String(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("labels", sa.Text(), nullable=False),
        sa.Column("annotations", sa.Text(), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("baseline", sa.Double(), nullable=True),
        sa.Column("jobs", sa.Text(), nullable=False),
        sa.Column("figures", sa.Text(), nullable=False),
        sa.Column("active_since", sa.Double(), nullable=False),
        sa.Column("fired_at", sa.Double(), nullable=True),
        sa.Column("resolved_at", sa.Double(), nullable=True),
        sa.Column("last_eval", sa.Double(), nullable=False),
        sa.Column("sent_at", sa.Double(), nullable=True),
        sa.Column("resolved_sent", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alerts"),
    )
    op.create_index("ix_alerts_state", "alerts", ["state", "last_eval"])
    op.create_index("ix_alerts_rule_key", "alerts", ["rule", "alert_key"])


def downgrade() -> None:
    """Drop ``alerts``."""
    op.drop_table("alerts")
