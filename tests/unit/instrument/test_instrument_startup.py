"""Start-up the library names by itself: ``scheduling`` and ``imports`` from the OS's process
start at ``init()``, ``cuda_init``, user barrier phases, and the torchrun restart warning."""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import pytest

from ett import _startup, _torchrun, semconv, torch_hooks
from ett._startup import emit_process_startup, process_start_ns
from tests.support.waits import wait_until

if TYPE_CHECKING:
    from conftest import Recorder

S = 1_000_000_000
IMPORTS = semconv.startup_span_name(semconv.StartupPhaseValues.IMPORTS)
SCHEDULING = semconv.startup_span_name(semconv.StartupPhaseValues.SCHEDULING)
CUDA_INIT = semconv.startup_span_name(semconv.StartupPhaseValues.CUDA_INIT)


def attrs(span: Any) -> dict[str, Any]:
    return dict(span.attributes or {})


class Sink:
    """Our SpanSink interface, in memory: (name, attributes, start, end)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, dict[str, Any], int, int]] = []

    def start(self, name: str, attributes: dict[str, Any], start_ns: int | None = None) -> Any:
        return (name, attributes, start_ns)

    def end(self, span: Any, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        name, attributes, start = span
        self.spans.append((name, attributes, start, end_ns or 0))


@pytest.mark.parametrize(
    ("alloc", "started", "expected"),
    [
        # allocated before the process started: the wait is the scheduler's
        (100 * S, 103 * S, [(SCHEDULING, "scheduler", 100, 103), (IMPORTS, "runtime", 103, 110)]),
        # the allocation is the process start (ETT_ALLOCATED_AT unset): imports only
        (103 * S, 103 * S, [(IMPORTS, "runtime", 103, 110)]),
        # allocated after the process started (an explicit allocated_at): from the allocation
        (105 * S, 103 * S, [(IMPORTS, "runtime", 105, 110)]),
        # the OS does not say when the process started
        (104 * S, None, [(IMPORTS, "runtime", 104, 110)]),
    ],
)
def test_process_startup_phases(
    alloc: int, started: int | None, expected: list[tuple[str, str, int, int]]
) -> None:
    sink = Sink()
    emit_process_startup(sink, alloc, 110 * S, started)
    got = [(n, a[semconv.COMPONENT], s // S, e // S) for n, a, s, e in sink.spans]
    assert got == expected


def test_two_readings_of_the_same_process_start_make_no_scheduling_phase() -> None:
    sink = Sink()
    emit_process_startup(sink, 100 * S, 110 * S, 100 * S + 3_000_000)  # 3 ms apart
    assert [name for name, *_ in sink.spans] == [IMPORTS]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")
def test_process_start_comes_from_the_os() -> None:
    code = (
        "import json, time; t = time.time_ns(); "
        "from ett._startup import process_start_ns; "
        "print(json.dumps([t, process_start_ns()]))"
    )
    spawned = time.time_ns()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    first_line, started = json.loads(out.stdout)
    # clock ticks are 10 ms: the start lies between the spawn and the child's first line
    assert spawned - 20_000_000 <= started <= first_line + 10_000_000
    own = process_start_ns()
    assert own is not None and own < spawned


def test_init_names_scheduling_and_imports_before_any_end(recorder: Recorder) -> None:
    started = process_start_ns()
    assert started is not None
    alloc_s = started / 1e9 - 4.0  # the scheduler allocated the job 4 s before this process
    before = time.time_ns()
    sess = recorder.start(allocated_at=alloc_s)
    after = time.time_ns()
    wait_until(
        lambda: any(s.name == IMPORTS for s in recorder.exporter.get_finished_spans()),
        5,
        "the start-up spans exported without end()",
        interval=0.01,
    )
    sched = recorder.one(SCHEDULING)
    parts = sorted(recorder.named(IMPORTS), key=lambda s: s.start_time or 0)
    assert attrs(sched)[semconv.COMPONENT] == "scheduler"
    assert {attrs(p)[semconv.COMPONENT] for p in parts} == {"runtime"}
    assert sched.start_time == int(alloc_s * 1e9)
    assert sched.end_time == parts[0].start_time
    assert abs((parts[0].start_time or 0) - started) < 20_000_000
    assert parts[-1].end_time is not None and before <= parts[-1].end_time <= after
    # one span, or the interpreter's and the packages' parts, tiling (ett._startup)
    ready = _startup.interpreter_ready_ns()
    assert [attrs(p).get(semconv.STARTUP_PART) for p in parts] == (
        [None] if ready is None else ["interpreter", "packages"]
    )
    assert all(a.end_time == b.start_time for a, b in itertools.pairwise(parts))
    assert ready is None or parts[0].end_time == ready
    sess.end()
    assert recorder.one(semconv.SPAN_ATTEMPT).start_time == sched.start_time


def test_a_disabled_session_names_nothing(recorder: Recorder) -> None:
    recorder.start(enabled=False).end()
    assert recorder.exporter.get_finished_spans() == ()


def test_user_barrier_phase(recorder: Recorder) -> None:
    sess = recorder.start()
    with sess.startup("warmup_sync", barrier=True):
        pass
    with sess.startup("model_init"):
        pass
    sess.end()
    warmup = attrs(recorder.one("ett.startup.warmup_sync"))
    assert warmup[semconv.BARRIER] is True
    assert warmup[semconv.COMPONENT] == "other"
    assert semconv.BARRIER not in attrs(recorder.one("ett.startup.model_init"))


def test_init_cuda_on_cpu_emits_nothing(recorder: Recorder) -> None:
    import torch

    sess = recorder.start()
    created = torch_hooks.init_cuda("cpu", session=sess)
    if not torch.cuda.is_available():
        assert torch_hooks.init_cuda(session=sess) is False
    sess.end()
    assert created is False
    assert recorder.named(CUDA_INIT) == []


def test_cuda_init_phase_times_the_context_creation(recorder: Recorder) -> None:
    sess = recorder.start()
    calls: list[int] = []

    def create() -> None:  # stands in for the CUDA context creation
        calls.append(time.time_ns())
        time.sleep(0.05)

    assert torch_hooks._time_cuda_init(sess, create) is True
    sess.end()
    span = recorder.one(CUDA_INIT)
    assert attrs(span)[semconv.COMPONENT] == "runtime"
    assert span.start_time <= calls[0] and span.end_time is not None
    assert span.end_time - span.start_time >= 50_000_000


@pytest.fixture
def fresh_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torchrun, "_warned", False)


@pytest.mark.parametrize(
    ("env", "backend", "warns"),
    [
        ({"TORCHELASTIC_RESTART_COUNT": "1"}, "gloo", True),
        ({"TORCHELASTIC_RESTART_COUNT": "2"}, "cpu:gloo,cuda:nccl", True),
        ({"TORCHELASTIC_RESTART_COUNT": "0"}, "gloo", False),  # the first attempt
        ({}, "gloo", False),  # not under torchrun
        (
            {"TORCHELASTIC_RESTART_COUNT": "1", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"},
            "gloo",
            False,
        ),
        ({"TORCHELASTIC_RESTART_COUNT": "1"}, "nccl", False),
        ({"TORCHELASTIC_RESTART_COUNT": "x"}, "gloo", False),
    ],
)
def test_restart_store_risk(env: dict[str, str], backend: str, warns: bool) -> None:
    assert _torchrun.restart_store_at_risk(backend, env) is warns


def test_the_restart_warning_is_logged_once(
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_warning: None,
) -> None:
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    sess = recorder.start()
    with caplog.at_level(logging.WARNING, logger="ett_instrument"):
        sess.set_backend("gloo")
        sess.set_backend("gloo")
    sess.end()
    warnings = [r for r in caplog.records if "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" in r.message]
    assert len(warnings) == 1
    assert warnings[0].levelno == logging.WARNING


def test_init_process_group_warns_and_marks_a_barrier(
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    fresh_warning: None,
    tmp_path: Any,
) -> None:
    import torch.distributed as dist

    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    monkeypatch.delenv("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", raising=False)
    sess = recorder.start()
    with caplog.at_level(logging.WARNING, logger="ett_instrument"):
        torch_hooks.init_process_group(
            "gloo", init_method=f"file://{tmp_path / 'rdzv'}", rank=0, world_size=1, session=sess
        )
    try:
        torch_hooks.destroy_process_group(session=sess)
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    sess.end()
    assert any("TORCH_DISABLE_SHARE_RDZV_TCP_STORE" in r.message for r in caplog.records)
    pg_init = attrs(recorder.one("ett.startup.pg_init"))
    assert pg_init[semconv.BARRIER] is True and pg_init[semconv.COMPONENT] == "comms"
    teardown = attrs(recorder.one("ett.shutdown.pg_teardown"))
    assert teardown[semconv.COMPONENT] == "comms"


def test_cuda_init_phase_starts_before_the_driver_check_and_records_errors(
    recorder: Recorder,
) -> None:
    sess = recorder.start()
    checked_from = time.time_ns() - 200_000_000  # the availability check began 0.2 s earlier

    def create() -> None:
        raise RuntimeError("CUDA error: no kernel image")

    with pytest.raises(RuntimeError, match="no kernel image"):
        torch_hooks._time_cuda_init(sess, create, checked_from)
    sess.end()
    span = recorder.one(CUDA_INIT)
    assert span.start_time == checked_from
    assert not span.status.is_ok


def test_process_start_does_not_move_when_the_wall_clock_is_stepped_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a VM's wall clock drifts from its boot clock (ms a minute); a start read through the wall
    # clock at each call moved later by all the drift since, past the library's own import, and
    # the split of imports vanished in a long-lived process (seen in CI)
    before = process_start_ns()
    real = time.time_ns
    monkeypatch.setattr(_startup.time, "time_ns", lambda: real() + 5_000_000_000)
    assert process_start_ns() == before
    assert before is not None and before <= _startup.LOADED_NS
