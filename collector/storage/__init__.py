"""The collector's storage: SQL tables, the :class:`Store` repository and Alembic migrations."""

from collector.storage._migrate import alembic_config, head_revision
from collector.storage._store import Store

__all__ = ["Store", "alembic_config", "head_revision"]
