"""Zero-code DDP wait timing in a real process (issue 26): ``ett-instrument python probe.py``,
a one-rank gloo DDP program with no ETT code that registers its own communication hook after
wrapping its model. The program runs as it would without ETT (its hook is called, nothing
raises) and every window carries ``ett.window.wait_s``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ett import semconv
from tests.e2e.test_zero_code import _console_spans, _launcher, _require_torchrun
from tests.support.ports import free_port

pytestmark = pytest.mark.e2e

PROBE = """
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d", rank=0, world_size=1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 1))
calls = []

def counted(state, bucket):
    calls.append(state)
    return allreduce_hook(None, bucket)

model.register_comm_hook("user-state", counted)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(5):
    optimizer.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
assert calls == ["user-state"] * 5, calls
print("USER-HOOK-CALLS", len(calls), flush=True)
dist.destroy_process_group()
"""


def test_a_zero_code_ddp_program_keeps_its_hook_and_reports_waits(tmp_path: Path) -> None:
    _require_torchrun()
    script = tmp_path / "probe.py"
    script.write_text(PROBE % free_port())
    env = {
        **os.environ,
        "ETT_JOB_ID": "zc-waits",
        "OTEL_TRACES_EXPORTER": "console",
        "OMP_NUM_THREADS": "1",
    }
    proc = subprocess.run(
        [*_launcher(), sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "USER-HOOK-CALLS 5" in proc.stdout
    windows = [s for s in _console_spans(proc.stdout) if s["name"] == semconv.SPAN_TRAIN_WINDOW]
    assert windows, proc.stdout[-3000:]
    attrs = windows[-1]["attributes"]
    assert attrs[semconv.STEP_LAST] == 4
    assert 0.0 <= attrs[semconv.WINDOW_WAIT_S] < 1.0
