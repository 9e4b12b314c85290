"""Command-line options of ``ett train``: one typed config, one parser.

Every option has a default that runs a small job on a laptop CPU. ``--size`` picks a preset for
the model's shape; the individual model flags override the preset.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ett import semconv
from trainer.faults import FAIL_KINDS, FaultSpec

SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"num_tables": 4, "rows": 1_000, "emb_dim": 8, "dense_arch": (32, 8)},
    "small": {"num_tables": 8, "rows": 20_000, "emb_dim": 16, "dense_arch": (64, 16)},
    "medium": {"num_tables": 16, "rows": 200_000, "emb_dim": 64, "dense_arch": (256, 64)},
    "large": {"num_tables": 26, "rows": 1_000_000, "emb_dim": 128, "dense_arch": (512, 256, 128)},
}
"""Model presets for ``--size``. ``large`` is about 13 GiB of fp32 embedding tables."""

CKPT_MODES = ("sync", "async", "async-staged")
DEVICES = ("auto", "cpu", "cuda")
SHARDINGS = ("auto", "dmp", "ddp")


@dataclass(frozen=True)
class ModelConfig:
    """The DLRM's shape; saved beside each checkpoint so a publisher can rebuild the model."""

    num_tables: int = 4
    rows: int = 1_000
    emb_dim: int = 8
    dense_in: int = 13
    dense_arch: tuple[int, ...] = (32, 8)
    over_arch: tuple[int, ...] = (32, 1)
    pooling: int = 2

    def __post_init__(self) -> None:
        if self.dense_arch[-1] != self.emb_dim:
            last = self.dense_arch[-1]
            raise ValueError(f"the last dense layer ({last}) must equal --emb-dim ({self.emb_dim})")
        if self.over_arch[-1] != 1:
            raise ValueError("the last over-arch layer must be 1 (one logit per sample)")

    @property
    def feature_names(self) -> list[str]:
        """One sparse feature per table: ``f0``, ``f1``, ..."""
        return [f"f{i}" for i in range(self.num_tables)]

    def to_json(self) -> str:
        """Serialize for ``model_config.json``."""
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ModelConfig:
        """Inverse of :meth:`to_json`."""
        raw = json.loads(text)
        raw["dense_arch"] = tuple(raw["dense_arch"])
        raw["over_arch"] = tuple(raw["over_arch"])
        return cls(**raw)


@dataclass(frozen=True)
class TrainConfig:
    """Everything ``ett train`` was asked to do."""

    model: ModelConfig = field(default_factory=ModelConfig)
    steps: int = 200
    batch_size: int = 256
    lr: float = 0.05
    seed: int = 0
    device: str = "auto"
    sharding: str = "auto"
    run_dir: Path | None = None
    """``None`` until known: ``runs/<job id>`` once the telemetry session has resolved it."""
    ckpt_dir: Path | None = None
    ckpt_every_steps: int = 50
    ckpt_every_s: float = 0.0
    ckpt_mode: str = "sync"
    ckpt_keep: int = 3
    final_ckpt: bool = True
    resume: bool = True
    compile: bool = True
    compile_cache: Path | None = None
    fresh_local_cache: bool = False
    eval_every: int = 0
    eval_batches: int = 4
    fault: FaultSpec | None = None
    watchdog_s: float = 300.0
    failure_teardown: str = "abort"
    """How a failed rank tears down its process groups (``--failure-teardown``)."""
    step_delay_s: float = 0.0
    slow_rank: int = -1
    """The rank slowed on purpose (``--slow-rank``; -1: none): a planted straggler."""
    slow_s: float = 0.0
    """Seconds the slowed rank sleeps in each forward (``--slow-s``)."""
    data_stall_every: int = 0
    """Plant a data stall every N steps (``--data-stall-every``; 0: none): tests need one."""
    data_stall_s: float = 0.01
    """How long a planted data stall lasts (``--data-stall-s``)."""
    progress: bool = True
    job_id: str | None = None
    model_name: str | None = None
    """``--model-name``; else env ``ETT_MODEL``; else ``dlrm`` (see :func:`trainer.telemetry`)."""
    team: str | None = None
    window_s: float = semconv.DEFAULT_WINDOW_S

    def with_job_id(self, job_id: str) -> TrainConfig:
        """This config with the job id filled in, and the run directory where none was given."""
        run_dir = self.run_dir if self.run_dir is not None else Path("runs") / job_id
        return dataclasses.replace(self, job_id=self.job_id or job_id, run_dir=run_dir)

    @property
    def run_path(self) -> Path:
        """The run directory (``runs/<job id>`` when ``--run-dir`` was not given)."""
        return self.run_dir if self.run_dir is not None else Path("runs") / (self.job_id or "local")

    @property
    def checkpoint_dir(self) -> Path:
        """Where checkpoints go (``--ckpt-dir``, else ``RUN_DIR/checkpoints``)."""
        return self.ckpt_dir if self.ckpt_dir is not None else self.run_path / "checkpoints"

    @property
    def steplog_dir(self) -> Path:
        """Where each rank writes its JSON-lines step log."""
        return self.run_path / "steplog"


