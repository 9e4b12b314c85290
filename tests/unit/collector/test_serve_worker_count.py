"""``ett serve --workers N`` refuses a count the machine cannot run (500 on 2 cores started 500
processes: load 105, 4 minutes to stop), in one line and before anything is bound or created,
and notes a count above the cores."""

from __future__ import annotations

from pathlib import Path

import pytest

from ett_cli import main
from ett_collector.commands import _serve_workers
from ett_collector.commands._runner import CommandError
from ett_collector.commands._serve_workers import MAX_WORKERS, WORKERS_PER_CORE, worker_count
from tests.support.errors import one_line
from tests.support.ports import free_port


def test_an_absurd_count_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_serve_workers, "cores", lambda: 2)
    db = tmp_path / "c.db"
    argv = ["serve", "--workers", "500", "--port", str(free_port()), "--db", str(db)]
    assert main(argv) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("ett serve: --workers 500 is more server processes than this")
    assert "at most 16 here (8 per core, 2 core(s), and never more than 64)" in line
    assert not db.exists()
    monkeypatch.setenv("ETT_WORKERS", "17")
    assert main(["serve", "--port", str(free_port()), "--db", str(db)]) == 2
    assert one_line(capsys.readouterr().err).startswith("ett serve: ETT_WORKERS 17 is more")
    assert not db.exists()


def test_the_limit_is_per_core_and_at_most_64(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(_serve_workers, "cores", lambda: 2)
    assert worker_count(2) == 2 and capsys.readouterr().err == ""
    assert worker_count(2 * WORKERS_PER_CORE) == 16
    note = one_line(capsys.readouterr().err)
    assert note == (
        "ett serve: note: 16 workers on 2 core(s): workers beyond the cores add memory, not "
        "ingest rate"
    )
    with pytest.raises(CommandError):
        worker_count(2 * WORKERS_PER_CORE + 1)
    monkeypatch.setattr(_serve_workers, "cores", lambda: 128)
    assert worker_count(MAX_WORKERS) == MAX_WORKERS
    with pytest.raises(CommandError, match="at most 64 here"):
        worker_count(MAX_WORKERS + 1)
