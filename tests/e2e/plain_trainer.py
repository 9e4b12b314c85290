"""A plain PyTorch DDP trainer instrumented as ``docs/instrument.md`` says: the subject of
``test_plain_trainer.py`` (issue 10's scenarios). Not this project's trainer.

Run it under torchrun (gloo, CPU, ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``). It trains a tiny
linear model with DDP, saves an async DCP checkpoint every ``--ckpt-every`` steps (through
``ett.torch_hooks.dcp_async_save``, on a gloo group of its own), resumes from the newest
committed one (a ``.metadata`` file) on a restart. ``--fail ATTEMPT:RANK:KIND:STEP`` (repeatable):
on that attempt, after ``STEP`` steps (and after that step's save when one is due), rank
``RANK`` raises (``exception``), SIGKILLs itself (``sigkill``) or hangs (``hang``: it sleeps
``--hang-s`` inside the next step, before its collective, with no ``step()`` and so no
heartbeat, then raises as a user's own watchdog would). ``--tail-s``: seconds of
uninstrumented work after the loop (not training).

Its own clock, independent of ETT: ``--clock-dir/rank<R>.jsonl``, one JSON object per line with
``event``, ``attempt``, ``rank`` and unix ``time``: ``start`` (the process's start, from
``/proc``), ``first_batch``, ``step`` (after each step; ``step`` is its global index),
``save``/``saved`` (around the blocking save call, ``step``), ``persisted`` (the save's future
completed), ``load``/``loaded`` (around the restore, ``step``), ``hang`` (a hang begins),
``failure`` (just before the fault), ``ending`` (just before the attempt ends: ``sess.end()``,
``sess.fail()``, or when ``ett.Preempted`` arrived) and ``exit`` (the attempt ended, just
before the process leaves).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any


def _process_start() -> float:
    with open("/proc/self/stat", encoding="ascii") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/uptime", encoding="ascii") as f:
        uptime = float(f.read().split()[0])
    return time.time() - uptime + ticks / os.sysconf("SC_CLK_TCK")


STARTED = _process_start()

import torch  # noqa: E402 - the clock above is read first
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel  # noqa: E402

import ett  # noqa: E402
from ett import torch_hooks  # noqa: E402


class Clock:
    """The trainer's own account: JSON lines, flushed at once (a SIGKILL loses nothing)."""

    def __init__(self, directory: Path, rank: int, attempt: int) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._file = open(directory / f"rank{rank}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self._base = {"rank": rank, "attempt": attempt}

    def log(self, event: str, at: float | None = None, **fields: Any) -> None:
        row = {"event": event, **self._base, "time": time.time() if at is None else at, **fields}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()


def committed_steps(ckpt_dir: Path) -> list[int]:
    """Steps whose checkpoint is complete (DCP writes ``.metadata`` last)."""
    if not ckpt_dir.exists():
        return []
    return sorted(int(p.name) for p in ckpt_dir.iterdir() if (p / ".metadata").exists())


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--ckpt-every", type=int, default=10)
    p.add_argument("--step-s", type=float, default=0.03)
    p.add_argument("--fail", action="append", default=[], metavar="ATTEMPT:RANK:KIND:STEP")
    p.add_argument("--tail-s", type=float, default=0.0)
    p.add_argument("--hang-s", type=float, default=1.0)
    p.add_argument("--window-s", type=float, default=0.5)
    p.add_argument("--ckpt-dir", type=Path, required=True)
    p.add_argument("--clock-dir", type=Path, required=True)
    return p.parse_args(argv)


def train(args: argparse.Namespace, sess: ett.Session, clock: Clock) -> None:
    rank, attempt = sess.identity.rank, sess.identity.attempt
    torch_hooks.init_process_group("gloo", session=sess)
    ckpt_group = dist.new_group(backend="gloo")  # async saves must not share DDP's group
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    state = {"model": model.state_dict()}
    done = committed_steps(args.ckpt_dir)
    start = done[-1] if done else 0
    if start:
        clock.log("load", step=start)
        torch_hooks.dcp_load(
            state,
            step=start,
            checkpoint_id=str(args.ckpt_dir / str(start)),
            process_group=ckpt_group,
            session=sess,
        )
        model.load_state_dict(state["model"])
        clock.log("loaded", step=start)
    gen = torch.Generator().manual_seed(rank)
    sess.first_batch(step=start)
    clock.log("first_batch", step=start)
    faults = {}
    for spec in args.fail:
        a, r, kind, at = spec.split(":")
        if int(a) == attempt and int(r) == rank:
            faults[int(at)] = kind
    pending: list[Any] = []
    for step in range(start, args.steps):
        x = torch.randn(32, 16, generator=gen)
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(args.step_s)
        sess.step(samples=32)
        clock.log("step", step=step)
        n = step + 1
        if n % args.ckpt_every == 0 and n < args.steps:
            clock.log("save", step=n)
            future = torch_hooks.dcp_async_save(
                {"model": model.state_dict()},
                step=n,
                session=sess,
                checkpoint_id=str(args.ckpt_dir / str(n)),
                process_group=ckpt_group,
            )
            clock.log("saved", step=n)
            future.add_done_callback(lambda _f, n=n: clock.log("persisted", step=n))
            pending.append(future)
        if n in faults:
            if faults[n] == "hang":  # no progress, no heartbeat; then the watchdog raises
                clock.log("hang", step=n)
                time.sleep(args.hang_s)
                clock.log("failure", step=n, kind="hang")
                raise RuntimeError(f"watchdog: step {n + 1} made no progress in {args.hang_s} s")
            clock.log("failure", step=n, kind=faults[n])
            if faults[n] == "sigkill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError(f"injected failure after step {n}")
    for future in pending:
        future.result()
    if args.tail_s:
        time.sleep(args.tail_s)  # uninstrumented work after training: not productive
        clock.log("tail_end")
    with sess.shutdown("pg_teardown"):
        dist.destroy_process_group()


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    sess = ett.init(model="plain-ddp", window_s=args.window_s, raise_on_sigterm=True)
    clock = Clock(args.clock_dir, sess.identity.rank, sess.identity.attempt)
    clock.log("start", at=STARTED)
    try:
        train(args, sess, clock)
    except BaseException as exc:  # the library's account first, then leave at once
        clock.log("ending", error=type(exc).__name__)
        if isinstance(exc, ett.Preempted):  # recorded by the library; the attempt ends here
            sess.end("preempted")
        else:
            sess.fail(exc)
        clock.log("exit")
        sys.stderr.write(f"rank {sess.identity.rank}: {exc!r}\n")
        sys.stderr.flush()
        # a failed rank leaves now: gloo's destructors may wait for peers that are gone
        os._exit(exc.exit_status if isinstance(exc, ett.Preempted) else 1)
    clock.log("ending")
    sess.end()
    clock.log("exit")


if __name__ == "__main__":
    main()
