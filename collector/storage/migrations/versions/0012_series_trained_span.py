"""When in its minute a ``window_series`` bucket's windows trained: ``first_start``, ``last_end``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06

A bucket kept its rank's folded windows of one minute, and the throughput series spread their
samples over the whole minute: a loop that ran from :15 of one minute to :15 of the next showed
training 15 s before it began and 45 s after it ended, at 531 and 106 samples/s for a true 637.
Compaction now keeps each bucket's first window's start and last window's end, and the series
spreads its samples over them (``collector/storage/_series.py``). Buckets stored before have
neither (NULL): their place in the minute is guessed from their neighbours
(``_series.legacy_trained``); ``ett recompute`` cannot say more, their windows being folded.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the two columns (plain ``ADD COLUMN``, NULL in every stored bucket: no rewrite)."""
    op.add_column("window_series", sa.Column("first_start", sa.Double(), nullable=True))
    op.add_column("window_series", sa.Column("last_end", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop the two columns."""
    for column in ("last_end", "first_start"):
        op.drop_column("window_series", column)
