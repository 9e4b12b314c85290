"""Check on a CUDA GPU (issue 26): the wait ``time_ddp_waits`` reads for NCCL is GPU time.

An NCCL future completes when its collective is enqueued, so a wall clock around it reads no
wait; ``WaitTimer`` records CUDA events instead. Here one NCCL rank trains a small model under
DDP whose communication hook first keeps the GPU busy for a planted time
(``torch.cuda._sleep``) and then all-reduces: the planted time is GPU time between the last
gradients and the all-reduce's end, so the wait read per step must be at least it. Printed: the
planted GPU time per step, the wait read per step, and the step's wall time.

Run it as a script on a machine with a GPU (``python -m tests.performance.bench_ddp_waits_cuda``)
or with pytest (``-m performance -s``); it skips without CUDA. Measured on one H200 (torch 2.11,
NCCL, one rank; the same timer driven without a session): planted 10.12 ms, read 10.11 ms per
step; planted 50.52 ms, read 50.52 ms; nothing planted: 0.66 ms (the all-reduce itself).
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import pytest

import ett
from ett import torch_hooks
from tests.performance.bench_step import _Discard


def run(steps: int = 50, cycles: int = 20_000_000) -> dict[str, float]:
    """Train ``steps`` steps; print and return the planted and read waits (milliseconds)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    store = dist.FileStore(f"{tempfile.mkdtemp()}/s", 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    torch.cuda.set_device(0)
    sess = ett.init(job_id="bench-cuda", exporter=_Discard(), install_handlers=False)

    def planted(state: Any, bucket: Any) -> Any:
        torch.cuda._sleep(cycles)  # GPU work the all-reduce must wait for
        return allreduce_hook(state, bucket)

    net = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 1)).cuda()
    model = torch.nn.parallel.DistributedDataParallel(net, device_ids=[0])
    assert torch_hooks.time_ddp_waits(model, hook=planted, session=sess)
    x = torch.randn(64, 512, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    torch.cuda.synchronize()
    planted_ms = start.elapsed_time(end)
    t0 = time.perf_counter()
    for _ in range(steps):
        model(x).sum().backward()
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t0) / steps * 1e3
    model(x).sum().backward()  # the next last bucket reads the waits recorded so far
    torch.cuda.synchronize()
    read_ns = sess._wait_ns  # the session's counter: what its windows report
    sess.end()
    dist.destroy_process_group()
    read_ms = read_ns / 1e6 / steps
    print(f"  planted GPU time per step   {planted_ms:8.2f} ms")
    print(f"  wait read per step          {read_ms:8.2f} ms")
    print(f"  step wall time              {wall_ms:8.2f} ms")
    return {"planted_ms": planted_ms, "read_ms": read_ms, "wall_ms": wall_ms}


@pytest.mark.performance
def test_bench_ddp_waits_cuda() -> None:
    """Prints the figures (pytest -s); skips without CUDA."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    figures = run()
    assert figures["read_ms"] >= 0.9 * figures["planted_ms"]


if __name__ == "__main__":
    run()
