"""Zero-code instrumentation end to end: ``ett-instrument torchrun ... plain_ddp_train.py``.

``plain_ddp_train.py`` is a plain PyTorch DDP trainer with no ETT code. Run by real torchrun
with 2 CPU ranks (gloo) under ``ett-instrument``, it fails on attempt 0 at step 25, torchrun
restarts it once, and it resumes from its step-20 DCP checkpoint. The figures a real
``ett serve`` computed from the spans are checked against the trainer's own clock
(``rank<R>.jsonl``): TTS, TTR, failures and cause, checkpoint blocking, unsaved and wall.

torch (with ``torch.distributed.run``) must be installed: the test skips without it and fails
under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from ett import semconv
from ett_collector.storage import Store
from tests.support.collector_process import Collector

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TRAINER = HERE / "plain_ddp_train.py"
STEPS, CKPT_EVERY, FAIL_AT, RESUMED_AT = 40, 10, 25, 20
EPS = 0.002  # seconds: a figure against instants the trainer read around what it bounds
PROC_START_S = 0.03  # seconds: a process start read from /proc (clock ticks of 10 ms)


def _launcher() -> list[str]:
    """``ett-instrument`` beside this interpreter (the console script), else ``-m ett``."""
    script = shutil.which("ett-instrument", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "ett"]


def _require_torchrun() -> None:
    try:
        found = importlib.util.find_spec("torch.distributed.run") is not None
    except ModuleNotFoundError:
        found = False
    if not found:
        message = "torch (torch.distributed.run) is not installed: `make setup` installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


RUN_S = 240.0
"""The bound on the whole torchrun (two attempts of a 2-rank job: 90-110 s at load 18); the
test's own pytest timeout is above it and the job's wait, so this bound names the stacks."""
DUMP_WAIT_S = 5.0
"""How long the ranks get to print their stacks (SIGUSR1) when the run outlives its bound."""
GDB_S = 90.0
"""The most ``gdb`` may take to print one stuck rank's native stacks (torch's symbols)."""


def _native_stacks(pids: set[int]) -> str:
    """Each live process's threads (name, state, kernel wait channel from ``/proc``) and, when
    ``gdb`` is installed, every thread's native backtrace: what a Python stack cannot show (a
    C++ destructor joining a thread, say)."""
    parts = []
    gdb = shutil.which("gdb")
    for pid in sorted(pids):
        tasks = Path(f"/proc/{pid}/task")
        try:
            threads = [
                " ".join(
                    [
                        (t / "comm").read_text().strip(),
                        (t / "stat").read_text().rsplit(")", 1)[1].split()[0],
                        (t / "wchan").read_text().strip(),
                    ]
                )
                for t in sorted(tasks.iterdir())
            ]
        except OSError:
            continue  # exited
        parts.append(f"--- pid {pid} threads (name state wchan): {'; '.join(threads)}")
        if gdb:
            try:
                bt = subprocess.run(
                    [gdb, "-nx", "-batch", "-p", str(pid), "-ex", "thread apply all bt 30"],
                    capture_output=True,
                    text=True,
                    timeout=GDB_S,
                )
                parts.append(bt.stdout[-8000:])
            except subprocess.TimeoutExpired:
                parts.append(f"(gdb took over {GDB_S:g} s)")
    return "\n".join(parts)


def _run_torchrun(cmd: list[str], env: dict[str, str], log: Path, clock_dir: Path) -> int:
    """Run ``cmd`` (torchrun) in a session of its own, its output to ``log``; its exit status.
    Past :data:`RUN_S`, the ranks still alive (their pids are in the clock's ``start`` events)
    are asked for their Python stacks (``SIGUSR1``: faulthandler) and their native ones read
    (:func:`_native_stacks`); then torchrun and each rank's session (torchrun starts each worker
    in a session of its own) are killed, and the test fails with what each attempt's ranks
    logged last, the output's tail and the native stacks."""
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return proc.wait(RUN_S)
        except subprocess.TimeoutExpired:
            pass
        rows: list[dict[str, Any]] = []
        ranks: set[int] = set()
        native = ""
        try:
            rows = Clock(clock_dir).rows
            ranks = {r["pid"] for r in rows if r["event"] == "start"}
            for pid in ranks:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGUSR1)
            time.sleep(DUMP_WAIT_S)  # elapsed time, not a wait: nothing says a dump is done
            native = _native_stacks(ranks)
        finally:
            for group in (proc.pid, *ranks):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(group, signal.SIGKILL)
            proc.wait()
    last = {(r["attempt"], r["rank"]): r["event"] for r in rows}
    pids = {(r["attempt"], r["rank"]): r["pid"] for r in rows if r["event"] == "start"}
    pytest.fail(
        f"torchrun still running after {RUN_S:g} s; each (attempt, rank)'s last clock event: "
        f"{last}, pid: {pids}; the output's tail (the live ranks' Python stacks, each "
        f"thread's first):\n{log.read_text()[-12000:]}\nnative:\n{native[-20000:]}"
    )


