"""A plain DDP trainer with one slowed rank: the subject of ``test_straggler_e2e.py``.

Run it under torchrun (gloo, CPU). It is instrumented with the library's API: ``ett.init``
(windows of ``--window-s``), ``step(samples)`` per optimizer step, and
``ett.torch_hooks.time_ddp_waits(model)``, which times each step's wait for the gradient
all-reduce (``ett.window.wait_s``). Every rank does ``--work-s`` of work per step inside its
forward (a sleep: compute that no collective waits for); rank ``--slow-rank`` sleeps
``--slow-s`` more there, so the other ranks wait for it in their backward pass.

It keeps its own clock, independent of ETT: ``--clock-dir/rank<R>.jsonl``, one JSON line per
optimizer step returned: ``step`` (its index), ``time`` (unix seconds just after
``optimizer.step()``) and ``backward_s`` (the seconds ``loss.backward()`` took: with this tiny
model almost all of it is the wait for the all-reduce, so ``step time - backward_s`` is the
rank's own compute time per step).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import ett
from ett import torch_hooks


class Work(nn.Module):
    """The model, with ``work_s`` of sleep in its forward."""

    def __init__(self, work_s: float) -> None:
        super().__init__()
        self.work_s = work_s
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.work_s)
        return self.net(x)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--work-s", type=float, default=0.03)
    parser.add_argument("--slow-rank", type=int, default=-1)
    parser.add_argument("--slow-s", type=float, default=0.0)
    parser.add_argument("--clock-dir", type=Path, required=True)
    parser.add_argument("--window-s", type=float, default=1.0)
    args = parser.parse_args()
    sess = ett.init(window_s=args.window_s)

    rank = int(os.environ["RANK"])
    args.clock_dir.mkdir(parents=True, exist_ok=True)
    log = (args.clock_dir / f"rank{rank}.jsonl").open("a")
    torch_hooks.init_process_group("gloo")
    torch.manual_seed(0)
    work = args.work_s + (args.slow_s if rank == args.slow_rank else 0.0)
    model = DistributedDataParallel(Work(work))
    timed = torch_hooks.time_ddp_waits(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.Generator().manual_seed(1000 + rank)
    for step in range(args.steps):
        x = torch.randn(32, 16, generator=data)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        before = time.time()
        loss.backward()
        backward_s = time.time() - before
        optimizer.step()
        sess.step(samples=x.shape[0])
        row = {"step": step, "time": time.time(), "backward_s": backward_s, "timed": timed}
        log.write(json.dumps(row) + "\n")
    log.close()
    del model
    torch_hooks.destroy_process_group()
    sess.end()


if __name__ == "__main__":
    main()
