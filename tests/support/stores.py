"""Stores of one database that differ only in their raw window retention."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from ett_collector.storage import Store


@contextmanager
def stores_by_retention(url: str, retentions: Sequence[float | None]) -> Iterator[list[Store]]:
    """One :class:`Store` of ``url`` per raw window retention (None: raw windows kept; 0: folded
    at ingest), the schema at the head; each test puts a job of its own in each."""
    out = [Store(url, raw_window_retention_s=r) for r in retentions]
    out[0].upgrade()
    try:
        yield out
    finally:
        for s in out:
            s.close()
