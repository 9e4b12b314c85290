"""A real `ett serve` process on a free port, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.ports import free_port


@dataclass
class Collector:
    """A running `ett serve` subprocess."""

    url: str
    db_url: str
    home: Path
    process: subprocess.Popen[bytes]
    token: str | None = None

    def get(self, path: str, **params: object) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.get(self.url + path, params=params, headers=headers, timeout=30)

    def job(self, job_id: str) -> dict:
        """The job's figures once they include every span acknowledged so far (a read answers
        the stored figures at once, ``fresh: false`` until the collector has recomputed)."""
        return self.wait_for_job(job_id, lambda _job: True)

    def wait_for_job(self, job_id: str, predicate: Any, timeout: float = 30) -> dict:
        """Poll the job's read API until its figures are ``fresh`` (they include every span
        acknowledged before the read) and ``predicate(figures)`` holds; its figures then."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.get(f"/api/v1/jobs/{job_id}")
            if r.status_code == 200 and r.json()["fresh"] and predicate(r.json()):
                return dict(r.json())
            if time.monotonic() > deadline:
                raise AssertionError(f"job {job_id}: {r.status_code} {r.text[:500]}")
            time.sleep(0.2)

    def wait_computed(self, timeout: float = 60) -> None:
        """Wait until the background worker has computed every acknowledged span (list reads
        answer stored figures; see the README's freshness contract)."""
        deadline = time.monotonic() + timeout
        while self.get("/healthz").json()["dirty_jobs"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"jobs still awaiting recompute after {timeout} s")
            time.sleep(0.1)

    def stop(self) -> None:
        stop_process(self.process)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Terminate a server process we started, waiting for it; killed after 15 s."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def start_collector(
    home: Path,
    db_url: str | None = None,
    token: str | None = None,
    port: int | None = None,
    workers: int = 1,
) -> Collector:
    """Start `ett serve` and wait until /healthz answers."""
    port = port or free_port()
    db_url = db_url or f"sqlite:///{home / 'collector.db'}"
    env = {**os.environ, "ETT_HOME": str(home), "ETT_LIVE_REFRESH_S": "1"}
    cmd = [sys.executable, "-m", "cli", "serve", "--port", str(port), "--db", db_url]
    if token:
        cmd += ["--token", token]
    if workers != 1:
        cmd += ["--workers", str(workers)]
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / f"collector-{port}.log", "ab")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"ett serve exited with {proc.returncode}:\n"
                + (home / f"collector-{port}.log").read_text()
            )
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return Collector(url, db_url, home, proc, token)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("ett serve did not answer /healthz within 60 s")
