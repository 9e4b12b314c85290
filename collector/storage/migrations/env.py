"""Alembic environment of the collector's schema.

Run programmatically by :func:`ett_collector.storage._migrate.upgrade`, which hands over an open
connection in ``config.attributes["connection"]``. Offline mode (``alembic upgrade --sql``) works
from a ``sqlalchemy.url`` main option.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine, pool

from ett_collector.storage._tables import metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Write the migration SQL for the configured URL instead of running it."""
    context.configure(
        url=config.get_main_option("sqlalchemy.url"),
        target_metadata=metadata,
        literal_binds=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations on the handed-over connection, or on a new one to the configured URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no connection handed over and no sqlalchemy.url configured")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as conn:
            _configure(conn)
            conn.commit()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
