"""Jobs computed into a throwaway SQLite database, and ``ett report`` read as one line of text:
what the tests of a report's notes (clocks, lost spans, partial loop figures) share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.domain import SpanRecord
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline


def computed_sqlite(tmp_path: Path, spans: Sequence[SpanRecord]) -> str:
    """The URL of a SQLite database under ``tmp_path`` holding ``spans``, every job computed."""
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(list(spans))
    while pipeline.recompute_dirty():
        pass
    store.close()
    return url


def report_text(url: str, job_id: str, capsys: pytest.CaptureFixture[str]) -> str:
    """``ett report JOB`` of ``url`` (exit 0) as one line: table borders gone, a cell's wrapped
    lines joined."""
    assert main(["report", job_id, "--db", url]) == 0
    return " ".join(capsys.readouterr().out.replace("│", " ").split())
