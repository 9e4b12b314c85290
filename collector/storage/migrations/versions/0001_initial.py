"""Initial schema: spans, jobs, job_figures, segments.

Revision ID: 0001
Revises:
Create Date: 2026-05-20

"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the four tables and their indexes."""
    op.create_table(
        "spans",
        sa.Column("trace_id", sa.String(), nullable=False),
        sa.Column("span_id", sa.String(), nullable=False),
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("start", sa.Double(), nullable=False),
        sa.Column("end", sa.Double(), nullable=False),
        sa.Column("attributes", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "start", "trace_id", "span_id", name="pk_spans"),
        sqlite_with_rowid=False,
    )

    op.create_table(
        "jobs",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.Column("dirty", sa.Boolean(), nullable=False),
        sa.Column("dirty_seq", sa.Integer(), nullable=False),
        sa.Column("span_count", sa.Integer(), nullable=False),
        sa.Column("dirty_since", sa.Double(), nullable=False),
        sa.Column("first_seen", sa.Double(), nullable=False),
        sa.Column("last_seen", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", name="pk_jobs"),
    )
    op.create_index("ix_jobs_dirty", "jobs", ["dirty", "dirty_since"])

    op.create_table(
        "job_figures",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.Column("alloc", sa.Double(), nullable=False),
        sa.Column("end", sa.Double(), nullable=False),
        sa.Column("wall_s", sa.Double(), nullable=False),
        sa.Column("productive_s", sa.Double(), nullable=False),
        sa.Column("idle_s", sa.Double(), nullable=False),
        sa.Column("failure_s", sa.Double(), nullable=False),
        sa.Column("ett_pct", sa.Double(), nullable=False),
        sa.Column("idle_pct", sa.Double(), nullable=False),
        sa.Column("failure_pct", sa.Double(), nullable=False),
        sa.Column("tts_s", sa.Double(), nullable=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("unsaved_s", sa.Double(), nullable=False),
        sa.Column("checkpoint_blocking_s", sa.Double(), nullable=False),
        sa.Column("span_count", sa.Integer(), nullable=False),
        sa.Column("last_span_end", sa.Double(), nullable=False),
        sa.Column("computed_at", sa.Double(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.job_id"],
            name="fk_job_figures_job_id_jobs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_figures"),
    )
    op.create_index("ix_job_figures_end", "job_figures", ["end"])
    op.create_index("ix_job_figures_state_end", "job_figures", ["state", "end"])
    op.create_index("ix_job_figures_model_end", "job_figures", ["model", "end"])
    op.create_index("ix_job_figures_team_end", "job_figures", ["team", "end"])

    op.create_table(
        "segments",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("seg", sa.Integer(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("start", sa.Double(), nullable=False),
        sa.Column("end", sa.Double(), nullable=False),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("component", sa.String(), nullable=True),
        sa.Column("share", sa.Double(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.job_id"],
            name="fk_segments_job_id_jobs",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", "seg", "part", name="pk_segments"),
    )
    op.create_index("ix_segments_start", "segments", ["start"])
    op.create_index("ix_segments_end", "segments", ["end"])
    lost = sa.text("category IN ('idle', 'failure')")
    for key, column in (
        ("component", "component"),
        ("job", "job_id"),
        ("model", "model"),
        ("team", "team"),
    ):
        op.create_index(
            f"ix_segments_lost_by_{key}",
            "segments",
            [column, "category", "end", "start", "share"],
            sqlite_where=lost,
            postgresql_where=lost,
        )


def downgrade() -> None:
    """Drop everything."""
    op.drop_table("segments")
    op.drop_table("job_figures")
    op.drop_table("jobs")
    op.drop_table("spans")
