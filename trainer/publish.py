"""``ett publish``: export a committed checkpoint for inference, as a job of its own.

It runs on one CPU process, apart from training (so it blocks no trainer): its work is one
``ett.publish`` span with ``ett.publish.standalone=true``. It

1. finds the checkpoint (``--checkpoint`` names a committed step directory, or a checkpoint root:
   then the newest committed step in it) and the model's shape (``model_config.json``);
2. loads the DCP checkpoint, sharded or not, into an unsharded DLRM on the CPU;
3. writes ``--out``: ``model.pt2`` (``torch.export``: takes dense features, sparse ids and their
   lengths, returns click probabilities; batch size and id count are dynamic), ``weights.pt`` (a
   plain state dict), ``model_config.json`` and ``manifest.json``;
4. loads both back and checks they score a held-out batch as the checkpoint does.

Exit status: 0 published and verified, 1 the export scores differently, 2 no checkpoint.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

import ett
from trainer.checkpoint import COMMITTED, MODEL_CONFIG, resolve_checkpoint
from trainer.config import HelpFormatter, ModelConfig
from trainer.data import SyntheticClicks
from trainer.model import build_dlrm, quiet_library_warnings

VERIFY_STREAM = 2
"""Data stream of the verification batch (0 is training, 1 evaluation)."""


class ClickScorer(nn.Module):
    """Inference wrapper: plain tensors in, click probabilities out (exportable)."""

    def __init__(self, dlrm: nn.Module, feature_names: list[str]) -> None:
        super().__init__()
        self.dlrm = dlrm
        self.feature_names = feature_names

    def forward(
        self, dense: torch.Tensor, values: torch.Tensor, lengths: torch.Tensor
    ) -> torch.Tensor:
        """``lengths`` is feature-major (all samples of ``f0``, then ``f1``, ...)."""
        from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

        kjt = KeyedJaggedTensor.from_lengths_sync(
            keys=self.feature_names, values=values, lengths=lengths
        )
        return torch.sigmoid(self.dlrm(dense, kjt).squeeze(-1))


def load_unsharded(step_dir: Path, mc: ModelConfig) -> nn.Module:
    """The checkpoint's model weights in an unsharded DLRM on the CPU (DCP reshards them)."""
    from torch.distributed.checkpoint.state_dict_loader import load as dcp_load

    cpu = torch.device("cpu")
    dlrm = build_dlrm(mc, tables_device=cpu, dense_device=cpu)
    state = {"model": dlrm.state_dict()}
    with warnings.catch_warnings():  # "assuming the intent is to load in a single process": yes
        warnings.simplefilter("ignore", UserWarning)
        dcp_load(state, checkpoint_id=str(step_dir), no_dist=True)
    dlrm.load_state_dict(state["model"])
    model: nn.Module = dlrm.eval()
    return model


def scorer_inputs(mc: ModelConfig, batch_size: int, seed: int) -> tuple[torch.Tensor, ...]:
    """A held-out batch as the scorer's three tensors."""
    batch = SyntheticClicks(mc, batch_size, seed=seed, stream=VERIFY_STREAM).batch(0)
    kjt = batch.sparse_features
    return batch.dense_features, kjt.values(), kjt.lengths()


