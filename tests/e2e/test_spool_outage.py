"""Issue 28's outage scenarios on the plain DDP trainer (``plain_trainer.py``) under real torchrun
(2 CPU ranks, an exception on attempt 0, a restart), against a real `ett serve` that is away:

- down for the whole job: the ranks keep every span in their spool (``ETT_SPOOL_DIR``); the
  collector starts after the job has ended (with a token: the spool holds none, the flush takes
  it from ``ETT_TOKEN``), ``ett-instrument flush`` delivers, and the job's figures pass the same
  checks against the trainer's own clock as the run with the collector up
  (``test_plain_trainer.check``, 0.1 s);
- back during the job: the collector starts once the ranks have spooled; the ranks deliver the
  backlog themselves (no flush), the spool ends empty, and the figures pass the same checks.

What a rank killed with SIGKILL loses is tested in ``tests/integration/test_spool_kill.py``.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from tests.e2e.test_plain_trainer import Run, check, figures, launch
from tests.support.collector_process import Collector, start_collector
from tests.support.ports import free_port
from tests.support.waits import wait_until

pytestmark = pytest.mark.e2e

TOKEN = "spool-test-token-3f9a"
ARGS = ("--steps", "30", "--ckpt-every", "10", "--fail", "0:1:exception:20")


@pytest.fixture(scope="module", autouse=True)
def _torchrun() -> None:
    try:
        import torch.distributed.checkpoint
        import torch.distributed.run  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"torchrun is missing: {exc}")
        pytest.skip(f"torchrun is missing ({exc}): `make setup` installs torch")


def _spool_files(root: Path) -> list[Path]:
    return sorted(root.glob("*/*.spool"))


def _away(url: str) -> Collector:
    """Where ``launch`` sends the ranks: only the URL of a collector not started yet."""
    return cast(Collector, SimpleNamespace(url=url))


def _flush(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ett", "flush"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_a_job_run_while_the_collector_is_down_is_flushed_whole(tmp_path: Path) -> None:
    spool = Path(os.environ["ETT_SPOOL_DIR"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    os.environ["ETT_TOKEN"] = TOKEN  # the ranks send it; nothing answers
    try:
        run = launch(tmp_path, _away(url), "down", 1, *ARGS)
    finally:
        del os.environ["ETT_TOKEN"]
    files = _spool_files(spool)
    assert len(files) >= 4, files  # 2 ranks x 2 attempts (one file per process)
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert TOKEN.encode() not in path.read_bytes()
    assert stat.S_IMODE(spool.stat().st_mode) == 0o700
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": url, "ETT_TOKEN": TOKEN}
    refused = _flush(env)  # still down: everything stays, one line says so
    assert refused.returncode == 1 and "did not answer" in refused.stderr, refused
    assert "Traceback" not in refused.stderr and _spool_files(spool) == files
    collector = start_collector(tmp_path / "ett-home", token=TOKEN, port=port)
    try:
        done = _flush(env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "delivered" in done.stdout and _spool_files(spool) == []
        job = figures(collector, run.job_id, 2)
        check(run, job, ["exception"])  # as test_plain_trainer's run with the collector up
    finally:
        collector.stop()


def test_a_collector_back_during_the_job_gets_the_backlog(tmp_path: Path) -> None:
    spool = Path(os.environ["ETT_SPOOL_DIR"])
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    result: dict[str, Any] = {}

    def job() -> None:
        try:
            result["run"] = launch(tmp_path, _away(url), "back", 1, *ARGS, "--steps", "250")
        except BaseException as exc:  # surfaced below
            result["error"] = exc

    thread = threading.Thread(target=job)
    thread.start()
    wait_until(lambda: _spool_files(spool) or not thread.is_alive(), 120, "a spool file")
    assert _spool_files(spool), "the ranks spooled nothing while the collector was away"
    collector = start_collector(tmp_path / "ett-home", port=port)
    up = time.time()
    try:
        thread.join(240)
        assert "error" not in result, result.get("error")
        run: Run = result["run"]
        assert max(run.at("step", 1)) > up, "the job ended before the collector came back"
        job_figures = figures(collector, run.job_id, 2)
        check(run, job_figures, ["exception"])
        assert _spool_files(spool) == []  # delivered by the ranks themselves, no flush
    finally:
        collector.stop()