def _int_tuple(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from exc
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default, unless it has none (``None``) or the help names it already."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if action.default is None or "default" in text:
            return text
        return super()._get_help_string(action)


def _preset_default(text: str, key: str) -> str:
    """``text`` with its default: the ``--size`` preset's ``key`` (lists comma-separated)."""

    def shown(value: Any) -> str:
        return ",".join(map(str, value)) if isinstance(value, tuple) else f"{value:,}"

    presets = ", ".join(f"{name} {shown(SIZES[name][key])}" for name in SIZES)
    return f"{text} (default: from --size: {presets})"


def _switch(group: argparse._ArgumentGroup, flag: str, help_text: str) -> None:
    """An on-by-default ``--flag`` / ``--no-flag`` pair."""
    group.add_argument(flag, action=argparse.BooleanOptionalAction, default=True, help=help_text)


def _model_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model (a --size preset; the other flags override it)")
    g.add_argument("--size", choices=sorted(SIZES), default="tiny", help="model preset")
    preset = _preset_default
    tables = "embedding tables (one sparse feature each)"
    g.add_argument("--num-tables", type=int, help=preset(tables, "num_tables"))
    g.add_argument("--rows", type=int, help=preset("rows per embedding table", "rows"))
    g.add_argument("--emb-dim", type=int, help=preset("embedding dimension", "emb_dim"))
    g.add_argument("--dense-in", type=int, default=13, help="dense input features")
    dense = "dense MLP sizes, comma-separated (e.g. 64,16); the last is the embedding dimension"
    g.add_argument("--dense-arch", type=_int_tuple, help=preset(dense, "dense_arch"))
    over = "over MLP sizes, comma-separated; the last is 1"
    g.add_argument("--over-arch", type=_int_tuple, default="32,1", help=over)
    g.add_argument("--pooling", type=int, default=2, help="mean ids per sample and feature")


def _training_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, default=200, help="global steps to train to")
    g.add_argument("--batch-size", type=int, default=256, help="samples per rank per step")
    g.add_argument("--lr", type=float, default=0.05, help="learning rate")
    g.add_argument("--seed", type=int, default=0, help="seed of the data and the model")
    g.add_argument("--device", choices=DEVICES, default="auto", help="auto: cuda when present")
    g.add_argument(
        "--sharding",
        choices=SHARDINGS,
        default="auto",
        help="dmp: TorchRec DistributedModelParallel; ddp: unsharded tables with DDP; "
        "auto: dmp where fbgemm kernels exist for the device",
    )
    g.add_argument("--eval-every", type=int, default=0, help="evaluate every N steps (0: never)")
    g.add_argument("--eval-batches", type=int, default=4, help="batches per evaluation")
    g.add_argument("--step-delay-s", type=float, default=0.0, help="sleep per step (demos)")
    slow = "slow this rank down on purpose, a planted straggler (-1: none)"
    g.add_argument("--slow-rank", type=int, default=-1, help=slow)
    slow_s = "seconds the --slow-rank sleeps in each forward (its backward is then timed)"
    g.add_argument("--slow-s", type=float, default=0.0, help=slow_s)
    stall = "plant a data stall every N steps, inside the batch fetch (0: never)"
    g.add_argument("--data-stall-every", type=int, default=0, help=stall)
    stall_s = "seconds of each planted data stall (default 0.01)"
    g.add_argument("--data-stall-s", type=float, default=0.01, help=stall_s)


