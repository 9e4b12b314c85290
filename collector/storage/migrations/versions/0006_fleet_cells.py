"""The Fleet page's rollup: ``job_totals``, ``job_cells`` and ``fleet_cells``, filled from the
stored segments and summaries.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

The fleet answer read every segment row of its window and grouped them in the database (0.45 s
at 2,000 simulated jobs on SQLite, most of it sorting the rows). The rollup keeps each job's
seconds per hour and per day, and their sum over the fleet per model, team and state, updated
when a job's figures are saved (``collector/storage/_fleet_cells.py``); the answer then reads
cells, and segments only for the partial hours at the window's edges.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _job_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["job_id"], ["jobs.job_id"], name=f"fk_{table}_job_id_jobs", ondelete="CASCADE"
    )


def upgrade() -> None:
    """Create the three tables, then fill them from every job's stored segments."""
    op.create_table(
        "job_totals",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=True),
        sa.Column("team", sa.String(), nullable=True),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("first", sa.Double(), nullable=False),
        sa.Column("last", sa.Double(), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("lost_s", sa.Double(), nullable=False),
        sa.Column("lost_gpu_s", sa.Double(), nullable=False),
        _job_fk("job_totals"),
        sa.PrimaryKeyConstraint("job_id", name="pk_job_totals"),
    )
    op.create_index("ix_job_totals_last", "job_totals", ["last"])
    op.create_table(
        "job_cells",
        sa.Column("job_id", sa.String(), nullable=False),
        sa.Column("grain", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("component", sa.String(), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("gpu_s", sa.Double(), nullable=False),
        _job_fk("job_cells"),
        sa.PrimaryKeyConstraint(
            "job_id", "grain", "t", "category", "component", name="pk_job_cells"
        ),
    )
    op.create_table(
        "fleet_cells",
        sa.Column("grain", sa.Integer(), nullable=False),
        sa.Column("t", sa.Double(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("team", sa.String(), nullable=False),
        sa.Column("state", sa.String(), nullable=False),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("component", sa.String(), nullable=False),
        sa.Column("seconds", sa.Double(), nullable=False),
        sa.Column("gpu_s", sa.Double(), nullable=False),
        sa.Column("jobs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint(
            "grain", "t", "model", "team", "state", "category", "component", name="pk_fleet_cells"
        ),
    )
    _fill(op.get_bind())


def _fill(conn: sa.Connection) -> None:
    """Every stored job's cells, computed as a save computes them."""
    from ett_collector.storage._fleet_cells import replace_job

    figures = conn.execute(
        sa.text("SELECT job_id, model, team, state, summary FROM job_figures ORDER BY job_id")
    ).all()
    for job_id, model, team, state, summary in figures:
        ranks = {
            int(a["attempt"]): len(a.get("ranks") or ())
            for a in json.loads(summary).get("attempts", [])
        }
        rows = conn.execute(
            sa.text(
                'SELECT attempt, start, "end", category, component, share FROM segments'
                " WHERE job_id = :job ORDER BY seg, part"
            ),
            {"job": job_id},
        ).all()
        replace_job(conn, job_id, (model, team, state), [tuple(r) for r in rows], ranks)


def downgrade() -> None:
    """Drop the three tables."""
    for table in ("fleet_cells", "job_cells", "job_totals"):
        op.drop_table(table)
