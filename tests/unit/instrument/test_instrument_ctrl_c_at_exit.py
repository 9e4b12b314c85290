"""Ctrl-C while the exit's flush waits for a collector that takes the connection and never
answers: it printed a 25-line ``Exception ignored in atexit callback ... KeyboardInterrupt``
traceback from the library, and the spans the flush was waiting on (the attempt's end) were
neither sent nor spooled.

Real child processes: a thread of the child sends it SIGINT once its main thread is inside the
end's flush (seen on its stack), so the interrupt lands there, without a timed sleep."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ett import semconv
from ett._spool import Scan, spool_files

ROOT = Path(__file__).resolve().parents[3]

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import ett

    sess = ett.init(job_id="ctrl-c", window_s=0.05)
    for _ in range(3):
        sess.step()
    main = threading.main_thread().ident

    def interrupt_the_end_flush():
        while True:
            frame, names = sys._current_frames().get(main), set()
            while frame is not None:
                names.add(frame.f_code.co_name)
                frame = frame.f_back
            if {"end", "_wait"} <= names:  # Session.end, waiting in the export queue
                os.kill(os.getpid(), signal.SIGINT)
                return
            time.sleep(0.005)

    threading.Thread(target=interrupt_the_end_flush, daemon=True).start()
    """
)


@pytest.fixture
def silent_collector() -> Iterator[str]:
    """A collector that accepts connections and never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        yield f"http://127.0.0.1:{silent.getsockname()[1]}"


def run_child(endpoint: str, spool: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "ETT_SPOOL_DIR": spool,
        "ETT_FLUSH_TIMEOUT_S": "30",  # the interrupt, not the bound, ends the flush
        "ETT_EXIT_TIMEOUT_S": "0",
    }
    for name in ("ETT_JOB_ID", "ETT_DISABLED", "TORCHELASTIC_RESTART_COUNT", "ETT_ATTEMPT"):
        env.pop(name, None)
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=60
    )
    return done, time.monotonic() - start


def interrupted_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "interrupted (KeyboardInterrupt)" in line]


def spooled_span_names(root: Path) -> list[str]:
    names = []
    for path in spool_files(root):
        with open(path, "rb") as f:
            for _, record in Scan(f):
                request = ExportTraceServiceRequest.FromString(record.body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        names += [span.name for span in scope.spans]
    return names


def test_ctrl_c_during_the_exit_flush_says_one_line_and_spools_the_end(
    tmp_path: Path, silent_collector: str
) -> None:
    done, took = run_child(silent_collector, str(tmp_path / "spool"))
    assert "Traceback" not in done.stderr, done.stderr
    (said,) = interrupted_lines(done.stderr)
    assert "no span was lost" in said and "ett-instrument flush" in said
    # the exit status stays the program's: an atexit hook cannot change it safely (docs)
    assert done.returncode == 0
    assert took < 20  # cut short: the flush's bound is 30 s
    names = spooled_span_names(tmp_path / "spool")
    assert semconv.SPAN_ATTEMPT in names, names
    assert semconv.SPAN_TRAIN_WINDOW in names


def test_ctrl_c_during_the_exit_flush_without_a_spool_counts_what_is_lost(
    silent_collector: str,
) -> None:
    done, _ = run_child(silent_collector, "off")
    assert "Traceback" not in done.stderr, done.stderr
    (said,) = interrupted_lines(done.stderr)
    assert "span(s) not sent were dropped" in said
    assert done.returncode == 0