def _checkpoint_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("run directory and checkpoints")
    g.add_argument("--run-dir", type=Path, help="run directory (default: runs/JOB_ID)")
    ckpt_dir = "checkpoint directory (default: RUN_DIR/checkpoints)"
    g.add_argument("--ckpt-dir", type=Path, help=ckpt_dir)
    every = "checkpoint interval, steps (0: none by steps)"
    g.add_argument("--ckpt-every-steps", type=int, default=50, help=every)
    every_s = "checkpoint interval, seconds, beside --ckpt-every-steps (0: none by time)"
    g.add_argument("--ckpt-every-s", type=float, default=0.0, help=every_s)
    g.add_argument("--ckpt-mode", choices=CKPT_MODES, default="sync", help="how DCP saves")
    g.add_argument("--ckpt-keep", type=int, default=3, help="committed checkpoints to keep")
    _switch(g, "--final-ckpt", "save a checkpoint after the last step")
    _switch(g, "--resume", "resume from the latest committed checkpoint")


def _compile_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("compile")
    _switch(g, "--compile", "torch.compile the dense and over arch")
    cache = "directory of saved compile artifacts: loaded at start, saved after compile"
    g.add_argument("--compile-cache", type=Path, help=cache)
    fresh = "give each process an empty TORCHINDUCTOR_CACHE_DIR (a fresh host)"
    g.add_argument("--fresh-local-cache", action="store_true", help=fresh)


def _fault_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("fault injection")
    fail_at = "inject a fault when this step starts (default: none)"
    g.add_argument("--fail-at-step", type=int, help=fail_at)
    g.add_argument("--fail-kind", choices=FAIL_KINDS, default="exception", help="what fault")
    g.add_argument("--fail-rank", type=int, default=0, help="rank that faults")
    g.add_argument("--fail-attempt", type=int, default=0, help="attempt that faults (-1: every)")
    watchdog = "end a process that made no progress for this long (0: off)"
    g.add_argument("--watchdog-s", type=float, default=300.0, help=watchdog)
    g.add_argument(
        "--failure-teardown",
        choices=("abort", "destroy"),
        default="abort",
        help="how a failed rank tears down its process groups: abort (exits at once); destroy "
        "(waits for peers stuck in a collective: kept to measure what the exit watchdog saves)",
    )


def _telemetry_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("telemetry")
    g.add_argument("--job-id", help="job id (default: $ETT_JOB_ID, else torchrun's run id)")
    g.add_argument("--model-name", help="model family, ett.model (default: $ETT_MODEL, else dlrm)")
    g.add_argument("--team", help="owning team, ett.team (default: $ETT_TEAM)")
    window = "train window span length (the collector's ETT_WINDOW_S must match)"
    g.add_argument("--window-s", type=float, default=semconv.DEFAULT_WINDOW_S, help=window)
    _switch(g, "--progress", "progress bar on rank 0")


