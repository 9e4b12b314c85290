"""`make screenshots`: docs/dashboard-*.png, one per dashboard page, from a simulated fleet.

Simulates a fleet into a fresh SQLite database (the simulator's `simulate_into_db`), serves it with
`ett serve`, runs `ett dashboard` on it, and photographs each page in headless Chromium (the
system's, through Playwright) once its content is on screen.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT))
CHROMIUM = os.environ.get("ETT_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(url: str, proc: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not start within 60 s")


def _get(url: str) -> object:
    import json

    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def main() -> int:
    from playwright.sync_api import sync_playwright

    from ett_simulator.simulation import simulate_into_db

    home = Path(tempfile.mkdtemp(prefix="ett-screens-"))
    db = f"sqlite:///{home / 'collector.db'}"
    print("simulating a fleet of 60 jobs over 3 days ...", flush=True)
    simulate_into_db(db, jobs=60, days=3, seed=2026)
    api, ui = _port(), _port()
    env = {**os.environ, "ETT_HOME": str(home), "HOME": str(home)}
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "ett_cli", "serve", "--port", str(api), "--db", db],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        api_url = f"http://127.0.0.1:{api}"
        _wait(api_url + "/healthz", procs[0], "ett serve")
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "ett_cli", "dashboard", "--api", api_url, "--port", str(ui)],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        ui_url = f"http://127.0.0.1:{ui}"
        _wait(ui_url + "/_stcore/health", procs[1], "ett dashboard")
        jobs = _get(api_url + "/api/v1/jobs")
        assert isinstance(jobs, list) and jobs, "the simulated fleet has no jobs"
        # the job page of a job that failed and restarted: the richest timeline
        restarted = [j for j in jobs if j["failures"] and j["state"] == "completed"]
        job_id = (restarted or jobs)[0]["job_id"]
        pages = [
            ("fleet", "/", "Worst jobs of the window"),
            ("jobs", "/jobs", "Click a column header"),
            ("job", f"/job?job={job_id}", "Start-up per rank"),
            ("advisor", "/advisor", "Per job"),
            ("alerts", "/alerts", "Alert"),
            # further down their pages (issue 26): scrolled to, photographed from there
            ("fleet-loop", "/", "Slow time by model"),
            ("job-loop", f"/job?job={job_id}", "Inside the loop"),
        ]
        DOCS.mkdir(exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            for name, path, text in pages:
                page.goto(ui_url + path)
                found = page.get_by_text(text).first
                found.wait_for(state="visible", timeout=30_000)
                page.wait_for_timeout(1500)  # let the charts draw
                out = DOCS / f"dashboard-{name}.png"
                if name.endswith("-loop"):
                    found.scroll_into_view_if_needed()
                    page.wait_for_timeout(1500)
                    found.evaluate("e => e.scrollIntoView({block: 'start'})")
                    page.wait_for_timeout(500)
                page.screenshot(path=str(out), full_page=True)
                print(f"wrote {out.relative_to(ROOT)}")
            browser.close()
    finally:
        for proc in reversed(procs):
            proc.terminate()
            proc.wait(timeout=15)
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
