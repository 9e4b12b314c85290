"""Which database errors can pass (an outage) and which are bugs.

A write that failed because the database was unreachable, restarting, locked, out of disk or
read-only can succeed later unchanged: the collector answers such a failure with 503 and
``Retry-After`` (OTLP clients retry 503; they drop a batch answered 500). Anything else (a
constraint violated, a statement the database refuses) is a bug and stays a 500.
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import exc

RETRY_AFTER_S: Final = 2
"""Seconds a client is asked to wait before retrying a write refused during an outage: the
first answer; the ingest route answers longer as an outage lasts
(``ett_collector.api._admission``)."""

_SQLITE_PASSING: Final = (
    "database is locked",
    "database table is locked",
    "disk i/o error",
    "database or disk is full",
    "unable to open database file",
    "readonly database",
)
"""Messages of SQLite ``OperationalError`` that can pass (others, such as ``no such table`` or a
syntax error, are bugs)."""

_PG_PASSING_SQLSTATE_CLASSES: Final = ("08", "40", "53", "55", "57", "58")
"""SQLSTATE classes that can pass: connection exception, transaction rollback (a deadlock or a
serialization failure: the transaction was rolled back whole and can run again; a probe saw
ingest deadlock against an `ett db upgrade` run beside it, answered 500, which OTLP exporters
do not retry), insufficient resources (disk full, out of memory, too many connections), object
not in prerequisite state (lock not available), operator intervention (admin shutdown, cannot
connect now), system error (I/O)."""


_DRIVERS: Final = ("sqlite3", "psycopg")
"""The DB-API drivers whose own errors reach the collector unwrapped (a connection checked out
with ``Engine.raw_connection`` raises the driver's error, not SQLAlchemy's)."""

_PEP_249: Final = ("OperationalError", "InterfaceError", "DatabaseError", "Error")
"""PEP 249's error classes, most specific first, by name (both drivers name theirs so)."""


def db_reason(error: BaseException) -> str:
    """The first line of a database error, without SQLAlchemy's statement and links."""
    orig = getattr(error, "orig", None)
    lines = str(orig if orig is not None else error).strip().splitlines()
    return (lines[0] if lines else type(error).__name__)[:300]


def is_transient_db_error(error: BaseException) -> bool:
    """True when ``error`` is a database failure that retrying later can get past (an outage:
    answered 503 with ``Retry-After``); False for a bug (answered 500)."""
    if isinstance(error, exc.TimeoutError):  # no pooled connection came free in time
        return True
    if isinstance(error, exc.DBAPIError):
        if error.connection_invalidated:
            return True
        orig: BaseException = error.orig if error.orig is not None else error
        kind = type(error).__name__  # SQLAlchemy's classes are named after PEP 249's
    elif type(error).__module__.split(".")[0] in _DRIVERS:  # unwrapped: Engine.raw_connection
        orig = error
        kind = next((c.__name__ for c in type(error).__mro__ if c.__name__ in _PEP_249), "")
    else:
        return False
    if type(orig).__module__.startswith("sqlite3"):
        text = str(orig).lower()
        return kind == "OperationalError" and any(m in text for m in _SQLITE_PASSING)
    sqlstate = getattr(orig, "sqlstate", None)
    if isinstance(sqlstate, str) and sqlstate:
        return sqlstate[:2] in _PG_PASSING_SQLSTATE_CLASSES
    # no SQLSTATE: the driver failed before the server answered (connection refused, closed)
    return kind in ("OperationalError", "InterfaceError")
