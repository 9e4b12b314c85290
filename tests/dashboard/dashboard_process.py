"""A real `ett dashboard` (Streamlit) process on a free port, and a headless system Chromium
driven by Playwright, for browser tests, screenshots and the benchmark."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.support.collector_process import WAIT_S, stop_process

CHROMIUM = os.environ.get("ETT_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MISSING = (
    "needs Chromium ({path}) and Playwright's Python package: run `make setup` "
    "(apt-get install chromium; pip install -e ./instrument -e '.[dashboard,dev]')"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Dashboard:
    """A running `ett dashboard` subprocess."""

    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        stop_process(self.process)


def start_dashboard(
    api_url: str, home: Path, token: str | None = None, refresh_s: float = 2.0
) -> Dashboard:
    """Start `ett dashboard` against ``api_url`` and wait until Streamlit is healthy."""
    port = _free_port()
    home.mkdir(parents=True, exist_ok=True)
    log = home / f"dashboard-{port}.log"
    cmd = [
        sys.executable,
        "-m",
        "ett_cli",
        "dashboard",
        "--api",
        api_url,
        "--port",
        str(port),
        "--refresh-s",
        str(refresh_s),
    ]
    if token:
        cmd += ["--token", token]
    env = {**os.environ, "HOME": str(home)}  # streamlit writes ~/.streamlit
    proc = subprocess.Popen(cmd, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT)  # noqa: SIM115
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ett dashboard exited with {proc.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(url + "/_stcore/health", timeout=1).status_code == 200:
                return Dashboard(url, proc, log)
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"ett dashboard did not become healthy within {WAIT_S:.0f} s")


def require_browser() -> None:
    """Skip (fail under CI=true) when Chromium or Playwright is missing."""
    missing = shutil.which(CHROMIUM) is None and not Path(CHROMIUM).exists()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = True
    if missing:
        message = MISSING.format(path=CHROMIUM)
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def wait_for_text(page: object, text: str, timeout_ms: int = 60_000) -> None:
    """Wait until ``text`` is visible on the Streamlit page."""
    page.get_by_text(text, exact=False).first.wait_for(state="visible", timeout=timeout_ms)  # type: ignore[attr-defined]
