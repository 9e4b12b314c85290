"""Which database a CLI command means, checked before anything is opened or created.

``--db`` takes a URL (``sqlite:///PATH``, ``postgresql+psycopg://USER@HOST:PORT/DB``) or a plain
path to a SQLite file (``/data/collector.db``, ``./x.sqlite``); without it, ``$ETT_DB_URL``, else
``$ETT_HOME/collector.db``. Read commands never create a database: a missing SQLite file is an
error that names the file and says how to point at the right one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..settings import default_db_url, redact_url, scrub_password


class TargetError(Exception):
    """A database that cannot be used, in one line; ``exit_code`` 2 for what the user wrote
    (the commands turn it into ``ett_cli.CliError``), 1 for a database that fails at run time."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


URL_FORMS = "sqlite:///PATH, a path ending in .db, or postgresql+psycopg://USER@HOST:PORT/DB"
"""How a database is written, for error messages."""

DRIVERS: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"sqlite", "sqlite+pysqlite"}),
    "postgresql": frozenset({"postgresql", "postgresql+psycopg", "postgres", "postgres+psycopg"}),
}
"""The URL schemes of each supported database: Python's sqlite3, and psycopg 3 (which
``postgresql://`` means here)."""

_SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")
_WHERE_HINT = "pass --db URL, or set ETT_HOME (the collector's data folder) or ETT_DB_URL"
_DEFAULT_SOURCE = "the default place, ETT_HOME unset"


def _where_hint(source: str) -> str:
    """How to name the right database, for a message about one from ``source``."""
    if source == "--db":
        return (
            "check the path, or pass the --db your collector writes to (`ett serve` "
            "without --db: $ETT_HOME/collector.db)"
        )
    return _WHERE_HINT


