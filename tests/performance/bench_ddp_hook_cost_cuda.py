"""Benchmark on a CUDA GPU (issue 26): what zero-code wait timing costs a DDP step.

``ett-instrument`` registers a communication hook on every DDP model (``ett._auto_ddp``): a
Python hook (torch's ``allreduce_hook`` inside a timing slot) instead of DDP's built-in C++
reduction. One NCCL rank per GPU trains a stack of ``LAYERS`` linear layers of ``WIDTH``
(default 24 x 4096: 403 M parameters, 16 buckets of DDP's default 25 MB) at batch ``BATCH``,
taking turns between three models: DDP's built-in reduction, torch's ``allreduce_hook``
registered by hand, and the zero-code slot. Printed: the median step time of each (ms, a
``torch.cuda.synchronize()`` per step), its cost over the built-in, the wait read per step and
the largest gradient difference from the built-in's (every model steps as often).

Measured on one H200 (torch 2.11, NCCL, one rank; 4 runs): built-in 18.30-18.45 ms,
``allreduce_hook`` +0.77-0.86 ms, the zero-code slot +0.76-0.93 ms; gradients identical (0.0).
An NCCL ``ReduceOp.AVG`` all-reduce in place of ``allreduce_hook``'s division did not help
(+0.79-0.92 ms): the cost is the Python hook per bucket.

Run it on a machine with a GPU, one process per GPU: ``torchrun --nproc-per-node N -m
tests.performance.bench_ddp_hook_cost_cuda`` (or ``python -m ...`` for one GPU); it skips
without CUDA under pytest (``-m performance -s``).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import pytest

LAYERS, WIDTH, BATCH, STEPS, ROUNDS = 24, 4096, 256, 10, 5


def _group() -> tuple[int, int]:
    import torch
    import torch.distributed as dist

    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "MASTER_ADDR" in os.environ:
        dist.init_process_group("nccl")
    else:
        store = dist.FileStore(f"{tempfile.mkdtemp()}/store", 1)
        dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    return rank, world


def _model(kind: str, waits: list[int]) -> tuple[Callable[[], None], Any]:
    import torch
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    from ett import _auto_ddp

    torch.manual_seed(0)
    net = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)]).cuda()
    ddp: Any = torch.nn.parallel.DistributedDataParallel(net)
    if kind == "allreduce_hook":
        ddp.register_comm_hook(None, allreduce_hook)
    elif kind == "zero-code slot":
        assert _auto_ddp.install(ddp, waits.append) is not None

    x = torch.randn(BATCH, WIDTH, device="cuda")

    def step() -> None:
        ddp(x).sum().backward()

    for _ in range(3):  # DDP rebuilds its buckets after the first step
        step()
    torch.cuda.synchronize()
    return step, net[0].weight


def run() -> dict[str, float]:
    import torch
    import torch.distributed as dist

    rank, world = _group()
    waits: list[int] = []
    kinds = ("built-in", "allreduce_hook", "zero-code slot")
    try:
        models = {k: _model(k, waits) for k in kinds}
        steps = {k: m[0] for k, m in models.items()}
        times: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(ROUNDS):
            for k in kinds:  # turns: the machine's state moves all three alike
                for _ in range(STEPS):
                    start = time.perf_counter()
                    steps[k]()
                    torch.cuda.synchronize()
                    times[k].append(time.perf_counter() - start)
        out = {k: 1e3 * statistics.median(v) for k, v in times.items()}
        out["wait_ms"] = 1e-6 * statistics.median(waits) if waits else float("nan")
        ref = models["built-in"][1].grad  # every model stepped as often: the same gradients
        out["grad_rel_diff"] = max(
            float((m[1].grad - ref).abs().max() / ref.abs().max()) for m in models.values()
        )
    finally:
        dist.destroy_process_group()
    if rank == 0:
        base = out["built-in"]
        print(f"\nDDP step on {world} GPU(s), {LAYERS} x Linear({WIDTH}), batch {BATCH}:")
        for k in kinds:
            print(f"  {k:16s} {out[k]:8.2f} ms  ({out[k] - base:+.2f} ms)")
        print(f"  wait read per step (zero-code slot) {out['wait_ms']:.2f} ms")
        print(f"  largest gradient difference from the built-in {out['grad_rel_diff']:.1e}")
    return out


@pytest.mark.performance
def test_bench_ddp_hook_cost_cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    run()


if __name__ == "__main__":
    run()
