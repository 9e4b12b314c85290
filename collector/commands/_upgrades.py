"""A schema upgrade run by a command (``ett db upgrade``, ``ett serve``, ``ett db
grant-readonly``), with what an operator needs to hear while it runs.

- Which migrations it applied: ``ett serve`` migrated a database at an older schema and said
  only "listening".
- A wait on a lock (PostgreSQL): after a ``kill -9`` of an upgrade, its session lives on in the
  server until its statement ends, holding the upgrade's lock, and the next upgrade waited ~44 s
  without a word. After :data:`LOCK_NOTE_S` of waiting on a lock it says so, once.
- Ctrl-C: the whole upgrade is one transaction (DDL is transactional on PostgreSQL and on
  SQLite: ``ett_collector.storage._migrate``), so an interrupted one applied none of its
  migrations; the line says so, with the revision the database is at, read again.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from ._runner import CommandError

LOCK_NOTE_S = 3.0
"""How long an upgrade waits on another session's lock before it says so."""

INTERRUPTED = 130
"""The exit code of a command stopped by Ctrl-C (128 + SIGINT)."""


def run_upgrade(store: Any, command: str) -> tuple[str | None, list[str]]:
    """Upgrade ``store`` to the newest schema: the revision it was at (None: none) and the
    revisions applied, oldest first. ``command`` (``ett db upgrade``) starts the lines it
    prints on stderr meanwhile; Ctrl-C is ``CommandError`` (exit 130) saying where it left the
    database."""
    before = store.revision()
    watch = _LockWatch(store, command) if store.dialect == "postgresql" else None
    try:
        return before, store.upgrade()
    except KeyboardInterrupt:
        raise CommandError(_interrupted(store), exit_code=INTERRUPTED) from None
    finally:
        if watch is not None:
            watch.stop()


def describe(before: str | None, applied: list[str]) -> str | None:
    """What an upgrade did, in words (None: nothing, the schema was the newest)."""
    if not applied:
        return None
    if before is None:
        return f"created the collector's schema (migrations {applied[0]} to {applied[-1]})"
    return f"applied migration(s) {', '.join(applied)}: the schema is now {applied[-1]}"


def _interrupted(store: Any) -> str:
    """The line for an upgrade stopped by Ctrl-C, with the revision read again where it can be."""
    from ..storage import head_revision

    try:
        now = store.revision()
    except (Exception, KeyboardInterrupt):  # unreachable now, or a second Ctrl-C
        return (
            "interrupted: run it again (an upgrade is one transaction: it applied all of its "
            "migrations or none)"
        )
    if now is not None and now == head_revision():
        return f"interrupted once the upgrade had finished: the schema is {now}"
    at = f"at schema {now}" if now is not None else "without a schema yet"
    return (
        f"interrupted; nothing of the unfinished upgrade was applied (the database is {at}): "
        "run it again"
    )


class _LockWatch:
    """Says once, on stderr, when the upgrade's PostgreSQL session has waited on a lock for
    :data:`LOCK_NOTE_S`, and whose."""

    def __init__(self, store: Any, command: str) -> None:
        from sqlalchemy import event

        self._store = store
        self._command = command
        self._done = threading.Event()
        self._pids: list[int] = []  # the backends of the upgrade's thread's connections
        self._thread_id = threading.get_ident()
        event.listen(store.engine, "checkout", self._checked_out)
        self._thread = threading.Thread(target=self._watch, name="ett-lock-watch", daemon=True)
        self._thread.start()

    def _checked_out(self, dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if threading.get_ident() == self._thread_id:
            self._pids.append(int(dbapi_connection.info.backend_pid))

    def stop(self) -> None:
        from sqlalchemy import event

        self._done.set()
        event.remove(self._store.engine, "checkout", self._checked_out)

    def _watch(self) -> None:
        if self._done.wait(LOCK_NOTE_S):
            return
        try:
            with self._store.engine.connect() as conn:
                while not self._done.is_set():
                    blockers = self._blockers(conn)
                    if blockers is not None:
                        self._say(blockers)
                        return
                    self._done.wait(1.0)
        except Exception:  # best effort: the upgrade itself says what fails
            return

    def _blockers(self, conn: Any) -> list[int] | None:
        """The backends holding a lock the upgrade's session waits for (None: no such wait)."""
        if not self._pids:
            return None
        row = conn.exec_driver_sql(
            "SELECT wait_event_type, pg_blocking_pids(pid) FROM pg_stat_activity WHERE pid = %s",
            (self._pids[-1],),
        ).first()
        conn.rollback()  # no snapshot kept between looks
        if row is None or row[0] != "Lock":
            return None
        return [int(p) for p in row[1] or []]

    def _say(self, blockers: list[int]) -> None:
        whose = ""
        if blockers:
            whose = (
                f": PostgreSQL backend {', '.join(map(str, blockers))} holds it; this goes on "
                f"when that session ends (SELECT pg_terminate_backend({blockers[0]}) ends it)"
            )
        print(
            f"{self._command}: waiting for another session's lock on the database (a previous "
            f"upgrade?){whose}",
            file=sys.stderr,
            flush=True,
        )
