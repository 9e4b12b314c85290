"""When the built-in evaluator last evaluated (collector/alerts).

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06

One table of one row, ``alert_clock``: the instant of the evaluator's last evaluation, kept even
when no alert is. A collector that starts walks the history since then before its first live
evaluation (``AlertService.catch_up``); without the row, a flat fleet's every restart walked the
rules' whole reach (8 days) again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``alert_clock``."""
    op.create_table(
        "alert_clock",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("evaluated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_alert_clock"),
    )


def downgrade() -> None:
    """Drop ``alert_clock``."""
    op.drop_table("alert_clock")
