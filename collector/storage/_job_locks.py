"""Recompute ownership of a job across collector processes: at most one recomputes it at a time.

PostgreSQL: a session-level advisory lock per job (``pg_try_advisory_lock`` on a 64-bit key
hashed from the job id), held on one connection of the process kept for locks alone, so that a
recompute holds no transaction open while it computes and a crashed process frees its locks.
SQLite serves one host: there the process's own single-flight (one recompute per job per
process) is the lock, and the figures' sequence check keeps the saves of two processes in
order. The locks save work; correctness rests on that check (see ``Store.save_summary``).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from typing import Any

from sqlalchemy import Engine

from ._outage import is_transient_db_error

log = logging.getLogger("ett_collector")


def lock_key(job_id: str) -> int:
    """The advisory lock key of ``job_id``: a signed 64-bit integer (PostgreSQL's bigint)."""
    digest = hashlib.sha256(b"ett-recompute\0" + job_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class JobLocks:
    """Try-locks per job id; always granted on SQLite."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._shared = engine.dialect.name == "postgresql"
        self._conn: Any = None
        self._mutex = threading.Lock()

    def try_lock(self, job_id: str) -> bool:
        """Take the job's lock when no other process holds it; True when taken. A database
        error is raised (the caller's recompute would have failed on it too)."""
        if not self._shared:
            return True
        return bool(self._call("SELECT pg_try_advisory_lock(%s)", job_id))

    def unlock(self, job_id: str) -> None:
        """Release the job's lock (a lost connection has released it already)."""
        if not self._shared:
            return
        try:
            self._call("SELECT pg_advisory_unlock(%s)", job_id)
        except Exception as exc:  # the session is gone, and its locks with it
            if is_transient_db_error(exc):  # an outage, which the loops say in one line: no
                return  # traceback in the log for a lock the lost session released itself
            log.warning("could not release the recompute lock of job %r", job_id, exc_info=True)

    def _call(self, sql: str, job_id: str) -> Any:
        """Run ``sql`` with the job's key on the lock connection; a connection that died (the
        database restarted: its locks went with it) is replaced once."""
        key = lock_key(job_id)
        with self._mutex:
            if self._conn is not None:
                try:
                    return self._execute(sql, key)
                except Exception:
                    self._drop()
            self._conn = self._engine.raw_connection()
            try:
                self._conn.driver_connection.autocommit = True
                return self._execute(sql, key)
            except Exception:
                self._drop()
                raise

    def _execute(self, sql: str, key: int) -> Any:
        cur = self._conn.cursor()
        try:
            cur.execute(sql, (key,))
            return cur.fetchone()[0]
        finally:
            cur.close()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        try:
            conn.invalidate()
        except Exception:  # already unusable
            pass

    def close(self) -> None:
        """Close the lock connection (releasing every lock it holds)."""
        with self._mutex:
            if self._conn is not None:
                self._drop()
