"""Shared fixtures: a throwaway PostgreSQL server; a collector ``Store`` on SQLite and PostgreSQL.

PostgreSQL comes from the server binaries (``initdb``, ``pg_ctl``) on PATH or under
``/usr/lib/postgresql/*/bin``. It runs in a temp dir on 127.0.0.1 (a free port, its unix socket in
the temp dir, ``fsync=off``), as the ``postgres`` user when the tests run as root. Without the
binaries the PostgreSQL tests are skipped, or fail when ``CI=true``.

Fixtures that import project packages do so inside the fixture, so that this file loads without
the collector's dependencies.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.support.ports import free_port

if TYPE_CHECKING:
    from ett_collector.storage import Store

PG_MISSING = (
    "PostgreSQL server binaries not found; run `make test` (it installs postgresql) "
    "or apt-get install postgresql"
)
PG_SUPERUSER = "postgres"


def _find_pg_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (newest version first), or None."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).resolve().parent
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin"),
        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        reverse=True,
    )
    for bindir in candidates:
        if (bindir / "initdb").exists() and (bindir / "pg_ctl").exists():
            return bindir
    return None


def _server_user_prefix() -> list[str]:
    """How to run the server binaries: as ``postgres`` when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return []
    try:
        subprocess.run(["id", "-u", PG_SUPERUSER], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/bin/false", PG_SUPERUSER],
            check=True,
            capture_output=True,
        )
    if shutil.which("runuser"):
        return ["runuser", "-u", PG_SUPERUSER, "--"]
    return ["su", PG_SUPERUSER, "-s", "/bin/sh", "-c", '"$0" "$@"']


def _interrupt_on_sigterm() -> Any:
    """Turn SIGTERM (a CI timeout, say) into KeyboardInterrupt, so that fixture teardown still
    stops the server instead of leaving it orphaned. Returns the previous handler, or None when
    left alone (not the main thread, or a handler is already installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        return None

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    signal.signal(signal.SIGTERM, interrupt)
    return previous


@dataclass
class PostgresServer:
    """A running throwaway PostgreSQL server (superuser ``postgres``, trust auth)."""

    bindir: Path
    root: Path
    port: int
    prefix: list[str] = field(default_factory=list)
    user: str = PG_SUPERUSER

    @property
    def datadir(self) -> Path:
        """The cluster's data directory."""
        return self.root / "data"

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """A SQLAlchemy URL of ``database`` on this server."""
        return f"{driver}://{self.user}@127.0.0.1:{self.port}/{database}"

    @property
    def conninfo(self) -> str:
        """A libpq connection string for the ``postgres`` database, as the superuser."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres"

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            conn.execute(sql.encode())

    def create_database(self, name: str | None = None) -> str:
        """Create a database (a fresh ``t_<uuid>`` by default) and return its URL."""
        name = name or f"t_{uuid.uuid4().hex}"
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop ``name``, closing its remaining connections."""
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self.prefix, *args], check=True, capture_output=True, text=True, timeout=120
        )

    def start(self) -> None:
        """initdb and start the server; raise with its log when it does not come up."""
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.datadir),
            "-U",
            self.user,
            "--auth=trust",
            "--encoding=UTF8",
            "--no-sync",
        )
        self.launch()

    def launch(self) -> None:
        """Start the server on its existing data directory (after :meth:`start` and a stop)."""
        options = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.root}",
                "-c fsync=off",
                "-c synchronous_commit=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
            ]
        )
        try:
            self._pg_ctl("-o", options, "start")
        except subprocess.CalledProcessError as exc:
            log = (self.root / "server.log").read_text(errors="replace")[-4000:]
            raise RuntimeError(f"PostgreSQL did not start: {exc.stderr}\n{log}") from exc

    def _pg_ctl(self, *args: str) -> None:
        """``pg_ctl`` on this cluster, logging to ``server.log``, waiting up to 60 s."""
        log = str(self.root / "server.log")
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-l", log, "-w", "-t", "60", *args
        )

    def halt(self) -> None:
        """Stop the server cleanly (``-m fast``: sessions end, acknowledged commits stay), to
        :meth:`launch` it again later: a database outage made by a test."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w", "stop")

    def restart(self) -> None:
        """``pg_ctl restart`` (``-m fast``) with the options it was launched with."""
        self._pg_ctl("-m", "fast", "restart")

    def stop(self) -> None:
        """Stop the server at once (its data is thrown away)."""
        pg_ctl = str(self.bindir / "pg_ctl")
        subprocess.run(
            [*self.prefix, pg_ctl, "-D", str(self.datadir), "-m", "immediate", "-w", "stop"],
            check=False,
            capture_output=True,
            timeout=60,
        )


@contextmanager
def throwaway_postgres(prefix: str = "ett-pg-") -> Iterator[PostgresServer]:
    """A new PostgreSQL server in a temp dir (``prefix``), stopped and removed afterwards.

    Skips (fails under ``CI=true``) without the server binaries.
    """
    bindir = _find_pg_bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail(PG_MISSING)
        pytest.skip(PG_MISSING)
    user_prefix = _server_user_prefix()
    root = Path(tempfile.mkdtemp(prefix=prefix))
    if user_prefix:
        shutil.chown(root, user=PG_SUPERUSER, group=None)
    server = PostgresServer(bindir=bindir, root=root, port=free_port(), prefix=user_prefix)
    previous = _interrupt_on_sigterm()
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server for the whole session."""
    with throwaway_postgres() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """URL of a database created once for the session (``postgresql+psycopg://...``)."""
    return postgres_server.create_database("ett_test")


@pytest.fixture
def fresh_postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """URL of a new, empty database for one test; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex}"
    url = postgres_server.create_database(name)
    yield url
    postgres_server.drop_database(name)


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh database URL of the backend named by ``request.param`` (sqlite or postgres)."""
    backend = getattr(request, "param", "sqlite")
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'collector.db'}"
    url: str = request.getfixturevalue("fresh_postgres_url")
    return url


BACKENDS: list[Any] = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
"""Parameters of the per-backend fixtures; the PostgreSQL one is marked ``postgres``."""


def _backend_store(
    request: pytest.FixtureRequest, tmp_path: Path, **settings: Any
) -> Iterator[Store]:
    """An upgraded, empty ``Store(url, **settings)`` of the backend ``request.param`` names."""
    from ett_collector.storage import Store

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'collector.db'}"
    else:
        url = request.getfixturevalue("fresh_postgres_url")
    s = Store(url, **settings)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """An upgraded, empty collector ``Store`` on SQLite (in ``tmp_path``) and on PostgreSQL."""
    yield from _backend_store(request, tmp_path)


@pytest.fixture(params=BACKENDS)
def folding_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """:func:`store` with a raw window retention of 0: windows folded into runs at ingest."""
    yield from _backend_store(request, tmp_path, raw_window_retention_s=0.0)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a SQLite file in ``tmp_path`` (not created)."""
    return f"sqlite:///{tmp_path / 'c.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """An upgraded, empty collector ``Store`` at :func:`sqlite_url`, for tests of one backend."""
    from ett_collector.storage import Store

    s = Store(sqlite_url)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(autouse=True)
def _private_spool(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every test's trainers (and the processes it starts with this environment) spool to a
    folder of the test's own, never to the user's ``~/.local/state/ett/spool``: a span spooled
    by one test is never delivered into another's collector (``ett._spool``)."""
    monkeypatch.setenv("ETT_SPOOL_DIR", str(tmp_path_factory.mktemp("spool")))
