"""Live jobs from their first second (issue 10, 16): a real trainer process's seconds before
``ett.init()`` (``scheduling`` from ``ETT_ALLOCATED_AT`` to the OS's process start, then
``imports``) reach a real `ett serve` while it runs, and stay after it is SIGKILLed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.support.collector_process import Collector

pytestmark = pytest.mark.e2e

EPS = 0.005  # seconds: a figure against instants the child read around what it bounds

CHILD = """
import json, sys, time
from ett._startup import process_start_ns
started = process_start_ns() / 1e9
import ett
t_call = time.time()
sess = ett.init(model="tiny", window_s=0.2)
t_init = time.time()
time.sleep(0.5)  # elapsed time, not a wait: the time to the first batch
t_batch = time.time()
sess.first_batch(step=0)
t_first = time.time()
clock = {"started": started, "call": t_call, "init": t_init, "batch": t_batch, "first": t_first}
print(json.dumps(clock), flush=True)
while True:
    time.sleep(0.01)
    sess.step()
"""


def test_live_figures_count_the_seconds_before_init_and_survive_sigkill(
    collector: Collector,
) -> None:
    job_id = f"startup-{uuid.uuid4().hex[:8]}"
    allocated = time.time() - 3.0  # the scheduler allocated the job 3 s before the process
    env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "ETT_ALLOCATED_AT": f"{allocated:.6f}",
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "RANK": "0",
        "WORLD_SIZE": "1",
    }
    for name in ("TORCHELASTIC_RESTART_COUNT", "ETT_ATTEMPT", "ETT_DISABLED"):
        env.pop(name, None)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        clock = json.loads(child.stdout.readline())
        live = collector.wait_for_job(job_id, lambda j: j["state"] == "running" and j["tts_s"])
        assert live["attempts"][0]["alloc"] == pytest.approx(allocated, abs=0.01)
        # each figure between the instants the child read around what it names
        tts = (clock["batch"] - allocated, clock["first"] - allocated)
        assert tts[0] - EPS <= live["tts_s"] <= tts[1] + EPS
        lost = live["lost_by_component"]
        assert lost["scheduler"] == pytest.approx(clock["started"] - allocated, abs=0.05)
        runtime = (clock["call"] - clock["started"], clock["init"] - clock["started"])
        assert runtime[0] - EPS <= lost["runtime"] <= runtime[1] + EPS
        assert live["wall_s"] == pytest.approx(live["computed_at"] - allocated, abs=0.5)
        time.sleep(0.5)  # elapsed time, not a wait: it trains on past the live read
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        killed_at = time.time()
        # whatever the killed process had queued is lost with it: figures computed after the kill
        job = collector.wait_for_job(job_id, lambda j: j["computed_at"] > killed_at + 1.0)
        assert job["attempts"][0]["alloc"] == pytest.approx(allocated, abs=0.01)
        assert job["tts_s"] == pytest.approx(live["tts_s"], abs=0.01)
        assert job["lost_by_component"]["runtime"] == pytest.approx(lost["runtime"], abs=0.01)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
