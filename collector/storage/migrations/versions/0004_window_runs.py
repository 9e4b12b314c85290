"""Compact heartbeats: runs of contiguous ``ett.train.window`` spans, and the compaction line.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

``window_runs``: contiguous heartbeat windows of one (job, attempt, rank) folded into one row
(first start, last end, first and last step, samples and window count; ids and attributes of the
run's first window). ``window_compaction``: per job, the instant up to which raw windows were
folded into runs (raw ``spans`` rows of windows ending before it are gone). See
``collector/storage/_runs.py`` and docs/scaling.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``window_runs`` and ``window_compaction``."""
    op.create_table(
        "window_runs",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("start", sa.Double(), nullable=False),
        sa.Column("trace_id", sa.String(), nullable=False),
        sa.Column("span_id", sa.String(), nullable=False),
        sa.Column("end", sa.Double(), nullable=False),
        sa.Column("step_first", sa.BigInteger(), nullable=True),
        sa.Column("step_last", sa.BigInteger(), nullable=True),
        sa.Column("samples", sa.BigInteger(), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("attributes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint(
            "job_id", "attempt", "rank", "start", "trace_id", "span_id", name="pk_window_runs"
        ),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "window_compaction",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("compacted_to", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_window_compaction"),
    )


def downgrade() -> None:
    """Drop both tables (folded windows are not restored as raw spans)."""
    op.drop_table("window_compaction")
    op.drop_table("window_runs")
