"""Readiness of a SQLite database's disk, without writing to it on every probe.

``/readyz`` asks the database to take a write (a rolled-back update), but SQLite keeps such a
change in its page cache, so a full or read-only disk answers it "ready" while every real write
fails. :class:`DiskWatch` adds what can be seen without writing, for a database in a file:

- the file system holding it is read-only (``statvfs``'s ``ST_RDONLY``), or the process may not
  write the database's directory or file: not ready;
- it has fewer than ``ETT_READY_MIN_FREE_BYTES`` bytes free (default
  :data:`DEFAULT_MIN_FREE_BYTES`; ``0`` turns the check off): not ready, as a write that grows
  the database or its write-ahead log would fail;
- the last write the ingest route tried failed for the disk (SQLite: ``database or disk is
  full``, ``disk I/O error``, ``readonly database``): not ready until a later write succeeds, or
  the disk shows it changed since (more free space than at the failure, by at least
  :data:`RECOVERED_BYTES`, or a file system that was read-only is not any more). So readiness
  comes back by itself when space returns, even where not-ready keeps the writers away.

Each probe costs one ``statvfs`` and two ``access`` calls. PostgreSQL (a server that says
"could not extend file" itself) and in-memory SQLite are not watched.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from ..settings import DEFAULT_MIN_FREE_BYTES, ENV_MIN_FREE_BYTES, min_free_bytes_from_env

__all__ = [
    "DEFAULT_MIN_FREE_BYTES",
    "ENV_MIN_FREE_BYTES",
    "DiskWatch",
    "min_free_bytes_from_env",  # the parse is Settings.min_free_bytes's (ett_collector.settings)
    "sqlite_path",
]

RECOVERED_BYTES = 1024 * 1024
"""Free space the disk must gain after a failed write before readiness trusts it again."""

_DISK_ERRORS = ("database or disk is full", "disk i/o error", "readonly database")


def sqlite_path(db_url: str) -> str | None:
    """The database file of a SQLite URL; None for other databases and in-memory SQLite."""
    try:
        url = make_url(db_url)
    except ArgumentError:
        return None
    database = url.database
    if not url.drivername.startswith("sqlite") or not database or database == ":memory:":
        return None
    if database.startswith("file:"):  # a URI filename: file:PATH?mode=...
        database = database[len("file:") :].split("?", 1)[0]
    return os.path.abspath(database)


@dataclass(frozen=True)
class _Failure:
    reason: str
    free_bytes: int
    read_only: bool


def _disk_error(error: BaseException) -> str | None:
    """The first line of ``error`` when it says the disk refused a write, else None."""
    orig = getattr(error, "orig", None) or error
    text = str(orig).strip()
    first = text.splitlines()[0] if text else type(orig).__name__
    return first[:200] if any(m in text.lower() for m in _DISK_ERRORS) else None


class DiskWatch:
    """What ``/readyz`` knows of a SQLite database's disk (module docstring)."""

    def __init__(self, path: str | None, min_free_bytes: int) -> None:
        self.path = path
        self.min_free_bytes = min_free_bytes
        self._lock = threading.Lock()
        self._failure: _Failure | None = None
        self.on_short: Callable[[], None] | None = None
        """Called (it must not block) when a probe finds the disk short of space: the prune of
        ``ETT_PRUNE_ON_LOW_DISK`` (``write/_disk_prune.py``) sets it."""

    def free_bytes(self) -> int | None:
        """Free bytes for this process on the database's file system (None: not watched)."""
        disk = self._disk()
        return None if disk is None else disk[0]

    def short_of_space(self) -> bool:
        """True while the disk is not ready for want of space: fewer than ``min_free_bytes``
        free, or a write it refused as full and too little space gained since."""
        return self._check()[1]

    def _disk(self) -> tuple[int, bool] | None:
        """(free bytes for this process, read-only) of the database's file system."""
        if self.path is None:
            return None
        try:
            st = os.statvfs(os.path.dirname(self.path))
        except OSError:
            return None
        return st.f_bavail * st.f_frsize, bool(st.f_flag & os.ST_RDONLY)

    def write_failed(self, error: BaseException) -> None:
        """The ingest route's write failed with ``error``: remembered when it is the disk's."""
        reason = _disk_error(error)
        disk = self._disk()
        if reason is None or disk is None:
            return
        with self._lock:
            self._failure = _Failure(reason, disk[0], disk[1])

    def write_succeeded(self) -> None:
        """A write went through: a remembered disk failure is over."""
        with self._lock:
            self._failure = None

    def problem(self) -> str | None:
        """One line saying why the database's disk cannot take writes now; None when it can
        (or when nothing is watched)."""
        reason, short = self._check()
        if short and self.on_short is not None:
            self.on_short()
        return reason

    def _check(self) -> tuple[str | None, bool]:
        """:meth:`problem`'s line, and whether it is for want of space."""
        disk = self._disk()
        if disk is None or self.path is None:
            return None, False
        free, read_only = disk
        folder = os.path.dirname(self.path)
        if read_only:
            return f"the file system holding {self.path} is read-only", False
        if not os.access(folder, os.W_OK) or (
            os.path.exists(self.path) and not os.access(self.path, os.W_OK)
        ):
            return f"this process may not write {self.path} or its directory", False
        if free < self.min_free_bytes:
            return (
                f"{free} bytes free on the disk of {self.path}, fewer than "
                f"{ENV_MIN_FREE_BYTES}={self.min_free_bytes}"
            ), True
        with self._lock:
            failure = self._failure
            if failure is not None and (
                free >= failure.free_bytes + RECOVERED_BYTES
                or (failure.read_only and not read_only)
            ):
                self._failure = failure = None  # the disk changed since: try writes again
        if failure is not None:
            full = not failure.read_only and "full" in failure.reason.lower()
            return (
                f"the last write failed ({failure.reason}) and the disk has not changed since",
                full,
            )
        return None, False