@dataclass(frozen=True)
class Target:
    """A database the user named: its URL and where the name came from (for messages)."""

    url: str
    source: str
    """``--db``, ``ETT_DB_URL`` or ``ETT_HOME``."""

    @property
    def shown(self) -> str:
        """The URL as written, without its password (all of it, an unencoded ``@`` in it too)."""
        return redact_url(self.url)

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite file, or None for PostgreSQL and in-memory SQLite."""
        from sqlalchemy.engine import make_url

        parsed = make_url(self.url)
        if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
            return None
        return Path(parsed.database)

    def require_existing(self) -> None:
        """Refuse (exit 1) a SQLite file that does not exist; create nothing."""
        path = self.sqlite_path
        if path is not None and path.is_dir():
            raise TargetError(
                f"database {self.shown} (from {self.source}) is a folder, not a SQLite file: "
                f"{_where_hint(self.source)}",
                exit_code=1,
            )
        if path is not None and not path.is_file():
            raise TargetError(
                f"database {self.shown} (from {self.source}) does not exist: "
                f"{_where_hint(self.source)}",
                exit_code=1,
            )

    def is_sqlite(self) -> bool:
        """False for an existing file that is not a SQLite database (a text file, say), looked
        at read-only; True otherwise."""
        path = self.sqlite_path
        if path is None or not path.is_file():
            return True
        with path.open("rb") as f:
            header = f.read(16)
        return header in (b"", b"SQLite format 3\x00")

    def sqlite_is_empty(self) -> bool:
        """True for an existing SQLite file without the collector's schema (looked at read-only,
        so that an empty or foreign file is left exactly as it was)."""
        import sqlite3

        path = self.sqlite_path
        if path is None:
            return False
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
        try:
            found = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
            ).fetchone()
        except sqlite3.OperationalError as exc:  # not "not a database": it could not be read
            raise self._unreadable(path, exc) from None
        except sqlite3.DatabaseError:
            return True
        finally:
            conn.close()
        return found is None

    def _unreadable(self, path: Path, exc: Exception) -> TargetError:
        """Why the SQLite file at ``path`` cannot be read (it was called "holds no ett data")."""
        why = f"cannot read database {self.shown} (from {self.source}): {exc}"
        if not os.access(path.parent, os.W_OK):
            why += (
                f"; its folder {path.parent} cannot be written (a read-only mount?), and a "
                "SQLite database in WAL mode, as the collector writes it, needs its -shm file "
                "beside it even to be read: copy the file to a folder you may write"
            )
        return TargetError(why, exit_code=1)


def add_db_option(parser: Any) -> None:
    """The ``--db URL`` option every command that opens the database takes (:func:`resolve`
    reads it)."""
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help="database URL or SQLite file (default: $ETT_DB_URL, else SQLite at "
        "$ETT_HOME/collector.db)",
    )


def resolve(raw: str | None) -> Target:
    """The database ``--db`` (or the environment) names; ``TargetError`` (exit 2) when unusable."""
    if raw is not None and not raw.strip():
        raise TargetError(f"--db is empty: write {URL_FORMS}, or leave --db out for the default")
    if raw:
        source, text = "--db", raw
    elif os.environ.get("ETT_DB_URL"):
        source, text = "ETT_DB_URL", os.environ["ETT_DB_URL"]
    else:
        source = "ETT_HOME" if os.environ.get("ETT_HOME") else _DEFAULT_SOURCE
        text = default_db_url()
    if "://" not in text:
        if Path(text).expanduser().is_dir():
            raise TargetError(
                f"{source} {redact_url(text)!r} is a folder, not a database: write {URL_FORMS}"
            )
        if not text.lower().endswith(_SQLITE_SUFFIXES) and not Path(text).is_file():
            raise TargetError(f"{source} {redact_url(text)!r} is not a database: write {URL_FORMS}")
        text = f"sqlite:///{Path(text).expanduser().resolve()}"
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        parsed = make_url(text)
        backend = parsed.get_backend_name()
    except (ArgumentError, ValueError) as exc:
        why = scrub_password(str(exc), text)
        raise TargetError(
            f"{source}: cannot read database URL {redact_url(text)!r} ({why}); write {URL_FORMS}"
        ) from None
    backend = "postgresql" if backend == "postgres" else backend
    if backend not in DRIVERS:
        raise TargetError(
            f"{source}: {backend} databases are not supported; write {URL_FORMS}", exit_code=2
        )
    if parsed.drivername not in DRIVERS[backend]:
        raise TargetError(
            f"{source}: the {backend} driver {parsed.get_driver_name()!r} is not supported: "
            f"write sqlite:///PATH (Python's sqlite3) or postgresql+psycopg://USER@HOST:PORT/DB "
            "(psycopg 3; postgresql:// means it too)"
        )
    if backend == "postgresql" and "@" in f"{parsed.host or ''}{parsed.database or ''}":
        raise TargetError(  # the driver would be handed part of the password as the host
            f"{source}: cannot read database URL {redact_url(text)!r}: its password (or host) "
            "holds an '@': write it percent-encoded, '@' as %40 (urllib.parse.quote(password, "
            "safe=''))"
        )
    if backend == "sqlite" and (make_url(text).database or ":memory:") in ("", ":memory:"):
        # every connection opened its own empty database: spans sent to it were thrown away
        raise TargetError(
            f"{source} {redact_url(text)!r} names no file: an in-memory SQLite database is lost "
            f"with its connection and no other process sees it; write {URL_FORMS}"
        )
    return Target(text, source)


def connection_error(target: Target, exc: Exception) -> TargetError:
    """One line for a database that cannot be reached or read (a runtime failure, exit 1)."""
    first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    detail = scrub_password(first[0], target.url) if first else type(exc).__name__
    return TargetError(f"database {target.shown} (from {target.source}): {detail}", exit_code=1)


def open_for_reading(target: Target, writing: str | None = None) -> Any:
    """The ``Store`` of an existing collector database at this ett's schema, never created nor
    migrated; ``TargetError`` (exit 1) for a missing, empty or unreachable database, and for
    one at another schema: a read that migrated ran 0009's copy of every span under its lock
    from ``ett jobs``, and failed on a hot standby with "cannot execute DROP VIEW in a
    read-only transaction". At an older schema, a read-only database (a hot standby) is told
    to be upgraded through its primary, and a ``writing`` command (``ett recompute``) that it
    is to be run against the primary (it once named the standby to ``ett db upgrade``)."""
    from sqlalchemy.exc import DBAPIError

    from ..storage import Store
    from ..storage._migrate import applied_between, head_revision
    from ..storage._replica import read_only_reason

    target.require_existing()
    empty = TargetError(
        f"database {target.shown} (from {target.source}) holds no ett data: "
        f"{_where_hint(target.source)}",
        exit_code=1,
    )
    if not target.is_sqlite():
        raise TargetError(
            f"database {target.shown} (from {target.source}) is not a SQLite file: "
            f"{_where_hint(target.source)}",
            exit_code=1,
        )
    if target.sqlite_is_empty():
        raise empty
    store = Store(target.url)
    try:
        revision = store.revision()
        if revision is None:
            raise empty
        head = head_revision()
        if revision not in applied_between(None, head):
            store.upgrade()  # another application's schema: ForeignSchema says so, unchanged
        elif revision != head:
            why = read_only_reason(store.engine)
            store.close()
            where = f"database {target.shown} (from {target.source})"
            if why is not None and writing is not None:
                raise TargetError(
                    f"{where} is read-only: {why}; run {writing} against the primary",
                    exit_code=1,
                )
            fix = (
                f"run `ett db upgrade --db {target.shown}` (on PostgreSQL, against the primary; "
                "a migration may take minutes on a large database), or start `ett serve` on "
                "it, which upgrades it"
            )
            if why is not None:
                fix = (
                    f"it is read-only ({why}): run `ett db upgrade` against the primary, or "
                    "start its `ett serve` there, and its standbys follow"
                )
            raise TargetError(
                f"{where} is at schema {revision}, this ett reads {head}: {fix}", exit_code=1
            )
    except DBAPIError as exc:
        raise connection_error(target, exc) from exc
    return store


def require_writable(target: Target, store: Any, command: str) -> None:
    """Refuse (exit 1) a database this command could not write to: a PostgreSQL hot standby or
    read-only sessions, or a SQLite file (or its folder) this user may not write; ``command``
    is what to run against a writable one (``ett recompute``)."""
    from sqlalchemy.exc import DBAPIError

    from ..storage._replica import read_only_reason

    where = f"database {target.shown} (from {target.source})"
    path = target.sqlite_path
    if path is not None:
        for thing in (path, path.parent):
            if thing.exists() and not os.access(thing, os.W_OK):
                raise TargetError(
                    f"{where} is read-only here: {thing} is not writable by this user; run "
                    f"{command} as its owner",
                    exit_code=1,
                )
        return
    try:
        why = read_only_reason(store.engine)
    except DBAPIError as exc:
        raise connection_error(target, exc) from exc
    if why is not None:
        raise TargetError(
            f"{where} is read-only: {why}; run {command} against the primary", exit_code=1
        )
