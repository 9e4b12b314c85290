"""The DLRM, its parallel wrapper and its optimizers.

Two ways to run it across ranks:

- ``dmp``: TorchRec ``DistributedModelParallel`` shards the embedding tables over the ranks (the
  planner decides how) and wraps the dense part in DDP. The tables update with a fused SGD inside
  the backward pass (fbgemm's kernels); the dense part uses Adagrad. Needs fbgemm kernels for the
  device. The sharding env has ``output_dtensor=True`` so the state dict holds DTensors, which
  every DCP save path handles (TorchRec's default ShardedTensors break ``async_save``).
- ``ddp``: every rank holds whole tables (a plain ``EmbeddingBagCollection``) and the whole model
  is wrapped in DDP. Works wherever PyTorch does (the GPU machine without CUDA fbgemm).

Both expose the same state-dict keys (``sparse_arch.embedding_bag_collection...``), so a
checkpoint of either can be published the same way.
"""

from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torchrec.datasets.utils import Batch
from torchrec.models.dlrm import DLRM
from torchrec.modules.embedding_configs import EmbeddingBagConfig
from torchrec.modules.embedding_modules import EmbeddingBagCollection

from trainer.config import ModelConfig


def quiet_library_warnings() -> None:
    """Silence TorchRec's and PyTorch's notes to their own developers (deprecations inside them)."""
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"torchrec\.")
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torchrec\.")
    logging.getLogger("torch.fx._symbolic_trace").setLevel(logging.ERROR)


def resolve_device(name: str) -> torch.device:
    """``auto`` → cuda when a GPU is present, else cpu."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda, but torch.cuda.is_available() is False")
    return torch.device(name)


def fbgemm_kernels(device: torch.device) -> bool:
    """True when fbgemm's embedding kernels are installed for ``device``."""
    try:
        import fbgemm_gpu
    except Exception:
        return False
    variant = str(getattr(fbgemm_gpu, "__variant__", "INTERNAL"))
    return device.type == "cpu" or variant not in ("cpu", "docs")


def resolve_sharding(name: str, device: torch.device) -> str:
    """``auto`` → ``dmp`` where fbgemm kernels exist for ``device``, else ``ddp``."""
    if name == "auto":
        return "dmp" if fbgemm_kernels(device) else "ddp"
    if name == "dmp" and not fbgemm_kernels(device):
        raise RuntimeError(f"--sharding dmp needs fbgemm kernels for {device.type}")
    return name


def build_dlrm(mc: ModelConfig, *, tables_device: torch.device, dense_device: torch.device) -> DLRM:
    """The unsharded DLRM. ``tables_device`` ``meta`` defers the tables to the sharder."""
    tables = [
        EmbeddingBagConfig(
            name=f"t{i}", embedding_dim=mc.emb_dim, num_embeddings=mc.rows, feature_names=[name]
        )
        for i, name in enumerate(mc.feature_names)
    ]
    ebc = EmbeddingBagCollection(tables=tables, device=tables_device)
    return DLRM(
        embedding_bag_collection=ebc,
        dense_in_features=mc.dense_in,
        dense_arch_layer_sizes=list(mc.dense_arch),
        over_arch_layer_sizes=list(mc.over_arch),
        dense_device=dense_device,
    )


@dataclass
class TrainModel:
    """The model as the training loop sees it."""

    kind: str
    """``dmp`` or ``ddp``."""
    wrapped: nn.Module
    """The parallel wrapper: call it for the forward pass."""
    dlrm: DLRM
    """The DLRM inside (sharded tables under ``dmp``): compile its dense and over arch."""
    dense_optimizer: torch.optim.Optimizer
    sparse_optimizer: torch.optim.Optimizer | None
    """``ddp`` only: SGD on the tables (``dmp`` fuses it into the backward pass)."""
    loss_fn: nn.Module
    slow_s: float = 0.0
    """Seconds of sleep in each forward (``--slow-s`` on the ``--slow-rank``; 0: none)."""
    timed_backward: bool = False
    """Time each ``loss.backward()`` into :attr:`backward_s`, the device synchronised before
    and after it (``--slow-rank``: the step log's own account of the wait for the gradients)."""
    backward_s: float = 0.0
    """The last step's ``loss.backward()`` in seconds, when :attr:`timed_backward`."""

    def train_step(self, batch: Batch) -> torch.Tensor:
        """One forward, backward and optimizer step; returns the (detached) loss."""
        logits = self.wrapped(batch.dense_features, batch.sparse_features).squeeze(-1)
        loss = self.loss_fn(logits, batch.labels)
        if self.slow_s:  # a planted straggler, after DDP's buffer broadcast at the forward's
            time.sleep(self.slow_s)  # start: the others wait in the gradient all-reduce
        self.dense_optimizer.zero_grad(set_to_none=True)
        if self.sparse_optimizer is not None:
            self.sparse_optimizer.zero_grad(set_to_none=True)
        if self.timed_backward:
            t0 = _synced_clock(loss)
            loss.backward()
            self.backward_s = _synced_clock(loss) - t0
        else:
            loss.backward()
        self.dense_optimizer.step()
        if self.sparse_optimizer is not None:
            self.sparse_optimizer.step()
        detached: torch.Tensor = loss.detach()
        return detached

    @torch.no_grad()
    def eval_loss(self, batch: Batch) -> torch.Tensor:
        """Loss on a batch without updating anything."""
        logits = self.wrapped(batch.dense_features, batch.sparse_features).squeeze(-1)
        loss: torch.Tensor = self.loss_fn(logits, batch.labels)
        return loss

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds: model weights (DTensors under dmp) and optimizer state."""
        model_sd = self.wrapped.state_dict() if self.kind == "dmp" else self.dlrm.state_dict()
        return {"model": model_sd, "optim": self.dense_optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Inverse of :meth:`state_dict` (DCP has loaded ``state`` in place already)."""
        if self.kind == "dmp":
            self.wrapped.load_state_dict(state["model"])
        else:
            self.dlrm.load_state_dict(state["model"])
        self.dense_optimizer.load_state_dict(state["optim"])