def export(scorer: ClickScorer, example: tuple[torch.Tensor, ...], num_features: int) -> Any:
    """``torch.export`` with a dynamic batch size and a dynamic number of ids."""
    from torch.export import Dim

    batch = Dim("batch", min=2, max=1 << 20)
    dynamic = {
        "dense": {0: batch},
        "values": {0: Dim("ids", min=2)},
        "lengths": {0: batch * num_features},
    }
    return torch.export.export(scorer, example, dynamic_shapes=dynamic, strict=False)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def publish(
    checkpoint: Path, out: Path, *, batch_size: int, seed: int, atol: float
) -> dict[str, Any]:
    """Export and verify; returns the manifest (``verified`` says whether the scores agree)."""
    step_dir = resolve_checkpoint(checkpoint)
    mc = ModelConfig.from_json((step_dir.parent / MODEL_CONFIG).read_text())
    marker = json.loads((step_dir / COMMITTED).read_text())
    scorer = ClickScorer(load_unsharded(step_dir, mc), mc.feature_names).eval()
    example = scorer_inputs(mc, batch_size, seed)
    with torch.no_grad():
        reference = scorer(*example)
    out.mkdir(parents=True, exist_ok=True)
    torch.save(scorer.dlrm.state_dict(), out / "weights.pt")
    torch.export.save(export(scorer, example, mc.num_tables), out / "model.pt2")
    shutil.copyfile(step_dir.parent / MODEL_CONFIG, out / MODEL_CONFIG)

    # verify from the files alone, and on a batch of another size than the example's
    other = scorer_inputs(mc, max(2, batch_size // 2 + 1), seed + 1)
    with torch.no_grad():
        reference_other = scorer(*other)
        exported = torch.export.load(out / "model.pt2").module()
        fresh = build_dlrm(mc, tables_device=torch.device("cpu"), dense_device=torch.device("cpu"))
        fresh.load_state_dict(torch.load(out / "weights.pt", weights_only=True))
        plain = ClickScorer(fresh, mc.feature_names).eval()
        diffs = {
            "export": max(
                float((exported(*x) - r).abs().max())
                for x, r in ((example, reference), (other, reference_other))
            ),
            "weights": float((plain(*example) - reference).abs().max()),
        }
    manifest = {
        "checkpoint": str(step_dir.resolve()),
        "step": marker["step"],
        "train_job_id": marker.get("job_id"),
        "published_at": time.time(),
        "model_config": json.loads(mc.to_json()),
        "files": {name: _sha256(out / name) for name in ("model.pt2", "weights.pt", MODEL_CONFIG)},
        "verify": {"batch_size": batch_size, "seed": seed, "atol": atol, "max_abs_diff": diffs},
        "verified": all(d <= atol for d in diffs.values()),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def build_parser() -> argparse.ArgumentParser:
    """The ``ett publish`` argument parser."""
    p = argparse.ArgumentParser(
        prog="ett publish",
        description="Export a committed DLRM checkpoint for inference (torch.export and a plain "
        "state dict) and verify that the export scores a batch as the checkpoint does. Runs on "
        "the CPU as a job of its own, traced as one ett.publish span (standalone).",
        formatter_class=HelpFormatter,
    )
    p.add_argument(
        "--checkpoint",
        type=Path,
        required=True,
        help="a committed step directory, or a checkpoint root (newest committed step)",
    )
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--batch-size", type=int, default=64, help="verification batch size")
    p.add_argument("--seed", type=int, default=0, help="seed of the verification batch")
    p.add_argument("--atol", type=float, default=1e-5, help="largest score difference allowed")
    p.add_argument(
        "--job-id", help="this publish job's id (default: <training job>-publish-<step>)"
    )
    p.add_argument("--model-name", help="model family, ett.model (default: $ETT_MODEL, else dlrm)")
    p.add_argument("--team", help="owning team, ett.team (default: $ETT_TEAM)")
    return p


def _default_job_id(checkpoint: Path) -> str:
    try:
        step_dir = resolve_checkpoint(checkpoint)
        marker = json.loads((step_dir / COMMITTED).read_text())
        return f"{marker.get('job_id') or step_dir.parent.name}-publish-{marker['step']}"
    except (OSError, ValueError, KeyError):
        return f"publish-{int(time.time())}"


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``ett publish``."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 0 <= args.atol < float("inf"):  # a negative bound called a 0.0 difference a mismatch
        parser.error("--atol must be a number >= 0")
    if args.batch_size <= 0:
        parser.error("--batch-size must be positive")
    quiet_library_warnings()
    # TorchRec's note that exporting a KeyedJaggedTensor is slow (it is: about a second, once)
    logging.getLogger().addFilter(lambda record: "KJT to_dict" not in record.getMessage())
    sess = ett.init(
        job_id=args.job_id or _default_job_id(args.checkpoint),
        model=args.model_name or os.environ.get("ETT_MODEL") or "dlrm",
        team=args.team,
        rank=0,
        world_size=1,
    )
    try:
        with sess.publish(standalone=True):
            manifest = publish(
                args.checkpoint,
                args.out,
                batch_size=args.batch_size,
                seed=args.seed,
                atol=args.atol,
            )
    except FileNotFoundError as exc:
        print(f"ett publish: {exc}", file=sys.stderr)
        sess.fail(exc)
        return 2
    if manifest["verified"]:
        sess.end()
    else:
        cause = ett.semconv.FailureCauseValues.EXCEPTION.value
        sess.failure(cause, error_type="PublishVerificationError")
        sess.end(ett.semconv.EndReasonValues.FAILED.value, cause)
    diffs = manifest["verify"]["max_abs_diff"]
    state = "verified" if manifest["verified"] else "MISMATCH"
    print(
        f"published step {manifest['step']} to {args.out}: {state} "
        f"(max |diff| export {diffs['export']:.2e}, weights {diffs['weights']:.2e})"
    )
    return 0 if manifest["verified"] else 1


if __name__ == "__main__":
    sys.exit(main())
