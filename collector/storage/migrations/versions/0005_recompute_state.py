"""Recompute bookkeeping on ``jobs``: the sequence the stored figures were computed at, and why
the last recompute failed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

``computed_seq``: the ``dirty_seq`` the stored figures were computed from. Several collectors on
one database may recompute a job at once; a summary computed at an older sequence than the
stored one is never saved over it (before this column the slower one won, and cleared ``dirty``
with figures that missed the newest span). ``failure`` and ``failed_seq``: the reason and the
sequence of a recompute that raised; the job is retried when a new span moves ``dirty_seq``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the three columns (plain ``ADD COLUMN``: SQLite keeps the views on ``jobs``); a clean
    job's figures are at its current sequence."""
    op.add_column(
        "jobs",
        sa.Column("computed_seq", sa.Integer(), nullable=False, server_default=sa.text("0")),
    )
    op.add_column("jobs", sa.Column("failed_seq", sa.Integer(), nullable=True))
    op.add_column("jobs", sa.Column("failure", sa.Text(), nullable=True))
    op.execute(
        "UPDATE jobs SET computed_seq = dirty_seq WHERE NOT dirty"
        " AND job_id IN (SELECT job_id FROM job_figures)"
    )


def downgrade() -> None:
    """Drop the three columns."""
    for column in ("failure", "failed_seq", "computed_seq"):
        op.drop_column("jobs", column)
