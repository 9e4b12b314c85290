"""``/readyz`` sees a SQLite database's full disk without writing
(``ett_collector.api._readiness``):
not ready (503, one line) below ``ETT_READY_MIN_FREE_BYTES`` free or after a write the disk
refused, ready again by itself when space returns; nothing accepted before is lost.

The full disk is real: a 4 MiB tmpfs mounted for the test (root only; elsewhere the test skips
and says so), filled to its last byte by a file of the test's own."""

from __future__ import annotations

import asyncio
import errno
import itertools
import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett import semconv as sc
from ett_collector.api import create_app
from ett_collector.api._readiness import ENV_MIN_FREE_BYTES, DiskWatch, sqlite_path
from ett_collector.settings import ConfigError, Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.tmpfs import mounted_tmpfs

_ids = itertools.count(1)


def _body(job: str, spans: int, note_chars: int = 0) -> bytes:
    def attr(key: str, value: Any) -> dict[str, Any]:
        kind = "intValue" if isinstance(value, int) else "stringValue"
        return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}

    items = []
    for _ in range(spans):
        n = next(_ids)
        items.append(
            {
                "traceId": f"{n:032x}",
                "spanId": f"{n:016x}",
                "name": sc.SPAN_EVAL,
                "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 10**9),
                "endTimeUnixNano": str(1_700_000_000_500_000_000 + n * 10**9),
                "attributes": [attr("user.note", f"{n}-" + "x" * note_chars)],
            }
        )
    resource = {"attributes": [attr(sc.JOB_ID, job), attr(sc.ATTEMPT, 0), attr(sc.RANK, 0)]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": items}]}]}
    return json.dumps(request).encode()


class Client:
    """One app over ``pipeline``, its worker not started (reads and writes on request)."""

    def __init__(self, url: str, pipeline: Pipeline) -> None:
        self.app = create_app(Settings(db_url=url), pipeline)

    def call(self, method: str, path: str, body: bytes = b"") -> httpx.Response:
        async def run() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                headers = {"content-type": "application/json"}
                return await client.request(method, path, content=body, headers=headers)

        return asyncio.run(run())

    def ready(self) -> httpx.Response:
        return self.call("GET", "/readyz")

    def post(self, body: bytes) -> httpx.Response:
        return self.call("POST", "/v1/traces", body)


def _not_ready(answer: httpx.Response, says: str) -> None:
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert says in error and "\n" not in error
    assert answer.headers["retry-after"]


def test_sqlite_paths() -> None:
    assert sqlite_path("sqlite:////srv/ett/ett.db") == "/srv/ett/ett.db"
    assert sqlite_path("sqlite:///rel.db") == os.path.abspath("rel.db")
    assert sqlite_path("sqlite://") is None
    assert sqlite_path("sqlite:///:memory:") is None
    assert sqlite_path("postgresql+psycopg://u@h:5432/ett") is None


def test_below_the_free_space_threshold_the_database_is_not_ready(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'ett.db'}"
    store = Store(url)
    store.upgrade()
    try:
        pipeline = Pipeline(store, settle_s=0)
        monkeypatch.setenv(ENV_MIN_FREE_BYTES, str(2**62))  # more than any disk has free
        _not_ready(Client(url, pipeline).ready(), f"{ENV_MIN_FREE_BYTES}={2**62}")
        monkeypatch.setenv(ENV_MIN_FREE_BYTES, "0")  # the check off
        assert Client(url, pipeline).ready().status_code == 200
        for bad in ("-1", "lots", "1.5"):
            monkeypatch.setenv(ENV_MIN_FREE_BYTES, bad)
            with pytest.raises(ConfigError, match=ENV_MIN_FREE_BYTES):
                Client(url, pipeline)
    finally:
        store.close()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs at ``tmp_path/disk`` for the test's length."""
    with mounted_tmpfs(tmp_path / "disk", "4m") as where:
        yield where


def _remount(disk: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(disk)], check=True)


def _fill(disk: Path) -> Path:
    """Write a file on ``disk`` until the disk refuses a byte more."""
    filler = disk / "filler"
    chunk = b"\0" * 65536
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        try:
            while True:
                f.write(b"\0" * 512)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return filler


def test_a_full_disk_is_not_ready_and_ready_again_when_space_returns(
    small_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{small_disk / 'ett.db'}"
    store = Store(url)
    store.upgrade()
    try:
        pipeline = Pipeline(store, settle_s=0)
        monkeypatch.setenv(ENV_MIN_FREE_BYTES, "0")
        blind = Client(url, pipeline)  # free space not watched: it learns from failed writes
        monkeypatch.setenv(ENV_MIN_FREE_BYTES, str(256 * 1024))
        watching = Client(url, pipeline)
        assert blind.ready().status_code == 200 and watching.ready().status_code == 200
        assert blind.post(_body("disk-job", 20)).status_code == 200

        filler = _fill(small_disk)
        _not_ready(watching.ready(), "bytes free")
        assert blind.ready().status_code == 200  # the rolled-back probe alone cannot tell
        refused = blind.post(_body("disk-job", 2000, note_chars=400))  # ~1 MB: must grow
        assert refused.status_code == 503, refused.text
        _not_ready(blind.ready(), "database or disk is full")
        assert blind.ready().status_code == 503  # a probe does not clear it

        filler.unlink()  # space returns: ready again without a write
        assert blind.ready().status_code == 200 and watching.ready().status_code == 200
        again = blind.post(_body("disk-job", 2000, note_chars=400))
        assert again.status_code == 200, again.text
        assert store.span_counts()["spans"] == 20 + 2000  # the first batch was kept

    finally:
        store.close()


def test_a_read_only_file_system_is_not_ready_until_it_is_writable_again(small_disk: Path) -> None:
    watch = DiskWatch(str(small_disk / "ett.db"), min_free_bytes=0)
    assert watch.problem() is None
    # a write refused while the file system was read-only is remembered until it is writable
    _remount(small_disk, "ro")  # a file system gone read-only (after an I/O error, say)
    try:
        assert "read-only" in (watch.problem() or "")
        watch.write_failed(sqlite3.OperationalError("attempt to write a readonly database"))
        watch.write_failed(ValueError("not the disk's"))  # a bug is no disk problem
    finally:
        _remount(small_disk, "rw")
    assert watch.problem() is None


def test_a_refused_write_is_remembered_until_a_write_passes(tmp_path: Path) -> None:
    watch = DiskWatch(str(tmp_path / "ett.db"), min_free_bytes=0)
    watch.write_failed(sqlite3.OperationalError("database or disk is full"))
    assert "database or disk is full" in (watch.problem() or "")
    assert watch.problem() is not None  # asking again does not clear it
    watch.write_succeeded()
    assert watch.problem() is None
    assert DiskWatch(None, min_free_bytes=2**62).problem() is None  # PostgreSQL: not watched
