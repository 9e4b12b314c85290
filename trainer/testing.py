"""Launching the trainer under torchrun and reading what it left: for tests and demos.

:func:`launch` runs ``python -m torch.distributed.run ... -m trainer.train`` and returns a
:class:`Run` that reads the step logs and the checkpoint directory. Tests point the runs at a
real ``ett serve`` (``tests/support/collector_process.py``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STACK = ("torch.distributed.run", "torchrec", "fbgemm_gpu")
"""Modules a trainer run needs."""


def missing_stack() -> list[str]:
    """The modules of :data:`STACK` that cannot be imported here."""

    def importable(module: str) -> bool:
        try:
            return importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            return False

    return [m for m in STACK if not importable(m)]


@dataclass
class Run:
    """A finished torchrun launch: its exit status and output, step logs and checkpoints."""

    job_id: str
    run_dir: Path
    returncode: int
    output: str
    wall_s: float

    @property
    def ckpt_dir(self) -> Path:
        """The checkpoint root."""
        return self.run_dir / "checkpoints"

    def events(
        self, rank: int, event: str | None = None, attempt: int | None = None
    ) -> list[dict[str, Any]]:
        """Step-log events of ``rank``, optionally of one kind and one attempt."""
        path = self.run_dir / "steplog" / f"rank{rank}.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [
            r
            for r in rows
            if (event is None or r["event"] == event)
            and (attempt is None or r["attempt"] == attempt)
        ]

    def steps(self, rank: int, attempt: int) -> list[int]:
        """The steps ``rank`` trained in ``attempt``, in order."""
        return [e["step"] for e in self.events(rank, "step", attempt)]

    def committed(self) -> list[int]:
        """Steps with a committed checkpoint."""
        return sorted(
            int(d.name.removeprefix("step_"))
            for d in self.ckpt_dir.glob("step_*")
            if (d / "COMMITTED").is_file()
        )


def launch(
    workdir: Path,
    endpoint: str,
    *args: str,
    nproc: int = 2,
    max_restarts: int = 0,
    env: dict[str, str] | None = None,
    timeout_s: float = 240,
) -> Run:
    """Run ``ett train ARGS`` under torchrun (a fresh job id, its run dir under ``workdir``)."""
    job_id = f"t-{uuid.uuid4().hex[:10]}"
    run_dir = Path(workdir) / job_id
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    workers = [f"--nproc-per-node={nproc}", f"--max-restarts={max_restarts}"]
    train = ["-m", "trainer.train", "--run-dir", str(run_dir), *args]
    cmd = [*torchrun, *workers, "--monitor-interval=0.2", *train]
    full_env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        **(env or {}),
    }
    t0 = time.monotonic()
    proc = subprocess.run(
        cmd, cwd=REPO, env=full_env, capture_output=True, text=True, timeout=timeout_s
    )
    output = proc.stdout + proc.stderr
    Path(workdir).mkdir(parents=True, exist_ok=True)
    (Path(workdir) / f"{job_id}.log").write_text(output)
    return Run(job_id, run_dir, proc.returncode, output, time.monotonic() - t0)
