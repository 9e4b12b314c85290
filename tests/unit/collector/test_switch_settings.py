"""The yes/no settings of ``ett serve`` (``ETT_READ_ONLY``, ``ETT_PRUNE_ON_LOW_DISK``): the
words a person types for on and off are read as such, anything else is a start-up error that
names the variable (a typo must not leave the disk-full prune silently off)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ett_collector.settings import ConfigError, Settings

SWITCHES = {"ETT_READ_ONLY": "read_only", "ETT_PRUNE_ON_LOW_DISK": "prune_on_low_disk"}


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize(
    ("raw", "on"),
    [
        ("1", True),
        ("true", True),
        (" Yes ", True),
        ("on", True),
        ("", False),
        ("0", False),
        ("false", False),
        ("No", False),
        ("off", False),
    ],
)
def test_on_and_off_words(monkeypatch: pytest.MonkeyPatch, name: str, raw: str, on: bool) -> None:
    monkeypatch.setenv(name, raw)
    assert getattr(Settings(db_url="sqlite:///x.db"), SWITCHES[name]) is on


@pytest.mark.parametrize("name", SWITCHES)
@pytest.mark.parametrize("raw", ["maybe", "2", "enable"])
def test_other_words_are_refused(monkeypatch: pytest.MonkeyPatch, name: str, raw: str) -> None:
    monkeypatch.setenv(name, raw)
    with pytest.raises(ConfigError, match=f"{name} must be 1 or 0 .*{raw!r}"):
        Settings(db_url="sqlite:///x.db")


def test_serve_refuses_a_typo_in_one_line(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ett_cli",
            "serve",
            "--port",
            "0",
            "--db",
            f"sqlite:///{tmp_path}/x.db",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ETT_PRUNE_ON_LOW_DISK": "maybe"},
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "ETT_PRUNE_ON_LOW_DISK must be 1 or 0" in run.stderr
    assert "Traceback" not in run.stderr
