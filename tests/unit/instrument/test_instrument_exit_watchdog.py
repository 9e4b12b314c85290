"""The exit watchdog: a process that recorded its failure and does not exit is ended, and its hang
recorded. Each case runs in a child process (the watchdog ends the process it lives in), whose
spans go through the library's pipeline into the SDK's ConsoleSpanExporter writing JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ett import semconv
from ett._config import DEFAULT_EXIT_TIMEOUT_S, resolve_exit_timeout
from ett._watchdog import DEFAULT_PHASE, ERROR_TYPE, EXIT_CODE, ExitWatchdog

REPO = Path(__file__).resolve().parents[3]

CHILD = """
import json, re, sys, time
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
import ett

out = open(sys.argv[1], "w")
exporter = ConsoleSpanExporter(
    out=out,
    formatter=lambda s: json.dumps({"name": s.name, "attributes": dict(s.attributes)}) + "\\n",
)
timeout = float(sys.argv[2])
sess = ett.init(job_id="j", rank=0, world_size=1, exporter=exporter, exit_timeout_s=timeout,
                install_handlers=False)
sess.first_batch(step=0)
for _ in range(3):
    sess.step()


def stuck_in_teardown():
    time.sleep(120)  # a collective that nobody joins


sess.fail(RuntimeError("boom"))
"""


def run_child(
    tmp_path: Path, tail: str, timeout_s: float, child: str = CHILD
) -> tuple[int, str, list[dict[str, Any]]]:
    """Run ``child`` + ``tail``; returns its exit status, stderr and the spans it exported."""
    script = tmp_path / "child.py"
    script.write_text(child + textwrap.dedent(tail))
    spans_file = tmp_path / "spans.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("ETT_EXIT_TIMEOUT_S", None)
    proc = subprocess.run(
        [sys.executable, str(script), str(spans_file), str(timeout_s)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # far below the child's 120 s hang: only the watchdog can end it in time
    )
    lines = spans_file.read_text().splitlines() if spans_file.exists() else []
    return proc.returncode, proc.stderr, [json.loads(line) for line in lines if line.strip()]


def hang_records(spans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        s["attributes"]
        for s in spans
        if s["name"] == semconv.SPAN_FAILURE
        and s["attributes"].get(semconv.ERROR_TYPE) == ERROR_TYPE
    ]


def test_a_hang_after_the_failure_is_recorded_and_ended(tmp_path: Path) -> None:
    rc, err, spans = run_child(
        tmp_path,
        """
        sess.exit_watchdog.phase("destroy_process_group")
        stuck_in_teardown()
        """,
        timeout_s=1.0,
    )
    assert rc == EXIT_CODE, err
    [hang] = hang_records(spans)
    assert hang[semconv.FAILURE_CAUSE] == "exception"  # the attempt's cause, repeated
    assert hang[semconv.FAILURE_PHASE] == "destroy_process_group"
    assert hang[semconv.STEP] == 3
    assert "stuck_in_teardown" in hang[semconv.CODE_STACKTRACE]
    [attempt] = [s for s in spans if s["name"] == semconv.SPAN_ATTEMPT]
    assert attempt["attributes"][semconv.ATTEMPT_END_REASON] == "failed"
    assert "exiting with status 124" in err


def test_an_unnamed_phase_is_reported_as_exit(tmp_path: Path) -> None:
    rc, _, spans = run_child(tmp_path, "stuck_in_teardown()\n", timeout_s=0.5)
    assert rc == EXIT_CODE
    [hang] = hang_records(spans)
    assert hang[semconv.FAILURE_PHASE] == DEFAULT_PHASE


def test_a_prompt_exit_records_no_hang(tmp_path: Path) -> None:
    rc, _, spans = run_child(tmp_path, "sys.exit(3)\n", timeout_s=1.0)
    assert rc == 3
    assert hang_records(spans) == []
    assert [s["name"] for s in spans].count(semconv.SPAN_FAILURE) == 1  # the failure itself


def test_a_new_session_in_the_process_disarms_it(tmp_path: Path) -> None:
    rc, err, spans = run_child(
        tmp_path,
        """
        again = ett.init(job_id="j", attempt=1, exporter=exporter, exit_timeout_s=timeout,
                         install_handlers=False)
        time.sleep(2.5)  # well past the first session's 0.5 s
        again.end()
        """,
        timeout_s=0.5,
    )
    assert rc == 0, err
    assert hang_records(spans) == []


def test_a_hang_holding_the_gil_is_ended_by_the_native_backstop(tmp_path: Path) -> None:
    # catastrophic backtracking: the regex engine holds the GIL for ever, so the Python thread
    # cannot run; faulthandler's own thread dumps the stacks and exits with status 1
    rc, err, spans = run_child(tmp_path, 're.match(r"(a+)+$", "a" * 64 + "b")\n', timeout_s=0.5)
    assert rc == 1
    assert "Timeout" in err and "child.py" in err
    assert hang_records(spans) == []  # Python never ran again: nothing could be recorded


def test_the_native_backstop_is_armed_while_stderr_is_a_buffer(tmp_path: Path) -> None:
    # torch.distributed's excepthook calls the previous one (ours: it records the failure and
    # arms the watchdog) with sys.stderr swapped for a StringIO, which has no file descriptor
    fail = 'sess.fail(RuntimeError("boom"))'
    child = CHILD.replace(
        fail, f"import io\nsys.stderr = io.StringIO()\n{fail}\nsys.stderr = sys.__stderr__\n"
    )
    assert child != CHILD
    rc, err, _ = run_child(tmp_path, 're.match(r"(a+)+$", "a" * 64 + "b")\n', 0.5, child)
    assert rc == 1, err  # without the backstop, the GIL-holding hang outlives the 60 s bound
    assert "Timeout" in err and "child.py" in err


def test_disabled_and_configured() -> None:
    watchdog = ExitWatchdog(0, lambda *a: None, lambda t: None)
    watchdog.expect()
    watchdog.arm("exception")
    assert not watchdog.enabled and not watchdog.armed and not watchdog.keeps_pipeline_open
    assert resolve_exit_timeout(env={}) == DEFAULT_EXIT_TIMEOUT_S
    assert resolve_exit_timeout(env={"ETT_EXIT_TIMEOUT_S": "0"}) == 0
    assert resolve_exit_timeout(2.5, env={"ETT_EXIT_TIMEOUT_S": "9"}) == 2.5
    assert resolve_exit_timeout(env={"ETT_EXIT_TIMEOUT_S": "soon"}) == DEFAULT_EXIT_TIMEOUT_S


def test_disarm_stops_the_clock() -> None:
    fired: list[str] = []
    watchdog = ExitWatchdog(60, lambda cause, *a: fired.append(cause), lambda t: None)
    watchdog.expect()
    assert watchdog.keeps_pipeline_open
    watchdog.arm("exception")
    assert watchdog.armed
    watchdog.disarm()
    assert not watchdog.armed and not watchdog.keeps_pipeline_open and fired == []


@pytest.mark.parametrize("name", ["abort_process_groups", ""])
def test_phase_names(name: str) -> None:
    watchdog = ExitWatchdog(1, lambda *a: None, lambda t: None)
    watchdog.phase(name)
    assert watchdog.current_phase == (name or DEFAULT_PHASE)
