"""Retention bookkeeping on ``jobs``: how far the job's stored data has been pruned, and when.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01

``pruned``: 0 all kept; 1 its raw spans are being deleted; 2 they are gone (its window runs
kept); 3 its runs are gone too (its figures, segments and fleet cells kept until they go with
the job's row). ``spans_pruned_at`` (collector clock, unix seconds; NULL while the raw spans
are kept) is set in the transaction that starts deleting a job's raw spans
(``collector/storage/_retention.py``), before any span goes: from then on the job's stored
figures, segments and fleet cells stay as they are and a recompute of it refuses, so no figure
is ever derived from a part of its spans.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the columns (plain ``ADD COLUMN``: SQLite keeps the views on ``jobs``)."""
    op.add_column(
        "jobs", sa.Column("pruned", sa.Integer(), nullable=False, server_default=sa.text("0"))
    )
    op.add_column("jobs", sa.Column("spans_pruned_at", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop the columns."""
    op.drop_column("jobs", "spans_pruned_at")
    op.drop_column("jobs", "pruned")
