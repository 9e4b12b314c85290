"""Issue 10's scenarios on a plain PyTorch DDP trainer (``plain_trainer.py``, instrumented as
``docs/instrument.md`` says), under real torchrun (2 CPU ranks, gloo, ``--max-restarts 1``,
``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``), against a real `ett serve`, with the trainer's own
clock (its JSON-lines step log) as the truth:

- an exception right after an async DCP save: the save persists after the raise, the restart
  resumes from it, so the unsaved time is about nothing; the restarted attempt then has a tail
  after its loop: uninstrumented work after training is not productive;
- SIGKILL of rank 0 (attempt 0), then of rank 1 (attempt 1): each cause is ``killed`` (the
  survivor only lost a peer);
- a hang then a raise: rank 1 stops stepping (no ``step()``, so no heartbeat) for a while, then
  raises as a user's own watchdog would: the hang is the failed attempt's shutdown (``failure``,
  not unsaved: docs/metrics.md), the work since the restored checkpoint is unsaved.

Three torchrun jobs (each attempt starts two Python processes that import torch: the cost of the
file). Each figure is checked within 0.1 s of the trainer's clock (unsaved within one step).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.collector_process import Collector

pytestmark = pytest.mark.e2e

TOL_S = 0.1
STEP_S = 0.03
TRAINER = Path(__file__).with_name("plain_trainer.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def _torchrun() -> None:
    try:
        import torch.distributed.checkpoint
        import torch.distributed.run  # noqa: F401
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"torchrun is missing: {exc}")
        pytest.skip(f"torchrun is missing ({exc}): `make setup` installs torch")


@dataclass
class Run:
    job_id: str
    events: list[dict[str, Any]]
    output: str

    def at(self, event: str, attempt: int, rank: int | None = None) -> list[float]:
        return [
            e["time"]
            for e in self.events
            if e["event"] == event
            and e["attempt"] == attempt
            and (rank is None or e["rank"] == rank)
        ]

    def steps(self, event: str, attempt: int) -> list[int]:
        return sorted(
            {e["step"] for e in self.events if e["event"] == event and e["attempt"] == attempt}
        )

    def when(self, event: str, attempt: int, step: int) -> list[float]:
        return [
            e["time"]
            for e in self.events
            if e["event"] == event and e["attempt"] == attempt and e.get("step") == step
        ]


def launch(tmp_path: Path, collector: Collector, name: str, restarts: int, *args: str) -> Run:
    job_id = f"plain-{name}-{os.getpid()}-{int(time.time() * 1000) % 100000}"
    env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONPATH": str(REPO),
        "OMP_NUM_THREADS": "1",
    }
    for var in ("ETT_ALLOCATED_AT", "ETT_ATTEMPT", "ETT_DISABLED", "RANK", "WORLD_SIZE"):
        env.pop(var, None)
    clock_dir = tmp_path / "clock"
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        str(restarts),
        "--monitor-interval",
        "0.1",
        str(TRAINER),
        "--ckpt-dir",
        str(tmp_path / "ckpt"),
        "--clock-dir",
        str(clock_dir),
        "--step-s",
        str(STEP_S),
        *args,
    ]
    out = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, (out.stdout + out.stderr)[-6000:]
    events = [
        json.loads(line)
        for path in sorted(clock_dir.glob("rank*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    return Run(job_id, events, out.stdout + out.stderr)


def figures(collector: Collector, job_id: str, attempts: int) -> dict[str, Any]:
    """The job's figures once fresh (every span torchrun's ranks sent is in them: the ranks
    flushed before they exited) and ended with ``attempts`` attempts."""
    return collector.wait_for_job(
        job_id,
        lambda j: j["state"] in ("completed", "failed") and len(j["attempts"]) == attempts,
    )


def blocking(run: Run, attempt: int, until: float = float("inf")) -> float:
    """Checkpoint blocking per the trainer: per step, first ``save`` to last ``saved``."""
    return sum(
        min(max(run.when("saved", attempt, step)), until) - min(run.when("save", attempt, step))
        for step in run.steps("saved", attempt)
        if min(run.when("save", attempt, step)) < until
    )


def unsaved(run: Run, attempt: int) -> float:
    """Unsaved time of failed ``attempt``: its training after the snapshot (the start) of the
    save the next attempt restored, up to its last step, less the blocking saves in it."""
    [resumed] = run.steps("loaded", attempt + 1)
    snapshot = min(run.when("save", attempt, resumed))
    last_step = max(run.at("step", attempt))
    cut = sum(
        min(max(run.when("saved", attempt, s)), last_step) - min(run.when("save", attempt, s))
        for s in run.steps("saved", attempt)
        if s >= resumed
    )
    return max(0.0, last_step - snapshot - max(0.0, cut))


def gone_by(run: Run, attempt: int) -> float:
    """When every rank of ``attempt`` had left: its ``exit``, or for a rank that torchrun stopped
    before it logged one (a survivor of a failed peer), the start of the next attempt."""
    return max(
        max(run.at("exit", attempt, rank) or run.at("start", attempt + 1)) for rank in (0, 1)
    )


def check(run: Run, job: dict[str, Any], causes: list[str]) -> None:
    """Every figure against the trainer's clock: attempts (first batch, end), wall, TTS, TTR,
    failures, unsaved, checkpoint blocking and productive time."""
    attempts = len(causes) + 1
    assert job["state"] == "completed" and len(job["attempts"]) == attempts
    assert job["failures"] == len(causes)
    expected: dict[str, int] = {}
    for cause in causes:
        expected[cause] = expected.get(cause, 0) + 1
    assert job["failure_causes"] == expected
    alloc = min(run.at("start", 0))
    first = [max(run.at("first_batch", a)) for a in range(attempts)]
    assert job["attempts"][0]["alloc"] == pytest.approx(alloc, abs=TOL_S)
    assert job["tts_s"] == pytest.approx(first[0] - alloc, abs=TOL_S)
    ends = []
    for a in range(attempts):
        got = job["attempts"][a]
        assert got["first_batch"] == pytest.approx(first[a], abs=TOL_S), a
        # the attempt ends inside the library's end: after the last rank's "ending" (a rank
        # ended by the library on SIGTERM logs it just after), before each rank's "exit"; a rank
        # that torchrun stopped before its "exit" was gone before the next attempt started
        ending, left = max(run.at("ending", a)), gone_by(run, a)
        seen = {r: (run.at("ending", a, r), run.at("exit", a, r)) for r in (0, 1)}
        assert ending - TOL_S <= got["end"] <= left + TOL_S, (a, got["end"], seen)
        ends.append(got["end"])
    for a, ttr in enumerate(job["ttr_s"]):
        assert ttr == pytest.approx(first[a + 1] - ends[a], abs=TOL_S)
    assert job["wall_s"] == pytest.approx(ends[-1] - alloc, abs=TOL_S)
    truth_blocking = sum(blocking(run, a, max(run.at("step", a))) for a in range(attempts))
    assert job["checkpoint_blocking_s"] == pytest.approx(truth_blocking, abs=TOL_S)
    truth_unsaved = sum(unsaved(run, a) for a in range(attempts - 1))
    assert job["unsaved_s"] == pytest.approx(truth_unsaved, abs=STEP_S + TOL_S)
    trained = sum(max(run.at("step", a)) - first[a] for a in range(attempts))
    productive = trained - truth_blocking - truth_unsaved
    assert job["productive_s"] == pytest.approx(productive, abs=TOL_S)


def test_exception_right_after_an_async_save_then_a_tail(
    tmp_path: Path, module_collector: Collector
) -> None:
    tail_s = 1.0
    run = launch(
        tmp_path,
        module_collector,
        "exc",
        1,
        "--steps",
        "30",
        "--ckpt-every",
        "10",
        "--fail",
        "0:1:exception:20",
        "--tail-s",
        str(tail_s),
    )
    # rank 1 raised right after the save of step 20: that save persisted (the library waited for
    # it) and the restart resumed there, so nothing was lost
    assert run.when("persisted", 0, 20)
    assert run.steps("loaded", 1) == [20]
    job = figures(module_collector, run.job_id, 2)
    check(run, job, ["exception"])
    assert job["unsaved_s"] <= STEP_S + TOL_S
    # the tail after the completed attempt's loop is idle, charged to `other` (nothing names
    # it); its process-group teardown and exporter flush are named, and no training
    last_step = max(run.at("step", 1))
    assert max(run.at("tail_end", 1)) - last_step >= tail_s
    segments = module_collector.get(f"/api/v1/jobs/{run.job_id}/segments").json()
    productive = [g for g in segments if g["category"] == "productive"]
    assert max(g["end"] for g in productive) <= last_step + TOL_S
    shutdown = [g for g in segments if g["attempt"] == 1 and g["kind"] == "shutdown"]
    other = sum(g["duration_s"] for g in shutdown if g["components"] == ["other"])
    assert other == pytest.approx(tail_s, abs=TOL_S)
    named = {c for g in shutdown for c in g["components"]}
    assert {"comms", "runtime"} <= named  # pg_teardown, exporter_flush


def test_sigkill_of_rank_0_then_of_rank_1(tmp_path: Path, module_collector: Collector) -> None:
    run = launch(
        tmp_path,
        module_collector,
        "kill",
        2,
        "--steps",
        "40",
        "--ckpt-every",
        "10",
        "--fail",
        "0:0:sigkill:25",
        "--fail",
        "1:1:sigkill:35",
    )
    assert run.steps("loaded", 1) == [20] and run.steps("loaded", 2) == [30]
    job = figures(module_collector, run.job_id, 3)
    check(run, job, ["killed", "killed"])  # not the survivors' lost peer
    assert job["unsaved_s"] >= 2 * 4 * STEP_S  # steps 21-25 and 31-35 were redone


def test_a_hang_then_a_raise(tmp_path: Path, module_collector: Collector) -> None:
    hang_s = 1.5
    run = launch(
        tmp_path,
        module_collector,
        "hang",
        1,
        "--steps",
        "30",
        "--ckpt-every",
        "10",
        "--fail",
        "0:1:hang:25",
        "--hang-s",
        str(hang_s),
    )
    assert run.steps("loaded", 1) == [20]
    job = figures(module_collector, run.job_id, 2)
    check(run, job, ["exception"])  # the watchdog's raise; steps 21-25 unsaved, not the hang
    # no rank stepped during the hang: training ends at the last step before it, and the
    # seconds from there to the attempt's end are the failed attempt's shutdown, all failure
    assert run.steps("step", 0)[-1] == 24  # global index of the 25th step, on both ranks
    last_step = max(run.at("step", 0))
    [hang] = run.at("hang", 0, rank=1)
    [raised] = run.at("failure", 0, rank=1)
    assert max(run.at("step", 0, rank=1)) <= hang and raised - hang >= hang_s
    segments = module_collector.get(f"/api/v1/jobs/{run.job_id}/segments").json()
    first_attempt = [g for g in segments if g["attempt"] == 0]
    assert max(g["end"] for g in first_attempt if g["kind"] == "training") <= last_step + TOL_S
    [shutdown] = [g for g in first_attempt if g["kind"] == "shutdown"]
    assert shutdown["category"] == "failure" and shutdown["components"] == ["failure"]
    assert shutdown["start"] == pytest.approx(last_step, abs=TOL_S)
    assert shutdown["end"] == pytest.approx(job["attempts"][0]["end"], abs=1e-6)
    assert raised - last_step - TOL_S <= shutdown["duration_s"]
    assert shutdown["duration_s"] <= gone_by(run, 0) - last_step + TOL_S
    # the recovery: the gap from the attempt's end to the restarted processes' start (scheduler),
    # then the restart's start-up up to its first batch (failure): TTR is both
    alloc = min(run.at("start", 1))
    assert job["attempts"][1]["alloc"] == pytest.approx(alloc, abs=TOL_S)
    [gap] = [g for g in segments if g["kind"] == "recovery_gap"]
    assert gap["category"] == "failure" and gap["components"] == ["scheduler"]
    assert gap["duration_s"] == pytest.approx(alloc - job["attempts"][0]["end"], abs=TOL_S)
    restart = [g for g in segments if g["attempt"] == 1 and g["kind"] == "startup"]
    assert {g["category"] for g in restart} == {"failure"}
    recovery = gap["duration_s"] + sum(g["duration_s"] for g in restart)
    assert recovery == pytest.approx(job["ttr_s"][0], abs=1e-6)
