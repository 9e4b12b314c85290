"""Engines for the two supported databases, set up for the collector's load.

SQLite: incremental auto-vacuum on a new file (retention gives the pages it frees back to the
disk in small steps, ``PRAGMA incremental_vacuum``; a file made before keeps reusing them), WAL
journal (readers never block the writer), ``synchronous=NORMAL`` (no fsync per commit;
a power cut may lose the last commits, an application crash loses nothing), a busy timeout,
foreign keys on, and transactions begun by SQLAlchemy with a plain ``BEGIN`` so that DDL is
transactional (migrations are atomic) and every read sees one snapshot.

PostgreSQL: through psycopg 3 (``postgresql://`` URLs are taken to mean ``postgresql+psycopg://``).
Its transactions are READ COMMITTED (each statement sees the commits made before it began); a
read of several statements that must see one instant goes through :func:`read_snapshot`.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import ConnectionPoolEntry, StaticPool

SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite writer waits for the write lock before failing."""

SQLITE_CACHE_KIB = 65_536
"""Page cache per SQLite connection, in KiB."""


def normalize_url(url: str) -> URL:
    """Parse ``url``; route PostgreSQL to psycopg 3 and reject other databases.

    Raises:
        ValueError: for a database other than SQLite or PostgreSQL.
    """
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        if parsed.drivername in ("postgresql", "postgres"):
            parsed = parsed.set(drivername="postgresql+psycopg")
        return parsed
    if backend == "sqlite":
        return parsed
    shown = parsed.render_as_string()  # password hidden
    raise ValueError(f"unsupported database URL {shown!r}: use sqlite or postgresql")


def _is_sqlite_memory(url: URL) -> bool:
    return url.database in (None, "", ":memory:") or "mode=memory" in str(url)


def _set_wal(cur: Any) -> None:
    """``PRAGMA journal_mode=WAL``, waiting out a peer that converts the same new file.

    On a file still in rollback mode, the switch needs the exclusive lock; two processes that
    open a brand-new database at once (four ``ett db upgrade`` or server workers) both hold a
    shared lock while each asks for it, and SQLite answers one of them ``database is locked`` at
    once, without its busy handler (it would deadlock). Once the file is in WAL the pragma only
    reads, so the wait happens on a new file alone, bounded by the busy timeout."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            cur.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _on_sqlite_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
    """Pragmas of every new SQLite connection; hand transaction control to SQLAlchemy."""
    dbapi_connection.isolation_level = None
    cur = dbapi_connection.cursor()
    try:
        cur.execute("PRAGMA auto_vacuum=INCREMENTAL")  # takes effect on a new file only
        _set_wal(cur)
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute(f"PRAGMA cache_size=-{SQLITE_CACHE_KIB}")
        cur.execute("PRAGMA temp_store=MEMORY")
    finally:
        cur.close()


SQLITE_BEGIN_OPTION = "ett_sqlite_begin"
"""Execution option naming the statement that opens a SQLite transaction (default ``BEGIN``;
``BEGIN IMMEDIATE`` takes the write lock at once, for read-then-write work like migrations)."""


def _on_sqlite_begin(conn: Connection) -> None:
    conn.exec_driver_sql(conn.get_execution_options().get(SQLITE_BEGIN_OPTION, "BEGIN"))


def make_engine(url: str) -> Engine:
    """An engine for ``url``; for a SQLite file, its parent folder is created."""
    parsed = normalize_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=False)
    kwargs: dict[str, Any] = {
        "connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}
    }
    if _is_sqlite_memory(parsed):
        kwargs["poolclass"] = StaticPool
    else:
        assert parsed.database is not None
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(parsed, **kwargs)
    event.listen(engine, "connect", _on_sqlite_connect)
    event.listen(engine, "begin", _on_sqlite_begin)
    return engine


SNAPSHOT_ISOLATION = "REPEATABLE READ"
"""PostgreSQL's isolation level of a :func:`read_snapshot` transaction."""


@contextmanager
def read_snapshot(engine: Engine) -> Iterator[Connection]:
    """A connection in a transaction whose statements all see one snapshot of the database: the
    commits made before its first statement, and none after. For reads only.

    Under PostgreSQL's default READ COMMITTED each statement takes a snapshot of its own, so a
    read of a job's raw windows and then of its folded ``window_series`` rows that a compaction
    commits between sees those windows both raw and folded and counts them twice (``loop_s``
    2x for 3-6 of 450 simulated jobs). There the transaction is REPEATABLE READ: psycopg sends
    the level with its ``BEGIN`` (no extra round trip), and the pool sets the connection back
    to READ COMMITTED. A REPEATABLE READ transaction fails to serialize only when it updates,
    deletes or locks a row that changed after its snapshot; one that only reads never does,
    takes only the ``ACCESS SHARE`` locks of any read (as under READ COMMITTED: no writer waits
    for it, and no deadlock), and holds its snapshot for the few statements of one job's read.
    (Not ``postgresql_readonly``: the pool's reset of it sets psycopg's ``read_only`` to False,
    and every later ``BEGIN READ WRITE`` fails on a hot standby.) On SQLite a transaction's
    reads see one snapshot already (WAL, ``BEGIN`` from its first read on)."""
    with engine.connect() as conn:
        if conn.dialect.name == "postgresql":  # before the transaction begins
            conn.execution_options(isolation_level=SNAPSHOT_ISOLATION)
        with conn.begin():
            yield conn


VACUUM_STEP_PAGES = 256
"""Pages given back per ``incremental_vacuum`` step (1 MiB at the default 4 KiB page)."""


def give_back_pages(engine: Engine, stop: threading.Event, pause_s: float) -> int:
    """SQLite: give the file's free pages back to the disk, :data:`VACUUM_STEP_PAGES` per
    write transaction with ``pause_s`` between (a file made before incremental auto-vacuum
    keeps them for its next rows); returns how many. Ends early once ``stop`` is set."""
    with engine.connect() as conn:
        if conn.exec_driver_sql("PRAGMA auto_vacuum").scalar() != 2:
            return 0
    given = 0
    while not stop.is_set():
        freed = vacuum_step(engine)
        if freed == 0:
            return given
        given += freed
        stop.wait(pause_s)
    return given


def vacuum_step(engine: Engine, pages: int = VACUUM_STEP_PAGES) -> int:
    """SQLite with incremental auto-vacuum: give up to ``pages`` free pages of the file back to
    the disk, in one write transaction; how many it gave (0: none were free)."""
    raw = engine.raw_connection()
    try:
        driver: Any = raw.driver_connection  # sqlite3, in autocommit (see above)
        free = int(driver.execute("PRAGMA freelist_count").fetchone()[0])
        if free == 0:
            return 0
        # each step of the pragma frees one page; sqlite3's execute() steps a statement
        # without columns once, its executescript() to the end
        driver.executescript(f"PRAGMA incremental_vacuum({pages})")
    finally:
        raw.close()
    return min(free, pages)
