"""A real `ett serve` process on a free port, for end-to-end tests and benchmarks.

Waits are generous (:data:`WAIT_S`): CI runs the suite on a loaded 2-core machine, where a
collector's start or a recompute may take many times what it takes on an idle one; a wait
returns as soon as its condition holds, so a long bound costs nothing when things go well.
"""

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
from tests.support.waits import WAIT_S, wait_until


@dataclass
class Collector:
    """A running `ett serve` subprocess."""

    url: str
    db_url: str
    home: Path
    process: subprocess.Popen[bytes]
    token: str | None = None

    def get(self, path: str, **params: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.get(self.url + path, params=params, headers=headers, timeout=30)

    def job(self, job_id: str) -> dict[str, Any]:
        """The job's figures once they include every span acknowledged so far (a read answers
        the stored figures at once, ``fresh: false`` until the collector has recomputed)."""
        return self.wait_for_job(job_id, lambda _job: True)

    def wait_for_job(self, job_id: str, predicate: Any, timeout: float = WAIT_S) -> dict[str, Any]:
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

    def wait_ended(self, job_id: str, timeout: float = WAIT_S) -> dict[str, Any]:
        """The job's figures once the collector has seen it end (completed or failed)."""
        return self.wait_for_job(job_id, lambda j: j["state"] in ("completed", "failed"), timeout)

    def wait_computed(self, timeout: float = WAIT_S) -> None:
        """Wait until the background worker has computed every acknowledged span (list reads
        answer stored figures; see docs/collector.md, "Freshness")."""
        wait_until(
            lambda: not self.get("/healthz").json()["dirty_jobs"],
            timeout,
            "the recompute of every acknowledged span",
            interval=0.1,
        )

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
    env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> Collector:
    """Start `ett serve` and wait until /healthz answers, from each of its ``workers`` (a
    connection opened before a worker listens stays on another one for its life). Without
    ``port``, a free one; should another process take it before the collector binds it, the
    collector starts on another.
    ``env``: settings for the server on top of this process's environment; ``python``: the
    interpreter whose installed ``ett_cli`` serves (another environment's, say), started in
    ``home``."""
    for _ in range(2):
        try:
            return _start(home, db_url, token, port or free_port(), workers, env, python)
        except _PortTaken:
            if port is not None:
                raise
    return _start(home, db_url, token, free_port(), workers, env, python)


class _PortTaken(RuntimeError):
    """`ett serve` found its port in use."""


def _start(
    home: Path,
    db_url: str | None,
    token: str | None,
    port: int,
    workers: int,
    extra_env: dict[str, str] | None = None,
    python: str = sys.executable,
) -> Collector:
    db_url = db_url or f"sqlite:///{home / 'collector.db'}"
    env = {**os.environ, "ETT_HOME": str(home), "ETT_LIVE_REFRESH_S": "1", **(extra_env or {})}
    cmd = [python, "-m", "ett_cli", "serve", "--port", str(port), "--db", db_url]
    if token:
        cmd += ["--token", token]
    if workers != 1:
        cmd += ["--workers", str(workers)]
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / f"collector-{port}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - lives with the process
    cwd = None if python == sys.executable else home
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + WAIT_S
    pids: set[int | None] = set()  # the workers that answered: every one listens before the tests
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = log_path.read_text()
            error = _PortTaken if f"port {port} is in use" in output else RuntimeError
            raise error(f"ett serve exited with {proc.returncode}:\n{output}")
        try:
            r = httpx.get(url + "/healthz", timeout=5)  # a new connection each time
            if r.status_code == 200:
                pids.add(r.json().get("pid"))
                if len(pids) == workers:
                    return Collector(url, db_url, home, proc, token)
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(
        f"ett serve's {workers} workers did not all answer /healthz within {WAIT_S:.0f} s "
        f"({len(pids)} did)"
    )
