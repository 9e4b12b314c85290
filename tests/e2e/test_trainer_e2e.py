"""The trainer end to end: real torchrun, 2 ranks on the CPU, a tiny DLRM.

Each test launches ``python -m torch.distributed.run ... -m trainer.train`` (``trainer.testing``)
and checks the run against the trainer's own step log (``RUN_DIR/steplog/rank<R>.jsonl``) and its
checkpoint directory. Spans go to the ``otlp_endpoint`` fixture, a sink that accepts OTLP/HTTP and
keeps the span names; ``test_trainer_collector.py`` checks a real ``ett serve``'s figures.

torch, TorchRec and fbgemm must be installed: the tests skip without them (``make test``
installs them), and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from instrument import semconv
from trainer.testing import REPO, OtlpSink, Run, launch, missing_stack, otlp_sink

pytestmark = pytest.mark.e2e

SMALL = ("--size", "tiny", "--batch-size", "64", "--no-progress", "--watchdog-s", "60")


@pytest.fixture(scope="module", autouse=True)
def _training_stack() -> None:
    require_training_stack()


def require_training_stack() -> None:
    """Skip (or fail under ``CI=true``) when torchrun, TorchRec or fbgemm is missing."""
    missing = missing_stack()
    if missing:
        message = f"{', '.join(missing)} not installed: `make test` installs the trainer's stack"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture
def otlp_endpoint() -> Iterator[OtlpSink]:
    """Where the trainer sends its spans."""
    with otlp_sink() as sink:
        yield sink


def train(tmp_path: Path, sink: OtlpSink, *args: str, max_restarts: int = 0) -> Run:
    """A 2-rank run of the small config; it must exit 0."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    run = launch(tmp_path, sink.url, *SMALL, *args, max_restarts=max_restarts, env=env)
    assert run.returncode == 0, run.output[-6000:]
    return run


def assert_resumed(run: Run, *, failed_at: int, resumed_at: int, steps: int) -> None:
    """Attempt 0 trained the steps before ``failed_at``; attempt 1 resumed at ``resumed_at`` on
    every rank and trained each later step once; the run ended with a committed final checkpoint."""
    for rank in (0, 1):
        assert run.steps(rank, 0) == list(range(failed_at)), rank
        assert [e["step"] for e in run.events(rank, "resume", 1)] == [resumed_at]
        assert [e["step"] for e in run.events(rank, "first_batch", 1)] == [resumed_at]
        assert run.steps(rank, 1) == list(range(resumed_at, steps))
        assert run.events(rank, "end", 1)[-1]["reason"] == "completed"
    assert run.committed()[-1] == steps


def test_clean_run_trains_checkpoints_and_publishes(
    tmp_path: Path, otlp_endpoint: OtlpSink
) -> None:
    run = train(tmp_path, otlp_endpoint, "--steps", "60", "--ckpt-every-steps", "20",
                "--no-compile", "--eval-every", "30")  # fmt: skip
    for rank in (0, 1):
        assert run.steps(rank, 0) == list(range(60))
        phases = [e["phase"] for e in run.events(rank, "phase")]
        assert phases == ["pg_init", "model_init", "sharding_plan", "dataloader_init"]
        assert run.events(rank, "first_batch")[0]["step"] == 0
        assert [e["step"] for e in run.events(rank, "ckpt_save")] == [20, 40, 60]
        assert [e["step"] for e in run.events(rank, "eval")] == [30, 60]
        assert run.events(rank, "end")[-1]["reason"] == "completed"
        losses = [e["loss"] for e in run.events(rank, "step")]
        assert sum(losses[-10:]) < sum(losses[:10])  # it learns
    assert run.committed() == [20, 40, 60]
    assert (run.ckpt_dir / "latest").read_text().strip() == "step_00000060"
    spans = set(otlp_endpoint.span_names)
    assert {semconv.SPAN_ATTEMPT, semconv.SPAN_FIRST_BATCH, semconv.SPAN_CHECKPOINT_SAVE,
            semconv.SPAN_EVAL, semconv.startup_span_name("sharding_plan")} <= spans  # fmt: skip

    out = tmp_path / "published"
    cmd = [sys.executable, "-m", "trainer.publish", "--checkpoint", str(run.ckpt_dir),
           "--out", str(out)]  # fmt: skip
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": otlp_endpoint.url, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["verified"] and manifest["step"] == 60
    assert manifest["train_job_id"] == run.job_id
    assert {"model.pt2", "weights.pt", "model_config.json"} <= {p.name for p in out.iterdir()}
    assert semconv.SPAN_PUBLISH in otlp_endpoint.span_names


@pytest.mark.parametrize("mode", ["async", "async-staged"])
def test_async_checkpoints_commit_and_resume(
    tmp_path: Path, otlp_endpoint: OtlpSink, mode: str
) -> None:
    run = train(tmp_path, otlp_endpoint, "--steps", "50", "--ckpt-every-steps", "10",
                "--ckpt-mode", mode, "--no-compile", "--fail-at-step", "35",
                max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=35, resumed_at=30, steps=50)
    saves = run.events(0, "ckpt_save")
    commits = {e["step"]: e["time"] for e in run.events(0, "ckpt_commit")}
    assert {e["mode"] for e in saves} == {mode}
    for save in saves:  # committed after the save returned, once the background write was done
        assert commits[save["step"]] >= save["time"]
    assert semconv.SPAN_CHECKPOINT_PERSIST in otlp_endpoint.span_names


def test_compile_cache_is_reused_by_the_next_attempt(
    tmp_path: Path, otlp_endpoint: OtlpSink
) -> None:
    cache = tmp_path / "compile-cache"
    run = train(tmp_path, otlp_endpoint, "--steps", "12", "--ckpt-every-steps", "5",
                "--compile", "--compile-cache", str(cache), "--fail-at-step", "8",
                max_restarts=1)  # fmt: skip
    assert_resumed(run, failed_at=8, resumed_at=5, steps=12)
    for rank in (0, 1):
        [cold] = run.events(rank, "compile", 0)
        [warm] = run.events(rank, "compile", 1)
        # cold: nothing saved yet (a rank may hit a graph its peer just put in the shared local
        # Inductor cache: "partial")
        assert cold["cache"] in ("miss", "partial") and not cold["loaded"]
        assert (warm["cache"], warm["loaded"]) == ("hit", True)
        assert warm["duration_s"] < cold["duration_s"]
        assert (cache / f"artifacts-rank{rank}.bin").stat().st_size > 0
    assert semconv.SPAN_COMPILE in otlp_endpoint.span_names