def _synced_clock(t: torch.Tensor) -> float:
    """``time.perf_counter()`` once ``t``'s device has finished its queued work."""
    if t.is_cuda:
        torch.cuda.synchronize(t.device)
    return time.perf_counter()


def _dense_optimizer(params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adagrad(params, lr=lr)


def build_ddp(mc: ModelConfig, device: torch.device, lr: float) -> TrainModel:
    """Unsharded tables on every rank, the whole DLRM under DDP."""
    dlrm = build_dlrm(mc, tables_device=device, dense_device=device)
    sparse = list(dlrm.sparse_arch.parameters())
    sparse_ids = {id(p) for p in sparse}
    dense = [p for p in dlrm.parameters() if id(p) not in sparse_ids]
    ddp_kwargs: dict[str, Any] = {"device_ids": [device.index]} if device.type == "cuda" else {}
    wrapped = (
        nn.parallel.DistributedDataParallel(dlrm, **ddp_kwargs) if dist.is_initialized() else dlrm
    )
    return TrainModel(
        kind="ddp",
        wrapped=wrapped,
        dlrm=dlrm,
        dense_optimizer=_dense_optimizer(dense, lr),
        sparse_optimizer=torch.optim.SGD(sparse, lr=lr),
        loss_fn=nn.BCEWithLogitsLoss(),
    )


def plan_sharding(dlrm: DLRM, device: torch.device, pg: dist.ProcessGroup) -> tuple[Any, list[Any]]:
    """Ask TorchRec's planner (a collective: every rank takes part) for a sharding plan."""
    from torchrec.distributed.comm import get_local_size
    from torchrec.distributed.model_parallel import get_default_sharders
    from torchrec.distributed.planner import EmbeddingShardingPlanner
    from torchrec.distributed.planner.storage_reservations import (
        FixedPercentageStorageReservation,
    )
    from torchrec.distributed.planner.types import KernelConfig, TopologyFactory, TrainerConfig

    world = dist.get_world_size(pg)
    topology = TopologyFactory.create_topology(
        TrainerConfig(world_size=world, local_world_size=get_local_size(world)),
        kernel_config=KernelConfig(compute_device=device.type),
    )
    planner = EmbeddingShardingPlanner(
        topology=topology, storage_reservation=FixedPercentageStorageReservation(0.15)
    )
    sharders = get_default_sharders()
    return planner.collective_plan(dlrm, sharders, pg), sharders


def build_dmp_unsharded(mc: ModelConfig, device: torch.device, lr: float) -> DLRM:
    """The DLRM with its tables on ``meta``, marked for a fused in-backward SGD."""
    from torch.distributed.optim.apply_optimizer_in_backward import _apply_optimizer_in_backward

    dlrm = build_dlrm(mc, tables_device=torch.device("meta"), dense_device=device)
    _apply_optimizer_in_backward(torch.optim.SGD, dlrm.sparse_arch.parameters(), {"lr": lr})
    return dlrm


def shard_dmp(
    dlrm: DLRM,
    device: torch.device,
    pg: dist.ProcessGroup,
    plan: Any,
    sharders: list[Any],
    lr: float,
) -> TrainModel:
    """Apply ``plan``: shard and materialize the tables, wrap the dense part in DDP."""
    from torchrec.distributed.model_parallel import DistributedModelParallel, get_unwrapped_module
    from torchrec.distributed.types import ShardingEnv
    from torchrec.optim.optimizers import in_backward_optimizer_filter

    env = ShardingEnv(
        world_size=dist.get_world_size(pg), rank=dist.get_rank(pg), pg=pg, output_dtensor=True
    )
    dmp = DistributedModelParallel(dlrm, env=env, device=device, plan=plan, sharders=sharders)
    dense = [p for _, p in in_backward_optimizer_filter(dmp.named_parameters())]
    return TrainModel(
        kind="dmp",
        wrapped=dmp,
        dlrm=get_unwrapped_module(dmp),
        dense_optimizer=_dense_optimizer(dense, lr),
        sparse_optimizer=None,
        loss_fn=nn.BCEWithLogitsLoss(),
    )
