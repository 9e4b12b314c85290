"""``ett serve`` writes its own log lines on stderr, INFO by default: the alert evaluator's
catch-up line that docs/alerts.md names never showed (only WARNING did, through Python's last
resort), with one worker or several. ``ETT_LOG_LEVEL`` sets the level; a bad one is refused."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ett_collector.logs import ROOT, show_service_logs
from tests.support.collector_process import start_collector

LINE = re.compile(
    r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO alerts: caught up over \d+ instants", re.M
)


def _log_text(home: Path) -> str:
    return "".join(p.read_text() for p in home.glob("collector-*.log"))


@pytest.mark.parametrize("workers", [1, 2])
def test_the_catch_up_line_shows(tmp_path: Path, workers: int) -> None:
    c = start_collector(tmp_path / "home", workers=workers)
    try:
        deadline = time.monotonic() + 60
        while not LINE.search(_log_text(c.home)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert LINE.search(_log_text(c.home)), _log_text(c.home)
    finally:
        c.stop()


def test_a_bad_level_is_refused_before_anything_starts(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    env = {"ETT_LOG_LEVEL": "chatty", "ETT_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "ett_cli", "serve", "--port", "1", "--db", str(db)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "ETT_LOG_LEVEL must be one of DEBUG, INFO, WARNING, ERROR, got 'chatty'" in done.stderr
    assert not db.exists()


def test_the_level_is_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger(ROOT)
    before = (logger.level, list(logger.handlers))
    try:
        monkeypatch.setenv("ETT_LOG_LEVEL", "warning")
        show_service_logs()
        show_service_logs()  # once per process: one handler
        assert logger.level == logging.WARNING
        assert sum(1 for h in logger.handlers if getattr(h, "_ett_service", False)) == 1
    finally:
        logger.setLevel(before[0])
        logger.handlers[:] = before[1]
