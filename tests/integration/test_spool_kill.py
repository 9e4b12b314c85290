"""What a rank's spool keeps through a SIGKILL, a write cut in the middle, and a full spool, with
real trainer processes (``spool_child.py``) whose collector is away, and a real `ett serve`
that comes afterwards:

- SIGKILL while spooling: every span that ended more than :data:`LOSS_BOUND_S` before the kill
  is in the spool (the export thread writes the queue every second while the collector is
  away), and ``ett-instrument flush`` delivers the file;
- a record cut short by the kernel in the middle of its write (a file size limit), then
  SIGKILL: the flush delivers every whole record before it and names the damaged file in one
  warning line, without a traceback;
- a spool too small for the attempt: the newest spans are dropped and counted; the next
  attempt's process delivers the earlier file itself (no flush) and carries the count on its
  ``ett.attempt`` span (``ett.telemetry.spool_dropped_spans``) and in its log.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ett import semconv
from ett._spool import KIND_BATCH, Scan
from tests.support.collector_process import Collector, start_collector
from tests.support.ports import free_port
from tests.support.waits import wait_until

CHILD = Path(__file__).with_name("spool_child.py")
REPO = Path(__file__).resolve().parents[2]
LOSS_BOUND_S = 2.5
"""The export thread's period (1 s) and a margin for a loaded machine (CI's load average)."""


def _env(spool: Path, job: str, port: int, **extra: str) -> dict[str, str]:
    env = {
        **os.environ,
        "ETT_SPOOL_DIR": str(spool),
        "ETT_JOB_ID": job,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
        "PYTHONPATH": str(REPO),
        **extra,
    }
    for name in ("RANK", "WORLD_SIZE", "ETT_DISABLED", "TORCHELASTIC_RESTART_COUNT"):
        env.pop(name, None)
    return env


def _start(env: dict[str, str], out: Path, *args: str) -> subprocess.Popen[bytes]:
    with open(out, "wb") as f:
        cmd = [sys.executable, str(CHILD), *args]
        return subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT)


def _ended(out: Path) -> dict[int, float]:
    """``step -> unix time`` of the spans the child said had ended."""
    lines = [line.split() for line in out.read_text().splitlines() if line.startswith("ended ")]
    return {int(parts[1]): float(parts[2]) for parts in lines if len(parts) == 3}


def _spooled_steps(spool: Path) -> set[int]:
    """The steps of the checkpoint spans in the spool's whole records."""
    steps: set[int] = set()
    for path in spool.glob("*/*.spool"):
        with open(path, "rb") as f:
            for _, record in Scan(f):
                if record.kind != KIND_BATCH:
                    continue
                request = ExportTraceServiceRequest.FromString(record.body)
                for resource_spans in request.resource_spans:
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            if span.name == semconv.SPAN_CHECKPOINT_SAVE:
                                attrs = {a.key: a.value.int_value for a in span.attributes}
                                steps.add(attrs[semconv.CHECKPOINT_STEP])
    return steps


def _flush(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ett", "flush"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def _stored(collector: Collector, job: str, name: str) -> list[tuple[int, dict[str, Any]]]:
    """(attempt, attributes) of the job's stored spans named ``name`` (the collector's SQLite)."""
    collector.wait_computed()
    path = collector.db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        query = "SELECT attempt, attributes FROM spans WHERE job_id = ? AND name = ?"
        return [(row[0], json.loads(row[1])) for row in db.execute(query, (job, name))]


def test_sigkill_while_spooling_loses_only_the_last_second(tmp_path: Path) -> None:
    spool, port = tmp_path / "spool", free_port()
    env = _env(spool, "killed-job", port)
    out = tmp_path / "child.out"
    child = _start(env, out)
    try:
        wait_until(lambda: len(_ended(out)) > 0, 60, "the child's first step")
        started = min(_ended(out).values())
        wait_until(
            lambda: time.time() - started > 3.0 and _spooled_steps(spool), 60, "3 s of spooling"
        )
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    killed_at = time.time()
    ended = _ended(out)
    spooled = _spooled_steps(spool)
    due = {step for step, at in ended.items() if at < killed_at - LOSS_BOUND_S}
    assert due and due <= spooled, sorted(due - spooled)[:10]
    collector = start_collector(tmp_path / "home", port=port)
    try:
        done = _flush(env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert list(spool.glob("*/*.spool")) == []
        stored = _stored(collector, "killed-job", semconv.SPAN_CHECKPOINT_SAVE)
        assert {a[semconv.CHECKPOINT_STEP] for _, a in stored} == spooled
    finally:
        collector.stop()


def test_a_write_cut_in_the_middle_is_read_up_to_its_last_whole_record(tmp_path: Path) -> None:
    spool, port, limit = tmp_path / "spool", free_port(), 60_000
    env = _env(spool, "cut-job", port)
    out = tmp_path / "child.out"
    child = _start(env, out, "--fsize", str(limit))
    try:
        files = lambda: list(spool.glob("*/*.spool"))  # noqa: E731
        wait_until(lambda: files() and files()[0].stat().st_size == limit, 60, "a full file")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    [path] = list(spool.glob("*/*.spool"))
    with open(path, "rb") as f:
        scan = Scan(f)
        whole = sum(record.spans for _, record in scan)
    assert scan.problem is not None and scan.good_end < limit  # the last record is cut
    spooled = _spooled_steps(spool)
    collector = start_collector(tmp_path / "home", port=port)
    try:
        done = _flush(env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"delivered {whole} spans" in done.stdout
        [warning] = [line for line in done.stderr.splitlines() if "flush: warning:" in line]
        assert str(path) in warning and "cut short" in warning
        assert "Traceback" not in done.stderr
        stored = _stored(collector, "cut-job", semconv.SPAN_CHECKPOINT_SAVE)
        assert {a[semconv.CHECKPOINT_STEP] for _, a in stored} == spooled
    finally:
        collector.stop()


def test_the_next_attempt_delivers_and_counts_what_a_full_spool_dropped(tmp_path: Path) -> None:
    spool, port, job = tmp_path / "spool", free_port(), "full-job"
    first_out = tmp_path / "a0.out"
    first = _start(
        _env(spool, job, port, ETT_SPOOL_MAX_MB="0.03", ETT_ATTEMPT="0"),
        first_out,
        "--steps",
        "600",
    )
    assert first.wait(120) == 0, first_out.read_text()
    [dropped] = [
        int(line.split()[1])
        for line in first_out.read_text().splitlines()
        if line.startswith("dropped ")
    ]
    assert dropped > 0 and "spool" in first_out.read_text()  # counted, and said in the log
    [earlier] = list(spool.glob("*/*.spool"))
    collector = start_collector(tmp_path / "home", port=port)
    try:
        second_out = tmp_path / "a1.out"
        second = _start(_env(spool, job, port, ETT_ATTEMPT="1"), second_out, "--steps", "20")
        assert second.wait(120) == 0, second_out.read_text()
        assert not earlier.exists() and list(spool.glob("*/*.spool")) == []
        assert f"lost {dropped} spans" in second_out.read_text()
        attempts = _stored(collector, job, semconv.SPAN_ATTEMPT)
        counts = {n: a.get(semconv.TELEMETRY_SPOOL_DROPPED_SPANS) for n, a in attempts}
        assert counts == {0: None, 1: dropped}, counts  # attempt 0's span: kept in the reserve
    finally:
        collector.stop()
