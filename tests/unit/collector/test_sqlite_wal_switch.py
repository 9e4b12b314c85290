"""Four processes opening a brand-new SQLite file at once: the switch to WAL is answered
``database is locked`` at once (no busy handler: it would deadlock) for one of them, about one
time in 150 here with plain ``sqlite3``; CI saw it fail test_concurrent_upgrades. The connection
set-up waits that answer out and lets every other error through."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest

from ett_collector.storage._engine import _set_wal


class _Cursor:
    def __init__(self, errors: list[Exception]) -> None:
        self.errors = errors
        self.calls = 0

    def execute(self, sql: str) -> Any:
        assert sql == "PRAGMA journal_mode=WAL"
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self


def test_a_peer_converting_the_new_file_is_waited_out() -> None:
    locked = [sqlite3.OperationalError("database is locked") for _ in range(3)]
    cur = _Cursor(locked)
    _set_wal(cur)
    assert cur.calls == 4


def test_other_errors_are_raised_at_once() -> None:
    cur = _Cursor([sqlite3.OperationalError("disk I/O error")])
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        _set_wal(cur)
    assert cur.calls == 1
