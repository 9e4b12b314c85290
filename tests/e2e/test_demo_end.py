"""`make demo`'s last lines (issue 17): they advertise no collector URL that has stopped, and the
commands they print read the demo's data. The demo runs with its real collector and worked
example; the trainer, the simulated fleet and the dashboard are left out to keep it short."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def load_demo() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ett_demo", ROOT / "scripts" / "demo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_demo_ends_naming_only_what_still_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = load_demo()
    monkeypatch.setattr(demo, "HOME", tmp_path / "ett-demo")
    monkeypatch.setattr(demo, "_trainer_available", lambda: False)
    monkeypatch.setattr(demo, "_fleet", lambda url: None)
    monkeypatch.setenv("ETT_DEMO_NO_DASHBOARD", "1")

    assert demo.main() == 0
    out = capsys.readouterr().out
    found = re.search(r"ett serve on (http://127\.0\.0\.1:\d+)", out)
    assert found, out
    with pytest.raises(OSError):  # the demo's collector has stopped ...
        urllib.request.urlopen(found.group(1) + "/healthz", timeout=2)
    tail = out[out.index("the demo's collector has stopped") :]
    for line in tail.splitlines():  # ... and the last lines send nobody there
        assert "http://" not in line or "ett serve --db" in line, line
    report = next(line for line in tail.splitlines() if "ett report" in line).split()
    assert report[0] == ".venv/bin/ett" and "--db" in report
    ran = subprocess.run(
        [sys.executable, "-m", "ett_cli", *report[1:]], cwd=ROOT, capture_output=True, text=True
    )
    assert ran.returncode == 0, ran.stderr
    assert "spec-worked-example" in ran.stdout
    assert any("ett serve --db" in line for line in tail.splitlines())


def test_ctrl_c_before_the_dashboard_still_ends_with_the_last_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C during the trainer or the fleet printed a KeyboardInterrupt traceback and no
    word of where the data was. A busy port moved the collector without a word."""
    import socket

    demo = load_demo()
    monkeypatch.setattr(demo, "HOME", tmp_path / "ett-demo")
    monkeypatch.setattr(demo, "_trainer_available", lambda: False)

    def interrupted(url: str) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(demo, "_fleet", interrupted)
    with socket.socket() as busy:
        try:
            busy.bind(("127.0.0.1", 4318))
            busy.listen()
        except OSError:
            pass  # something listens there already: the demo must say so all the same
        assert demo.main() == 0
    out = capsys.readouterr().out
    assert "stopped (Ctrl-C)" in out and "the demo's collector has stopped" in out
    assert "port 4318 is taken" in out
    assert "\x1b[" not in out  # not a terminal: no escape codes
