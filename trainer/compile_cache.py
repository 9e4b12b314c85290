"""``torch.compile`` of the DLRM's dense and over arch, with a portable compile cache.

At start the trainer loads the artifacts a previous attempt saved
(``torch.compiler.load_cache_artifacts``), compiles the two MLPs in place (``nn.Module.compile``:
the state-dict keys do not change) and runs one forward and backward on random inputs of the
training shapes, so the compilation happens in start-up, not in the first step. After the first
compile it saves the artifacts (``torch.compiler.save_cache_artifacts``) for the next attempt.

Spans come from the instrumentation library's torch hooks: the artifact load is an
``ett.compile`` span (trigger ``cache_load``), and every dynamo compilation is one (with its cache
outcome); the hooks stay installed, so a recompile mid-training (the first evaluation under
``no_grad``, say) is seen too. The step log gets the trainer's own figures: load and compile
seconds, and the outcome from Inductor's FX-graph cache counters, named as the library names
it (:func:`ett.torch_hooks.cache_status`: all hits ``hit``, all misses ``miss``, both
``partial``, no lookup ``off``). ``--fresh-local-cache`` gives the process an empty
``TORCHINDUCTOR_CACHE_DIR``, as a new host would have, so the saved artifacts are the only cache.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from math import comb
from pathlib import Path

import torch

import ett
from ett import torch_hooks
from ett.semconv import CompileCacheValues
from trainer.config import ModelConfig
from trainer.model import TrainModel


@dataclass(frozen=True)
class CompileResult:
    """What one start-up compilation did."""

    cache: str
    """``hit``, ``miss``, ``partial`` (or ``off``)."""
    load_s: float
    """Seconds spent loading saved artifacts (0 without ``--compile-cache``)."""
    compile_s: float
    """Seconds of compilation (the warm-up forward and backward)."""
    frames: int
    """Frames Dynamo compiled."""
    loaded: bool
    """True when saved artifacts were found and loaded."""


def use_fresh_local_cache() -> Path:
    """Point Inductor's local cache at a new empty directory (call before compiling)."""
    path = Path(tempfile.mkdtemp(prefix="ett-inductor-"))
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(path)
    os.environ["TRITON_CACHE_DIR"] = str(path / "triton")
    return path


class CompileCache:
    """Saved compile artifacts in ``directory`` (one file per rank); ``None``: no cache."""

    def __init__(self, directory: Path | None, rank: int) -> None:
        self.path = Path(directory) / f"artifacts-rank{rank}.bin" if directory else None

    def load(self, sess: ett.Session) -> tuple[bool, float]:
        """Load saved artifacts if any, in an ``ett.compile`` span: ``(found, seconds)``."""
        if self.path is None:
            return False, 0.0
        t0 = time.perf_counter()
        info = torch_hooks.load_compile_cache(self.path, session=sess)
        return info is not None, time.perf_counter() - t0

    def save(self) -> bool:
        """Save the artifacts of the compilations so far (atomically); False: nothing to save."""
        if self.path is None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return torch_hooks.save_compile_cache(self.path)


def over_in_features(mc: ModelConfig) -> int:
    """Width of the over arch's input: the interaction of the dense and sparse features."""
    return mc.emb_dim + comb(mc.num_tables, 2) + mc.num_tables


def compile_dense(model: TrainModel, mc: ModelConfig, batch_size: int) -> tuple[int, int, int]:
    """Compile the dense and over arch in place and warm them up: ``(frames, hits, misses)``.

    The warm-up runs outside DDP's forward, before the first step, so DDP's reducer ignores its
    gradients; they are dropped afterwards. Inputs match training: the dense features need no
    gradient, the over arch's input does.
    """
    from torch._dynamo.utils import counters

    torch._dynamo.config.optimize_ddp = False  # same graphs inside and outside DDP's forward
    before = (
        counters["frames"]["ok"],
        counters["inductor"]["fxgraph_cache_hit"],
        counters["inductor"]["fxgraph_cache_miss"],
    )
    dlrm = model.dlrm
    device = next(dlrm.dense_arch.parameters()).device
    dlrm.dense_arch.compile()
    dlrm.over_arch.compile()
    dense_in = torch.randn(batch_size, mc.dense_in, device=device)
    over_in = torch.randn(batch_size, over_in_features(mc), device=device, requires_grad=True)
    loss = dlrm.dense_arch(dense_in).sum() + dlrm.over_arch(over_in).sum()
    loss.backward()
    for p in [*dlrm.dense_arch.parameters(), *dlrm.over_arch.parameters()]:
        p.grad = None
    return (
        counters["frames"]["ok"] - before[0],
        counters["inductor"]["fxgraph_cache_hit"] - before[1],
        counters["inductor"]["fxgraph_cache_miss"] - before[2],
    )


def compile_model(
    model: TrainModel, mc: ModelConfig, batch_size: int, cache: CompileCache, sess: ett.Session
) -> CompileResult:
    """Load the cache, compile (each dynamo compilation is an ``ett.compile`` span, from the
    library's compile hooks, which stay on to catch recompiles), save the cache when it missed."""
    torch_hooks.install_compile_hooks(sess)
    loaded, load_s = cache.load(sess)
    t0 = time.perf_counter()
    frames, hits, misses = compile_dense(model, mc, batch_size)
    compile_s = time.perf_counter() - t0
    outcome = torch_hooks.cache_status(hits, misses)
    if outcome != CompileCacheValues.HIT.value:
        cache.save()
    return CompileResult(outcome, load_s, compile_s, frames, loaded)
