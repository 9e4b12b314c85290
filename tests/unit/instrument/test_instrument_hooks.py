"""Process hooks, in real subprocesses: an uncaught exception, SIGTERM, a normal exit, a thread
that dies, ``sys.exit`` inside a guard. The child exports its spans as JSON lines to a file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from ett import semconv

ROOT = Path(__file__).resolve().parents[3]

PRELUDE = textwrap.dedent(
    """
    import json, os, signal, sys, threading, time
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    import ett

    class JsonLines(SpanExporter):
        def __init__(self, path):
            self.path = path
        def export(self, spans):
            with open(self.path, "a") as f:
                for s in spans:
                    row = {"name": s.name, "attributes": dict(s.attributes or {}),
                           "start": s.start_time, "end": s.end_time}
                    f.write(json.dumps(row) + "\\n")
            return SpanExportResult.SUCCESS
        def shutdown(self):
            pass

    INIT_KWARGS = {}
    SETUP
    sess = ett.init(job_id="hooks", exporter=JsonLines(sys.argv[1]), window_s=0.05, **INIT_KWARGS)
    sess.first_batch(step=7)
    for _ in range(3):
        sess.step()
    """
)


def run_child(
    tmp_path: Path, body: str, setup: str = "", sigterm_when_ready: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    script = tmp_path / "child.py"
    spans_file = tmp_path / "spans.jsonl"
    script.write_text(PRELUDE.replace("SETUP", setup) + textwrap.dedent(body))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("ETT_JOB_ID", "ETT_DISABLED", "TORCHELASTIC_RESTART_COUNT", "ETT_ATTEMPT"):
        env.pop(name, None)
    cmd = [sys.executable, str(script), str(spans_file)]
    if sigterm_when_ready:
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
    else:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
    spans = []
    if spans_file.exists():
        spans = [json.loads(line) for line in spans_file.read_text().splitlines()]
    return done, spans


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def attempt_attrs(spans: list[dict[str, Any]]) -> dict[str, Any]:
    attempts = named(spans, semconv.SPAN_ATTEMPT)
    assert len(attempts) == 1, attempts
    return dict(attempts[0]["attributes"])


def test_uncaught_exception_fails_the_attempt_and_keeps_the_traceback(tmp_path: Path) -> None:
    done, spans = run_child(
        tmp_path, 'raise RuntimeError("NCCL watchdog: collective operation timed out")\n'
    )
    assert done.returncode == 1
    assert "RuntimeError: NCCL watchdog: collective operation timed out" in done.stderr
    assert "Traceback" in done.stderr
    attempt = attempt_attrs(spans)
    assert attempt[semconv.ATTEMPT_END_REASON] == "failed"
    assert attempt[semconv.FAILURE_CAUSE] == "nccl_timeout"
    (failure,) = named(spans, semconv.SPAN_FAILURE)
    assert failure["attributes"] == {
        semconv.FAILURE_CAUSE: "nccl_timeout",
        semconv.STEP: 10,
        semconv.ERROR_TYPE: "RuntimeError",
    }
    assert failure["start"] == failure["end"]
    windows = named(spans, semconv.SPAN_TRAIN_WINDOW)
    assert windows and windows[-1]["attributes"][semconv.STEP_LAST] == 9


def test_user_excepthook_still_runs(tmp_path: Path) -> None:
    setup = "sys.excepthook = lambda t, e, tb: print('custom hook', t.__name__, file=sys.stderr)"
    done, spans = run_child(tmp_path, "raise MemoryError()\n", setup=setup)
    assert done.returncode == 1
    assert "custom hook MemoryError" in done.stderr
    assert attempt_attrs(spans)[semconv.FAILURE_CAUSE] == "oom"


def test_sigterm_ends_preempted_then_dies_by_the_signal(tmp_path: Path) -> None:
    body = 'print("ready", flush=True)\ntime.sleep(30)\nprint("not reached")\n'
    done, spans = run_child(tmp_path, body, sigterm_when_ready=True)
    assert done.returncode == -signal.SIGTERM
    assert "not reached" not in done.stdout
    attempt = attempt_attrs(spans)
    assert attempt[semconv.ATTEMPT_END_REASON] == "preempted"
    assert attempt[semconv.FAILURE_CAUSE] == "preemption"
    (failure,) = named(spans, semconv.SPAN_FAILURE)
    assert failure["attributes"][semconv.FAILURE_CAUSE] == "preemption"


def test_sigterm_calls_the_previous_handler(tmp_path: Path) -> None:
    setup = textwrap.dedent(
        """
        def on_term(signum, frame):
            print("user handler", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, on_term)
        """
    )
    body = 'print("ready", flush=True)\ntime.sleep(30)\n'
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 3
    assert "user handler" in done.stdout
    assert attempt_attrs(spans)[semconv.ATTEMPT_END_REASON] == "preempted"


def test_sigterm_can_raise_preempted_so_finally_blocks_run(tmp_path: Path) -> None:
    setup = "INIT_KWARGS = {'raise_on_sigterm': True}"
    body = textwrap.dedent(
        """
        try:
            try:
                print("ready", flush=True)
                time.sleep(30)
            except Exception:
                print("swallowed", flush=True)
        finally:
            print("finally ran", flush=True)
        """
    )
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 143  # uncaught Preempted: a quiet SystemExit(128 + SIGTERM)
    assert "finally ran" in done.stdout and "swallowed" not in done.stdout
    assert "Traceback" not in done.stderr
    attempt = attempt_attrs(spans)
    assert attempt[semconv.ATTEMPT_END_REASON] == "preempted"
    assert attempt[semconv.FAILURE_CAUSE] == "preemption"
    assert len(named(spans, semconv.SPAN_FAILURE)) == 1  # recorded once, before the raise


def test_preempted_is_raised_with_telemetry_off_too(tmp_path: Path) -> None:
    setup = "os.environ['ETT_DISABLED'] = '1'\nINIT_KWARGS = {'raise_on_sigterm': True}"
    body = textwrap.dedent(
        """
        try:
            print("ready", flush=True)
            time.sleep(30)
        except ett.Preempted as exc:
            print("preempted", exc.exit_status, flush=True)
            raise
        """
    )
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 143
    assert "preempted 143" in done.stdout
    assert spans == []


def test_normal_exit_completes(tmp_path: Path) -> None:
    done, spans = run_child(tmp_path, "time.sleep(0.2)\nsess.step()\n")
    assert done.returncode == 0, done.stderr
    attempt = attempt_attrs(spans)
    assert attempt[semconv.ATTEMPT_END_REASON] == "completed"
    assert semconv.FAILURE_CAUSE not in attempt
    windows = named(spans, semconv.SPAN_TRAIN_WINDOW)
    assert sum(w["attributes"][semconv.SAMPLES] for w in windows) == 4
    assert max(w["attributes"][semconv.STEP_LAST] for w in windows) == 10
    assert len(named(spans, semconv.SPAN_FIRST_BATCH)) == 1


def test_thread_exception_is_a_failure_span_not_the_end(tmp_path: Path) -> None:
    body = textwrap.dedent(
        """
        def work():
            raise ValueError("loader died")
        t = threading.Thread(target=work)
        t.start(); t.join()
        sess.step()
        """
    )
    done, spans = run_child(tmp_path, body)
    assert done.returncode == 0
    assert "ValueError: loader died" in done.stderr  # the default thread hook still printed it
    (failure,) = named(spans, semconv.SPAN_FAILURE)
    assert failure["attributes"][semconv.FAILURE_CAUSE] == "exception"
    assert failure["attributes"][semconv.ERROR_TYPE] == "ValueError"
    assert attempt_attrs(spans)[semconv.ATTEMPT_END_REASON] == "completed"


@pytest.mark.parametrize(("code", "reason"), [(2, "failed"), (0, "completed")])
def test_sys_exit_inside_guard(tmp_path: Path, code: int, reason: str) -> None:
    done, spans = run_child(tmp_path, f"with sess.guard():\n    sys.exit({code})\n")
    assert done.returncode == code
    attempt = attempt_attrs(spans)
    assert attempt[semconv.ATTEMPT_END_REASON] == reason
    if code:
        (failure,) = named(spans, semconv.SPAN_FAILURE)
        assert failure["attributes"][semconv.ERROR_TYPE] == "SystemExit"


def _one_save_inside_the_attempt(spans: list[dict[str, Any]]) -> None:
    """The checkpoint saved after the SIGTERM reached the exporter, inside the attempt, and the
    attempt ended preempted with one failure (the preemption, at the signal)."""
    (save,) = named(spans, semconv.SPAN_CHECKPOINT_SAVE)
    (attempt,) = named(spans, semconv.SPAN_ATTEMPT)
    assert save["end"] <= attempt["end"]
    assert attempt["attributes"][semconv.ATTEMPT_END_REASON] == "preempted"
    assert attempt["attributes"][semconv.FAILURE_CAUSE] == "preemption"
    (failure,) = named(spans, semconv.SPAN_FAILURE)
    assert failure["attributes"][semconv.FAILURE_CAUSE] == "preemption"
    assert failure["start"] <= save["start"]


def test_a_program_handling_sigterm_records_its_checkpoint_then_ends_preempted(
    tmp_path: Path,
) -> None:
    """Graceful shutdown: the program's own handler (installed before init) sets a flag, the
    loop stops and saves a checkpoint. The attempt is not ended in the handler (it was, and
    the save was dropped: all training counted unsaved); it ends at the exit."""
    setup = textwrap.dedent(
        """
        STOP = []
        signal.signal(signal.SIGTERM, lambda signum, frame: STOP.append(signum))
        """
    )
    body = textwrap.dedent(
        """
        print("ready", flush=True)
        while not STOP:
            time.sleep(0.01)
        with sess.checkpoint_save(10):
            time.sleep(0.05)
        print("ended", sess.ended, flush=True)
        """
    )
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 0, done.stderr
    assert "ended False" in done.stdout
    _one_save_inside_the_attempt(spans)


@pytest.mark.parametrize("leave", ["sys.exit(exc.exit_status)", "os._exit(exc.exit_status)"])
def test_preempted_caught_then_a_checkpoint_saved_is_part_of_the_attempt(
    tmp_path: Path, leave: str
) -> None:
    """``except ett.Preempted``: save, then leave, through the interpreter's exit or at once
    with ``os._exit`` (as a failed rank of trainer/ does, past gloo's destructors): the attempt
    ends then, with the save in it."""
    setup = "INIT_KWARGS = {'raise_on_sigterm': True}"
    body = textwrap.dedent(
        f"""
        try:
            print("ready", flush=True)
            time.sleep(30)
        except ett.Preempted as exc:
            with sess.checkpoint_save(10):
                time.sleep(0.05)
            print("ended", sess.ended, flush=True)
            {leave}
        """
    )
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 143, done.stderr
    assert "ended False" in done.stdout
    assert "Traceback" not in done.stderr
    _one_save_inside_the_attempt(spans)


def test_an_ignored_sigterm_is_not_a_preemption(tmp_path: Path) -> None:
    """SIG_IGN before init: the program lives on as without the library, and so does its
    attempt (it ended preempted at the signal, and dropped every later span)."""
    setup = textwrap.dedent(
        """
        import logging
        SAID = []
        class Said(logging.Handler):
            def emit(self, record):
                SAID.append(record.getMessage())
        logging.getLogger("ett_instrument").addHandler(Said())
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        """
    )
    body = textwrap.dedent(
        """
        print("ready", flush=True)
        while not any("SIGTERM ignored" in line for line in SAID):
            time.sleep(0.01)
        sess.step()
        """
    )
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 0, done.stderr
    assert attempt_attrs(spans)[semconv.ATTEMPT_END_REASON] == "completed"
    assert named(spans, semconv.SPAN_FAILURE) == []
    assert (
        max(w["attributes"][semconv.STEP_LAST] for w in named(spans, semconv.SPAN_TRAIN_WINDOW))
        == 10
    )
