"""Process groups: who this process is, and the groups it trains and checkpoints in.

Under torchrun each restart is a new attempt (``TORCHELASTIC_RESTART_COUNT``) that meets the same
rendezvous store. With gloo, a restarted attempt would read the old attempt's addresses from that
store and fail ("Gloo connectFullMesh failed ... Connection refused"), so every attempt gets its own
``PrefixStore("attempt_<n>")``. Checkpoints get their own gloo group: ``async_save``'s upload
thread must not meet TorchRec's all-to-all on the default group (they deadlock).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

import ett


@dataclass(frozen=True)
class Identity:
    """Who this process is: rank, world size and attempt as the instrumentation library resolved
    them (torchrun's environment; a lone process is rank 0 of 1), and the local rank."""

    rank: int
    world_size: int
    local_rank: int
    attempt: int

    @classmethod
    def of(cls, identity: ett.Identity) -> Identity:
        """The session's identity, plus ``LOCAL_RANK`` (the device of this process)."""
        return cls(
            rank=identity.rank,
            world_size=identity.world_size,
            local_rank=int(os.environ.get("LOCAL_RANK", "0")),
            attempt=identity.attempt,
        )


@dataclass(frozen=True)
class Groups:
    """The process groups of one attempt."""

    default: dist.ProcessGroup
    checkpoint: dist.ProcessGroup
    backend: str


def backend_for(device: torch.device) -> str:
    """gloo on CPU; NCCL for CUDA tensors with gloo beside it for CPU collectives (async DCP)."""
    return "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"


def _attempt_store(ident: Identity, timeout: timedelta) -> dist.Store:
    """The rendezvous store, seen through this attempt's own prefix."""
    env = os.environ
    if "MASTER_ADDR" not in env:  # a lone process, not under torchrun
        return dist.HashStore()
    agent_store = env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    store = dist.TCPStore(
        host_name=env["MASTER_ADDR"],
        port=int(env["MASTER_PORT"]),
        world_size=ident.world_size,
        # torchrun's agent hosts the store; without it, rank 0 does (as init_method env:// would)
        is_master=not agent_store and ident.rank == 0,
        timeout=timeout,
        multi_tenant=not agent_store,
    )
    # torchrun's own restart count: the store is torchrun's (ETT_ATTEMPT may number attempts
    # of a scheduler above it)
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    return dist.PrefixStore(f"attempt_{restart}", store)


def init_groups(ident: Identity, device: torch.device, timeout_s: float = 600.0) -> Groups:
    """Initialise the default process group and the checkpoint group (collective)."""
    if device.type == "cuda":
        torch.cuda.set_device(ident.local_rank)
    timeout = timedelta(seconds=timeout_s)
    backend = backend_for(device)
    dist.init_process_group(
        backend=backend,
        store=_attempt_store(ident, timeout),
        rank=ident.rank,
        world_size=ident.world_size,
        timeout=timeout,
    )
    default = dist.group.WORLD
    assert default is not None
    checkpoint = dist.new_group(backend="gloo", timeout=timeout)
    return Groups(default=default, checkpoint=checkpoint, backend=backend)


def broadcast_value(value: object, group: dist.ProcessGroup, src: int = 0) -> object:
    """Rank ``src``'s ``value`` on every rank of ``group``."""
    box = [value]
    dist.broadcast_object_list(box, src=src, group=group)
    return box[0]


def reduce_in_flight(group: dist.ProcessGroup, device: torch.device) -> object:
    """Start an all-reduce on ``group`` and return without waiting for it (fault injection)."""
    return dist.all_reduce(torch.zeros(1, device=device), group=group, async_op=True)


def wait_in_barrier(group: dist.ProcessGroup) -> None:
    """Wait in a barrier of ``group`` (a peer held in a collective, for fault injection)."""
    dist.barrier(group=group)


def shutdown(groups: Groups | None = None, *, failed: bool = False) -> None:
    """Tear down the process groups: destroy them after a clean run, abort them after a failure.

    Why abort on a failure path: a failed rank leaves its peers inside a collective it will never
    join (seen on 2 H200s: rank 1 in DDP's buffer broadcast on NCCL after rank 0 raised).
    ``destroy_process_group`` then waits on that communicator (NCCL finalizes it; gloo waits for
    the rank's own queued work, which needs the peer), so the failed rank never exits and
    torchrun, which restarts a job only when a worker exits, never restarts it (until the
    collective timeout, 10 minutes). Aborting does not wait: the communicators are torn down at
    once, the peers' collectives fail ("connection closed by peer"), every rank exits, and
    torchrun restarts the job. The library's exit watchdog (``ETT_EXIT_TIMEOUT_S``) is the
    backstop should even that hang.
    """
    if not dist.is_initialized():
        return
    if failed:
        abort_groups(groups)
        return
    try:
        dist.destroy_process_group()
    except Exception:  # best effort: a peer may be gone already
        pass


def abort_groups(groups: Groups | None) -> None:
    """Abort this attempt's groups (checkpoint group first, then the default group with all its
    backends) through the public ``ProcessGroup.abort()``; without ``groups`` (a failure during
    ``init_groups``), the default group only."""
    targets = [groups.checkpoint, groups.default] if groups is not None else []
    if not targets and dist.group.WORLD is not None:
        targets = [dist.group.WORLD]
    for group in targets:
        try:
            abort = getattr(group, "abort", None)
            if abort is None:  # a torch without the public method: see _abort_all_private
                _abort_all_private()
                return
            abort()
        except Exception:  # already broken by the failure: nothing left to tear down
            pass


def _abort_all_private() -> None:
    """Fallback for a torch whose ``ProcessGroup`` lacks ``abort()``: the private
    ``distributed_c10d._abort_process_group`` (aborts every group, NCCL ones in one NCCL group
    call). ``tests/unit/trainer/test_trainer_abort_api.py`` fails loudly when the public method
    disappears, so this path is never used silently."""
    from torch.distributed import distributed_c10d

    distributed_c10d._abort_process_group()