class Clock:
    """The plain trainer's own account: its JSON lines, all ranks."""

    def __init__(self, directory: Path) -> None:
        self.rows = [
            json.loads(line)
            for path in sorted(directory.glob("rank*.jsonl"))
            for line in path.read_text().splitlines()
            if line.strip()
        ]

    def events(self, event: str, attempt: int) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["event"] == event and r["attempt"] == attempt]

    def latest(self, event: str, attempt: int) -> float:
        return max(r["time"] for r in self.events(event, attempt))

    def latest_before(self, event: str, attempt: int) -> float:
        """The latest ``before`` (the instant ``optimizer.step()`` was called) over the ranks."""
        return max(r["before"] for r in self.events(event, attempt))

    def blocking(self) -> dict[tuple[int, int], tuple[float, float]]:
        """(attempt, step) → [earliest start, latest end] of ``dcp.save`` over the ranks."""
        spans: dict[tuple[int, int], tuple[float, float]] = {}
        for r in self.rows:
            if r["event"] == "save":
                key = (r["attempt"], r["step"])
                lo, hi = spans.get(key, (r["start"], r["end"]))
                spans[key] = (min(lo, r["start"]), max(hi, r["end"]))
        return spans

    def step_s(self) -> float:
        """The median time between two optimizer steps of one rank."""
        gaps = []
        for rank in {r["rank"] for r in self.rows}:
            for attempt in (0, 1):
                times = [r["time"] for r in self.events("step", attempt) if r["rank"] == rank]
                gaps += [b - a for a, b in itertools.pairwise(times)]
        return statistics.median(gaps)


