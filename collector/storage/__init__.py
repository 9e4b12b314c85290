"""The collector's storage: SQL tables, the :class:`Store` repository and Alembic migrations."""

from ett_collector.storage._fleet_reads import checkpoint_saves, first_startups, job_summaries
from ett_collector.storage._migrate import alembic_config, head_revision
from ett_collector.storage._outage import RETRY_AFTER_S, db_reason, is_transient_db_error
from ett_collector.storage._store import Store

__all__ = [
    "RETRY_AFTER_S",
    "Store",
    "alembic_config",
    "checkpoint_saves",
    "db_reason",
    "first_startups",
    "head_revision",
    "is_transient_db_error",
    "job_summaries",
]
