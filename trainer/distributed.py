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


@dataclass(frozen=True)
class Identity:
    """Who this process is, from torchrun's environment (a lone process: rank 0 of 1)."""

    rank: int
    world_size: int
    local_rank: int
    attempt: int

    @classmethod
    def from_env(cls) -> Identity:
        """Read ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``TORCHELASTIC_RESTART_COUNT``."""
        env = os.environ
        return cls(
            rank=int(env.get("RANK", "0")),
            world_size=int(env.get("WORLD_SIZE", "1")),
            local_rank=int(env.get("LOCAL_RANK", "0")),
            attempt=int(env.get("TORCHELASTIC_RESTART_COUNT", "0")),
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
    return dist.PrefixStore(f"attempt_{ident.attempt}", store)


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


def shutdown() -> None:
    """Destroy the process groups (best effort: a peer may be gone already)."""
    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception:
            pass
