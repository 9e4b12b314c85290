"""The trainer end to end: real torchrun, 2 ranks on the CPU, a tiny DLRM.

Each test launches ``python -m torch.distributed.run ... -m trainer.train`` (``trainer.testing``)
and checks the run twice: against the trainer's own step log (``RUN_DIR/steplog/rank<R>.jsonl``)
and checkpoint directory, and through the figures a real ``ett serve`` (the ``module_collector``
fixture) computed from the spans. ``test_trainer_collector.py`` compares the two accounts
instant by instant.

torch, TorchRec and fbgemm must be installed: the tests skip without them (``make test``
installs them), and fail under ``CI=true``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ett import semconv
from ett_collector.storage import Store
from tests.support.collector_process import Collector
from trainer.testing import REPO, Run, launch, missing_stack

LAUNCH_S = 480
"""How long one torchrun run may take: about a minute on an idle 2-core machine, several times
that on a loaded one (torch.compile's first compile of both ranks, TorchRec's imports)."""
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(LAUNCH_S + 120)]

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


def train(tmp_path: Path, collector: Collector, *args: str, max_restarts: int = 0) -> Run:
    """A 2-rank run of the small config; it must exit 0."""
    env = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    run = launch(
        tmp_path,
        collector.url,
        *SMALL,
        *args,
        max_restarts=max_restarts,
        env=env,
        timeout_s=LAUNCH_S,
    )
    assert run.returncode == 0, run.output[-6000:]
    return run


def figures(collector: Collector, job_id: str) -> dict[str, Any]:
    """The collector's figures for ``job_id`` once it has seen the job end."""
    return collector.wait_ended(job_id)


def stored_spans(collector: Collector, job_id: str) -> list[Any]:
    """The raw spans the collector stored for ``job_id``."""
    store = Store(collector.db_url)
    try:
        return store.load_spans(job_id)
    finally:
        store.close()


def assert_one_failure(job: dict[str, Any], cause: str) -> None:
    """The collector saw attempt 0 fail for ``cause`` and attempt 1 complete after it."""
    assert job["state"] == "completed" and job["failures"] == 1
    assert job["failure_causes"] == {cause: 1}
    a0, a1 = job["attempts"]
    assert (a0["failed"], a1["end_reason"]) == (True, "completed")
    [ttr] = job["ttr_s"]
    assert ttr == pytest.approx(a1["first_batch"] - a0["end"]) and ttr > 0
    assert job["unsaved_s"] > 0 and job["failure_s"] > job["unsaved_s"]
    assert job["ett_pct"] + job["idle_pct"] + job["failure_pct"] == pytest.approx(100)


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
    tmp_path: Path, module_collector: Collector
) -> None:
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "60",
        "--ckpt-every-steps",
        "20",
        "--no-compile",
        "--eval-every",
        "30",
    )
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
    job = figures(module_collector, run.job_id)
    assert (job["state"], job["failures"], job["unsaved_s"]) == ("completed", 0, 0)
    [a0] = job["attempts"]
    first = max(e["time"] for r in (0, 1) for e in run.events(r, "first_batch"))
    called = max(e["before"] for r in (0, 1) for e in run.events(r, "first_batch"))
    assert called - 0.002 <= a0["first_batch"] <= first + 0.002  # sess.first_batch() in between
    assert job["tts_s"] == pytest.approx(a0["first_batch"] - a0["alloc"])
    assert job["checkpoint_blocking_s"] > 0 and job["checkpoint_advice"]["checkpoints"] >= 2
    assert job["lost_by_component"]["eval"] > 0 and job["lost_by_component"]["sharding"] > 0
    assert 0 < job["ett_pct"] < 100
    names = {s.name for s in stored_spans(module_collector, run.job_id)}
    assert {
        semconv.SPAN_ATTEMPT,
        semconv.SPAN_FIRST_BATCH,
        semconv.SPAN_CHECKPOINT_SAVE,
        semconv.SPAN_EVAL,
        semconv.startup_span_name("sharding_plan"),
    } <= names

    out = tmp_path / "published"
    cmd = [
        sys.executable,
        "-m",
        "trainer.publish",
        "--checkpoint",
        str(run.ckpt_dir),
        "--out",
        str(out),
    ]
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": module_collector.url,
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["verified"] and manifest["step"] == 60
    assert manifest["train_job_id"] == run.job_id
    assert {"model.pt2", "weights.pt", "model_config.json"} <= {p.name for p in out.iterdir()}
    published = figures(module_collector, f"{run.job_id}-publish-60")  # a job of its own
    assert published["state"] == "completed" and published["failure_s"] == 0
    assert published["lost_by_component"]["publish"] > 0


@pytest.mark.parametrize("mode", ["async", "async-staged"])
def test_async_checkpoints_commit_and_resume(
    tmp_path: Path, module_collector: Collector, mode: str
) -> None:
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "50",
        "--ckpt-every-steps",
        "10",
        "--ckpt-mode",
        mode,
        "--no-compile",
        "--fail-at-step",
        "35",
        max_restarts=1,
    )
    assert_resumed(run, failed_at=35, resumed_at=30, steps=50)
    saves = run.events(0, "ckpt_save")
    commits = {e["step"]: e["time"] for e in run.events(0, "ckpt_commit")}
    assert {e["mode"] for e in saves} == {mode}
    for save in saves:  # committed after the save returned, once the background write was done
        assert commits[save["step"]] >= save["time"]
    job = figures(module_collector, run.job_id)
    assert_one_failure(job, "exception")
    spans = stored_spans(module_collector, run.job_id)
    persisted = {
        s.attr(semconv.CHECKPOINT_STEP)
        for s in spans
        if s.name == semconv.SPAN_CHECKPOINT_PERSIST and s.attempt == 0
    }
    assert persisted == {10, 20, 30}
    # unsaved: attempt 0's clean training after the step-30 snapshot (less its blocking)
    snapshot = min(
        s.start
        for s in spans
        if s.name == semconv.SPAN_CHECKPOINT_SAVE
        and s.attempt == 0
        and s.attr(semconv.CHECKPOINT_STEP) == 30
    )
    assert job["unsaved_s"] <= job["attempts"][0]["progress"] - snapshot


def test_compile_cache_is_reused_by_the_next_attempt(
    tmp_path: Path, module_collector: Collector
) -> None:
    cache = tmp_path / "compile-cache"
    run = train(
        tmp_path,
        module_collector,
        "--steps",
        "12",
        "--ckpt-every-steps",
        "5",
        "--compile",
        "--compile-cache",
        str(cache),
        "--fail-at-step",
        "8",
        max_restarts=1,
    )
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
    job = figures(module_collector, run.job_id)
    assert_one_failure(job, "exception")
    assert job["lost_by_component"]["compile"] > 0
    caches = {
        (s.attempt, s.attr(semconv.COMPILE_CACHE))
        for s in stored_spans(module_collector, run.job_id)
        if s.name == semconv.SPAN_COMPILE
    }
    assert (1, "hit") in caches and {c for a, c in caches if a == 0} <= {"miss", "partial", "off"}
