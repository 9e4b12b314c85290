"""torchrun's share of start-up, measured from inside real workers: ``launcher`` (the agent's
own start), ``rendezvous``, ``worker_spawn``, then the two parts of ``imports``; the phases
tile ``[allocation, init()]`` with no overlap (``ett._startup``, ``ett._torchrun``).

The allocation (``ETT_ALLOCATED_AT``) is an instant the test reads before it starts torchrun,
as a scheduler would: phases never start before the allocation."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ett._torchrun import birth_ns

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TICK_NS = 30_000_000
"""A process start read from /proc (10 ms clock ticks, against /proc/uptime's 10 ms) and a
file time (the kernel's coarse clock) agree with ``time.time_ns()`` to within this."""


def _require_torchrun() -> None:
    if importlib.util.find_spec("torch") is not None:
        return
    message = "torch (torch.distributed.run) is not installed: `make setup` installs it"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _torchrun(tmp_path: Path, alloc: str) -> list[dict[str, Any]]:
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(tmp_path),  # torchrun's log directories: here
        "ETT_ALLOCATED_AT": alloc,
        "ETT_JOB_ID": "startup-phases",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("ETT_AUTO", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    cmd += [str(HERE / "startup_worker.py"), str(out)]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]


def test_torchrun_phases_tile_the_allocation_to_init(tmp_path: Path) -> None:
    _require_torchrun()
    launched = time.time_ns()
    alloc = f"{launched / 1e9 - 2.0:.6f}"  # the scheduler allocated the job 2 s before
    alloc_ns = int(float(alloc) * 1e9)  # as the library reads it
    ranks = _torchrun(tmp_path, alloc)
    with_birth = birth_ns(str(tmp_path)) is not None
    expected = [
        ("scheduling", "scheduler", None),
        ("launcher", "runtime", None),
        *([("rendezvous", "comms", None)] if with_birth else []),
        ("worker_spawn", "runtime", None),
        ("imports", "runtime", "interpreter"),
        ("imports", "runtime", "packages"),
    ]
    spawns = set()
    for rank in ranks:
        phases = rank["phases"]
        by = {(p["phase"], p["part"]): p for p in phases}
        names = [(p["phase"], p["component"], p["part"]) for p in phases]
        # worker_spawn (1-2 ms here) is left out when it is shorter than the resolution of the
        # worker's process start (10 ms clock ticks): the start read came before the directory
        assert names in (expected, [n for n in expected if n[0] != "worker_spawn"])
        # they tile [allocation, init()]: no gap, no overlap, the sum is the interval
        assert all(p["start"] < p["end"] for p in phases)
        assert all(a["end"] == b["start"] for a, b in itertools.pairwise(phases))
        assert phases[0]["start"] == alloc_ns
        assert rank["init_before"] <= phases[-1]["end"] <= rank["init_after"]
        total = sum(p["end"] - p["start"] for p in phases)
        assert total == phases[-1]["end"] - alloc_ns
        # each boundary is the instant it stands for, read around it by the test and the worker
        agent = by[("launcher", None)]["start"]
        assert launched - TICK_NS <= agent <= rank["started"]
        assert abs(agent - rank["agent_started"]) <= TICK_NS
        interpreter = by[("imports", "interpreter")]
        assert abs(interpreter["start"] - rank["started"]) <= TICK_NS
        assert interpreter["start"] <= rank["first_line"] + TICK_NS
        assert rank["first_line"] <= interpreter["end"] <= rank["imported"]
        if ("worker_spawn", None) in by:
            spawns.add(by[("worker_spawn", None)]["start"])
    # one agent, one rendezvous, one attempt directory: the same instants on both ranks
    assert len(spawns) <= 1
    if with_birth:
        assert len({r["phases"][2]["start"] for r in ranks}) == 1  # the rendezvous