@pytest.mark.timeout(RUN_S + DUMP_WAIT_S + 2 * GDB_S + 150)
def test_plain_ddp_trainer_matches_its_own_clock(
    tmp_path: Path, module_collector: Collector
) -> None:
    _require_torchrun()
    job_id = f"zc-{uuid.uuid4().hex[:8]}"
    cmd = [
        *_launcher(),
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node=2",
        "--max-restarts=1",
        "--monitor-interval=0.2",
        str(TRAINER),
        "--steps",
        str(STEPS),
        "--ckpt-every",
        str(CKPT_EVERY),
        "--fail-at-step",
        str(FAIL_AT),
        "--ckpt-dir",
        str(tmp_path / "ckpt"),
        "--clock-dir",
        str(tmp_path / "clock"),
    ]
    env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "OTEL_EXPORTER_OTLP_ENDPOINT": module_collector.url,
        "OMP_NUM_THREADS": "1",
        "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    returncode = _run_torchrun(cmd, env, tmp_path / "torchrun.log", tmp_path / "clock")
    returned = time.time()
    output = (tmp_path / "torchrun.log").read_text()
    assert returncode == 0, output[-6000:]
    clock = Clock(tmp_path / "clock")
    assert {r["step"] for r in clock.events("load", 1)} == {RESUMED_AT}
    assert len(clock.events("end", 1)) == 2  # both ranks finished attempt 1

    job = module_collector.wait_ended(job_id)
    a0, a1 = job["attempts"]
    alloc = min(r["time"] for r in clock.events("start", 0))
    first0, first1 = clock.latest("first_batch", 0), clock.latest("first_batch", 1)
    called0, called1 = clock.latest_before("first_batch", 0), clock.latest_before("first_batch", 1)
    failed = clock.latest("failure", 0)
    restarted = min(r["time"] for r in clock.events("start", 1))
    # TTS: process start to the first optimizer step (the slower rank's; its hook runs inside
    # optimizer.step(), between the clock's "before" and "time")
    assert a0["alloc"] == pytest.approx(alloc, abs=PROC_START_S)
    assert called0 - EPS <= a0["first_batch"] <= first0 + EPS
    assert called0 - alloc - PROC_START_S <= job["tts_s"] <= first0 - alloc + PROC_START_S
    # failures and cause: the exception both ranks raised
    assert (job["state"], job["failures"], job["failure_causes"]) == (
        "completed",
        1,
        {"exception": 1},
    )
    assert (a0["end_reason"], a0["failure_cause"], a1["end_reason"]) == (
        "failed",
        "exception",
        "completed",
    )
    # TTR: from attempt 0's end, which follows the raise and precedes the restarted processes,
    # to attempt 1's first optimizer step
    assert failed <= a0["end"] <= restarted + PROC_START_S
    [ttr] = job["ttr_s"]
    assert ttr == pytest.approx(a1["first_batch"] - a0["end"], abs=1e-3)
    assert called1 - EPS <= a1["first_batch"] <= first1 + EPS
    # checkpoint blocking: every save, [earliest start, latest end] over the ranks
    blocking = clock.blocking()
    assert sorted(blocking) == [(0, 10), (0, 20), (1, 30), (1, 40)]
    # the save after the last step is the completed attempt's shutdown, not a training cut-out
    during = [hi - lo for (a, _), (lo, hi) in blocking.items() if lo < clock.latest("step", a)]
    assert len(during) == 3
    # each save's span lies inside the clock's [start, end] around dcp.save; the hook's own
    # moments outside its span may shave a little off
    assert sum(during) - 0.05 <= job["checkpoint_blocking_s"] <= sum(during) + EPS, blocking
    # unsaved: attempt 0's training after the step-20 snapshot, less that save's blocking
    lo, hi = blocking[(0, RESUMED_AT)]
    unsaved = clock.latest("step", 0) - lo - (hi - lo)
    assert job["unsaved_s"] == pytest.approx(unsaved, abs=clock.step_s())

    # what named the time: the hooks, not the trainer
    store = Store(module_collector.db_url)
    try:
        spans = store.load_spans(job_id)
    finally:
        store.close()
    for attempt in (0, 1):
        for rank in (0, 1):
            names = {s.name for s in spans if (s.attempt, s.rank) == (attempt, rank)}
            assert {
                semconv.SPAN_ATTEMPT,
                semconv.SPAN_FIRST_BATCH,
                semconv.SPAN_TRAIN_WINDOW,
                semconv.SPAN_CHECKPOINT_SAVE,
                semconv.startup_span_name("imports"),
                semconv.startup_span_name("pg_init"),
                semconv.startup_span_name("model_init"),  # the DDP wrap, a barrier
            } <= names, (attempt, rank)
    ddp = [s for s in spans if s.name == semconv.startup_span_name("model_init")]
    assert len(ddp) == 4 and all(s.attr(semconv.BARRIER) is True for s in ddp)
    loads = [s for s in spans if s.name == semconv.startup_span_name("checkpoint_load")]
    assert {(s.attempt, s.attr(semconv.CHECKPOINT_STEP)) for s in loads} == {(1, RESUMED_AT)}
    firsts = {
        (s.attempt, s.attr(semconv.STEP)) for s in spans if s.name == semconv.SPAN_FIRST_BATCH
    }
    assert firsts == {(0, 0), (1, RESUMED_AT)}  # get_state_dict's initialising step not counted
    windows = [s for s in spans if s.name == semconv.SPAN_TRAIN_WINDOW]
    last = {a: max(s.attr(semconv.STEP_LAST) for s in windows if s.attempt == a) for a in (0, 1)}
    assert last == {0: FAIL_AT - 1, 1: STEPS - 1}  # one counted step per optimizer step
    saved = {
        (s.attempt, s.attr(semconv.CHECKPOINT_STEP))
        for s in spans
        if s.name == semconv.SPAN_CHECKPOINT_SAVE
    }
    assert saved == set(blocking)
    # wall: attempt 0's first process start to the last span's end: the library's end, which
    # runs after the trainer's own atexit handler (its "exit") and times its final flush
    flush_name = semconv.shutdown_span_name(semconv.ShutdownStepValues.EXPORTER_FLUSH)
    flushes = {s.rank: s for s in spans if s.name == flush_name and s.attempt == 1}
    exits = {r["rank"]: r["time"] for r in clock.events("exit", 1)}
    assert sorted(exits) == sorted(flushes) == [0, 1]
    for rank, exited in exits.items():
        assert flushes[rank].start >= exited - EPS, rank
    flush = max(s.end - s.start for s in flushes.values())
    clock_wall = max(exits.values()) - alloc
    last_end = max(s.end for s in spans)
    assert job["wall_s"] == pytest.approx(last_end - a0["alloc"], abs=1e-3)
    assert clock_wall <= job["wall_s"] <= returned - alloc + PROC_START_S
    lost = job["lost_by_component"]
    assert lost["runtime"] > 0 and lost["comms"] > 0 and lost["checkpoint"] > 0
    print(
        f"\nzero-code vs the trainer's clock: TTS {job['tts_s']:.3f} vs {first0 - alloc:.3f} s, "
        f"TTR {ttr:.3f} vs {first1 - failed:.3f} s, blocking {job['checkpoint_blocking_s']:.3f} "
        f"vs {sum(during):.3f} s, unsaved {job['unsaved_s']:.3f} "
        f"vs {unsaved:.3f} s (step {clock.step_s():.3f} s), wall {job['wall_s']:.3f} vs "
        f"{clock_wall:.3f} s (final flush {flush:.3f} s), attempt 0's end {a0['end'] - failed:.3f}"
        f" s after its raise; lost by component {lost}"
    )


