"""Alembic migrations of the collector's schema (run from code by ``ett_collector.storage``)."""
