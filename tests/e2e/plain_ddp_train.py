"""A plain PyTorch DDP trainer with no ETT code at all: the subject of ``test_zero_code.py``.

Run it under torchrun (gloo, CPU). It trains a tiny MLP, saves a DCP checkpoint every
``--ckpt-every`` steps (``get_state_dict`` of model and Adam, plus the step), resumes from the
newest one on a restart, and raises at ``--fail-at-step`` on attempt ``--fail-attempt``.

It keeps its own clock, independent of ETT: ``--clock-dir/rank<R>.jsonl``, one JSON object per
line with ``event``, ``attempt``, ``rank`` and unix ``time``: ``start`` (this process's start,
read from ``/proc``), ``first_batch`` (the first optimizer step returned), ``step`` (each
optimizer step returned; ``step`` is its global index; both also carry ``before``, the instant
just before ``optimizer.step()`` was called, so the library's step hook lies between the two),
``save`` (``start``/``end`` around ``dcp.save``), ``load`` (``start``/``end`` around
``dcp.load``, the ``step`` restored), ``failure`` (just before raising), ``end`` (just before
the script returns) and ``exit`` (at interpreter exit, from an ``atexit`` handler). ``start``
also carries the process id: on ``SIGUSR1`` a rank prints every thread's Python stack to its
stderr (``faulthandler``), which the test asks for when a run outlives its bound.
"""

from __future__ import annotations

import argparse
import atexit
import faulthandler
import json
import os
import signal
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel


def process_start() -> float:
    """Unix time this process started: /proc/self/stat's start time (clock ticks after boot)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


class Clock:
    def __init__(self, directory: Path, rank: int, attempt: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"rank{rank}.jsonl"
        self.base = {"rank": rank, "attempt": attempt}

    def log(self, event: str, **fields: float | int) -> None:
        row = {"event": event, **self.base, "time": time.time(), **fields}
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--ckpt-every", type=int, default=10)
    parser.add_argument("--fail-at-step", type=int, default=-1)
    parser.add_argument("--fail-attempt", type=int, default=0)
    parser.add_argument("--step-sleep", type=float, default=0.02)
    parser.add_argument("--ckpt-dir", type=Path, required=True)
    parser.add_argument("--clock-dir", type=Path, required=True)
    args = parser.parse_args()

    rank = int(os.environ["RANK"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    clock = Clock(args.clock_dir, rank, attempt)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # a stuck rank names its stack
    clock.log("start", time=process_start(), pid=os.getpid())
    atexit.register(clock.log, "exit")  # the interpreter is exiting (handlers run last-first)

    dist.init_process_group("gloo")
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    step = 0
    latest = args.ckpt_dir / "latest"
    if latest.exists():
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd, "step": 0}
        start = time.time()
        dcp.load(state, checkpoint_id=str(args.ckpt_dir / latest.read_text().strip()))
        clock.log("load", start=start, end=time.time(), step=state["step"])
        set_state_dict(
            model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"]
        )
        step = state["step"]

    data = torch.Generator().manual_seed(1000 + rank)
    first = True
    while step < args.steps:
        if attempt == args.fail_attempt and step == args.fail_at_step:
            clock.log("failure", step=step)
            raise RuntimeError(f"injected failure at step {step}")
        x = torch.randn(32, 16, generator=data)
        loss = nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        before = time.time()
        optimizer.step()
        if first:
            clock.log("first_batch", step=step, before=before)
            first = False
        clock.log("step", step=step, before=before)
        step += 1
        time.sleep(args.step_sleep)
        if step % args.ckpt_every == 0:
            model_sd, optim_sd = get_state_dict(model, optimizer)
            name = f"step_{step:05d}"
            start = time.time()
            dcp.save(
                {"model": model_sd, "optim": optim_sd, "step": step},
                checkpoint_id=str(args.ckpt_dir / name),
            )
            clock.log("save", step=step, start=start, end=time.time())
            if rank == 0:
                tmp = args.ckpt_dir / "latest.tmp"
                tmp.write_text(name)
                tmp.replace(latest)
    # Drop the DDP wrapper while the process group is still registered, then destroy the
    # group. With the wrapper dropped last (torch 2.13, gloo), its reducer held the group's last
    # reference: freeing it ran ~ProcessGroupGloo on the main thread with the GIL held, which
    # joins gloo's worker threads, while one of them was still freeing the last collective's
    # work (DCP's broadcast/all_gather_object tensors) and waited for the GIL to drop their
    # Python objects: a deadlock as main() returned (1 run in ~30 at load 20; gdb stacks in
    # the commit message). No ETT code is involved: a plain torchrun loop hangs alike.
    del model
    dist.destroy_process_group()
    clock.log("end", step=step)


if __name__ == "__main__":
    main()