PROBE = """
import os, sys
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d", rank=0, world_size=1)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
forward = torch.compile(model, backend="eager")
for step in range(6):
    forward(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    if step == 2:
        dcp.async_save({"model": model.state_dict()}, checkpoint_id=sys.argv[1]).result()
dcp.load({"model": model.state_dict()}, checkpoint_id=sys.argv[1])
dist.destroy_process_group()
"""


def test_one_plain_process_async_save_compile_and_teardown(
    tmp_path: Path, module_collector: Collector
) -> None:
    _require_torchrun()
    from tests.support.ports import free_port

    job_id = f"zc1-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "probe.py"
    script.write_text(PROBE % free_port())
    env = {
        **os.environ,
        "ETT_JOB_ID": job_id,
        "OTEL_EXPORTER_OTLP_ENDPOINT": module_collector.url,
        "OMP_NUM_THREADS": "1",
    }
    cmd = [*_launcher(), sys.executable, str(script), str(tmp_path / "ckpt")]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = module_collector.wait_ended(job_id)
    assert (job["state"], job["failures"]) == ("completed", 0)
    store = Store(module_collector.db_url)
    try:
        spans = store.load_spans(job_id)
    finally:
        store.close()
    by_name: dict[str, list[Any]] = {}
    for s in spans:
        by_name.setdefault(s.name, []).append(s)
    assert semconv.SPAN_CHECKPOINT_SAVE in by_name, (sorted(by_name), proc.stderr[-3000:])
    [save] = by_name[semconv.SPAN_CHECKPOINT_SAVE]
    [persist] = by_name[semconv.SPAN_CHECKPOINT_PERSIST]
    assert save.attr(semconv.CHECKPOINT_MODE) == "async"
    assert save.attr(semconv.CHECKPOINT_STEP) == persist.attr(semconv.CHECKPOINT_STEP) == 3
    assert persist.end >= save.end
    assert by_name[semconv.SPAN_COMPILE]  # dynamo's callbacks, installed as it was imported
    [load] = by_name[semconv.startup_span_name("checkpoint_load")]
    assert load.attr(semconv.CHECKPOINT_STEP) is None  # no "step" key: no step named
    teardown = semconv.shutdown_span_name(semconv.ShutdownStepValues.PG_TEARDOWN)
    assert len(by_name[teardown]) == 1 and len(by_name[semconv.startup_span_name("pg_init")]) == 1
    [window] = by_name[semconv.SPAN_TRAIN_WINDOW]
    assert (window.attr(semconv.STEP_FIRST), window.attr(semconv.STEP_LAST)) == (0, 5)


PREEMPTED = """
import os, signal, time
import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(30)
"""


def _console_spans(text: str) -> list[dict[str, Any]]:
    """The span objects the console exporter printed (JSON objects one after the other)."""
    decoder, spans, i = json.JSONDecoder(), [], 0
    while (i := text.find("{", i)) >= 0:
        span, i = decoder.raw_decode(text, i)
        spans.append(span)
    return spans


def test_sigterm_ends_a_plain_process_preempted(tmp_path: Path) -> None:
    _require_torchrun()
    script = tmp_path / "preempted.py"
    script.write_text(PREEMPTED)
    env = {**os.environ, "ETT_JOB_ID": "zc-sigterm", "OTEL_TRACES_EXPORTER": "console"}
    proc = subprocess.run(
        [*_launcher(), sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == -15, proc.stderr[-3000:]  # it still dies by the signal
    spans = {s["name"]: s["attributes"] for s in _console_spans(proc.stdout)}
    assert spans[semconv.SPAN_ATTEMPT][semconv.ATTEMPT_END_REASON] == "preempted"
    assert spans[semconv.SPAN_FAILURE][semconv.FAILURE_CAUSE] == "preemption"
    assert spans[semconv.SPAN_FIRST_BATCH][semconv.STEP] == 0
    assert spans[semconv.SPAN_TRAIN_WINDOW][semconv.STEP_LAST] == 2  # three optimizer steps
