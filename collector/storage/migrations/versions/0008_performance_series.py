"""The compacted windows' step-time series (issue 26): ``window_series``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

Per (job, attempt, rank) and bucket of 60 s, the windows compaction folded into runs, with their
steps, samples, seconds and (where measured) collective waits, so a job's step time and
throughput over time outlive its raw windows. See ``collector/storage/_series.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``window_series`` (runs folded before it have no series: it starts empty)."""
    op.create_table(
        "window_series",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.Double(), nullable=False),
        sa.Column("windows", sa.Integer(), nullable=False),
        sa.Column("steps", sa.BigInteger(), nullable=False),
        sa.Column("samples", sa.BigInteger(), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("timed_steps", sa.BigInteger(), nullable=False),
        sa.Column("timed_s", sa.Double(), nullable=False),
        sa.Column("wait_s", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "attempt", "rank", "bucket", name="pk_window_series"),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    """Drop ``window_series``."""
    op.drop_table("window_series")