def build_parser(prog: str = "ett train") -> argparse.ArgumentParser:
    """The ``ett train`` argument parser (also ``python -m trainer.train``): one group of options
    each for the model, training, checkpoints, compile, fault injection and telemetry."""
    p = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Train a TorchRec DLRM on synthetic click data, instrumented with ETT spans. "
            "`ett train` runs one process; for several ranks and restarts launch it under "
            "torchrun, e.g. `torchrun --nproc-per-node 2 --max-restarts 1 --no-python ett train "
            "--steps 200` (or `torchrun ... -m trainer.train`, the same options)."
        ),
        formatter_class=HelpFormatter,
    )
    for add_options in (
        _model_options,
        _training_options,
        _checkpoint_options,
        _compile_options,
        _fault_options,
        _telemetry_options,
    ):
        add_options(p)
    return p


def _fault(parser: argparse.ArgumentParser, a: argparse.Namespace) -> FaultSpec:
    """The fault ``--fail-*`` ask for; a parser error (exit 2, one line) for one that is not
    well formed or could never fire: under torchrun a traceback per rank and attempt, or a
    run that ended 0 with no fault, were the answers."""
    if a.fail_at_step < 0 or a.fail_rank < 0 or a.fail_attempt < -1:
        parser.error("--fail-at-step and --fail-rank must be >= 0, --fail-attempt >= -1")
    if a.fail_at_step >= a.steps:
        parser.error(f"--fail-at-step {a.fail_at_step} never comes: --steps is {a.steps}")
    world = os.environ.get("WORLD_SIZE", "1")
    if world.isdigit() and a.fail_rank >= int(world):
        parser.error(f"--fail-rank {a.fail_rank} does not exist: WORLD_SIZE is {world}")
    fault = FaultSpec(
        kind=a.fail_kind, step=a.fail_at_step, rank=a.fail_rank, attempt=a.fail_attempt
    )
    if fault.kind == "hang" and a.watchdog_s <= 0:
        parser.error("--fail-kind hang needs a --watchdog-s > 0 to end the hung process")
    return fault


def parse_args(argv: list[str] | None = None) -> TrainConfig:
    """Parse ``argv`` (default: ``sys.argv[1:]``) into a :class:`TrainConfig`."""
    parser = build_parser()
    a = parser.parse_args(argv)
    preset = SIZES[a.size]
    emb_dim = a.emb_dim or preset["emb_dim"]
    dense_arch = a.dense_arch or (*preset["dense_arch"][:-1], emb_dim)
    try:
        model = ModelConfig(
            num_tables=a.num_tables or preset["num_tables"],
            rows=a.rows or preset["rows"],
            emb_dim=emb_dim,
            dense_in=a.dense_in,
            dense_arch=tuple(dense_arch),
            over_arch=tuple(a.over_arch),
            pooling=a.pooling,
        )
    except ValueError as exc:
        parser.error(str(exc))
    for name in ("steps", "batch_size", "num_tables", "rows", "pooling", "eval_batches"):
        value = getattr(a, name, None)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    for name in ("lr", "window_s"):  # numbers that must be positive and finite
        if not 0 < getattr(a, name) < math.inf:
            parser.error(f"--{name.replace('_', '-')} must be a positive number")
    for name in ("slow_s", "step_delay_s", "data_stall_s", "ckpt_every_s", "watchdog_s"):
        if not 0 <= getattr(a, name) < math.inf:
            parser.error(f"--{name.replace('_', '-')} must be a number >= 0")
    for name in ("data_stall_every", "ckpt_every_steps", "eval_every", "ckpt_keep"):
        if getattr(a, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0")
    fault = None
    if a.fail_at_step is not None:
        fault = _fault(parser, a)
    elif a.fail_kind != "exception" or a.fail_rank or a.fail_attempt:
        parser.error("--fail-kind, --fail-rank and --fail-attempt need --fail-at-step")
    given = {f.name for f in dataclasses.fields(TrainConfig)} - {"model", "fault", "job_id"}
    return TrainConfig(
        model=model,
        fault=fault,
        job_id=a.job_id or os.environ.get("ETT_JOB_ID") or None,
        **{name: getattr(a, name) for name in given},
    )
