"""The performance figures of a job whose raw spans retention deletes: ``job_performance``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06

A job's "Inside the loop" figures are computed on read from its raw spans and its step-time
series; once retention deleted the raw spans they were computed from what was left and changed
(slow time 71 -> 260 s for one job after a spans-only prune). Retention now keeps what the views
read of the raw spans in this table, in the transaction that marks the job for their deletion
(``collector/storage/_kept_performance.py``). Jobs pruned before it have no row: their views
serve the job object's stored block.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``job_performance`` (empty: no job's raw spans are left to keep from)."""
    op.create_table(
        "job_performance",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("kept_at", sa.Double(), nullable=False),
        sa.Column("productive_s", sa.Double(), nullable=True),
        sa.Column("rank_samples_per_s", sa.Double(), nullable=True),
        sa.Column("rank_s", sa.Double(), nullable=False),
        sa.Column("figures", sa.Text(), nullable=False),
        sa.Column("windows", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.job_id"],
            name="fk_job_performance_job_id_jobs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_performance"),
    )


def downgrade() -> None:
    """Drop ``job_performance``."""
    op.drop_table("job_performance")
