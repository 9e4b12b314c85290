"""Start-up before ``init()`` in parts: torchrun's share (``launcher``, ``rendezvous``,
``worker_spawn``) and ``imports`` split into the interpreter's and the packages' parts; every
phase tiles ``[allocation, init()]`` (``ett._startup``, ``ett._torchrun``)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ett import _torchrun, semconv
from ett._startup import emit_process_startup

S = 1_000_000_000
CLOCK_TICK_NS = 20_000_000
"""File times come from the kernel's coarse clock, one tick (at most 10 ms) behind ``time``."""
SUBPROCESS = {"cwd": Path(__file__).resolve().parents[3], "capture_output": True, "text": True}


class Sink:
    """Our SpanSink interface, in memory: (phase, component, part, start, end)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str | None, int, int]] = []

    def start(self, name: str, attributes: dict[str, Any], start_ns: int | None = None) -> Any:
        return (name, attributes, start_ns)

    def end(self, span: Any, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        name, attributes, start = span
        phase = semconv.startup_phase(name) or name
        self.spans.append(
            (
                phase,
                attributes[semconv.COMPONENT],
                attributes.get(semconv.STARTUP_PART),
                start,
                end_ns or 0,
            )
        )

    def seconds(self) -> list[tuple[str, str, str | None, float, float]]:
        return [(p, c, part, s / S, e / S) for p, c, part, s, e in self.spans]


LAUNCHER = [("launcher", 102 * S), ("rendezvous", 104 * S), ("worker_spawn", 105 * S)]


def test_torchrun_share_and_the_two_parts_of_imports_tile_from_the_allocation() -> None:
    sink = Sink()
    emit_process_startup(sink, 100 * S, 110 * S, 106 * S, LAUNCHER, ready_ns=107 * S)
    assert sink.seconds() == [
        ("scheduling", "scheduler", None, 100, 102),
        ("launcher", "runtime", None, 102, 104),
        ("rendezvous", "comms", None, 104, 105),
        ("worker_spawn", "runtime", None, 105, 106),
        ("imports", "runtime", "interpreter", 106, 107),
        ("imports", "runtime", "packages", 107, 110),
    ]


def test_without_an_earlier_allocation_the_launcher_is_outside_the_attempt() -> None:
    """ETT_ALLOCATED_AT unset: the attempt starts at this process (the spec's process start)."""
    sink = Sink()
    emit_process_startup(sink, 106 * S, 110 * S, 106 * S, LAUNCHER, ready_ns=107 * S)
    assert [(p, part) for p, _, part, *_ in sink.spans] == [
        ("imports", "interpreter"),
        ("imports", "packages"),
    ]
    assert sink.spans[0][3] == 106 * S


def test_an_allocation_inside_the_rendezvous_starts_there() -> None:
    sink = Sink()
    emit_process_startup(sink, 104 * S + S // 2, 110 * S, 106 * S, LAUNCHER)
    assert sink.seconds() == [
        ("rendezvous", "comms", None, 104.5, 105),
        ("worker_spawn", "runtime", None, 105, 106),
        ("imports", "runtime", None, 106, 110),
    ]


def test_a_ready_instant_before_the_imports_start_does_not_split_them() -> None:
    sink = Sink()  # allocated (explicitly) after the library was imported
    emit_process_startup(sink, 108 * S, 110 * S, 106 * S, ready_ns=107 * S)
    assert sink.seconds() == [("imports", "runtime", None, 108, 110)]


instants = st.integers(min_value=0, max_value=1_000)


@given(
    alloc=instants,
    now=instants,
    started=st.none() | instants,
    launcher=st.lists(instants, max_size=3),
    ready=st.none() | instants,
)
def test_the_phases_tile_the_allocation_to_init(
    alloc: int, now: int, started: int | None, launcher: list[int], ready: int | None
) -> None:
    names = ("launcher", "rendezvous", "worker_spawn")
    marks = list(zip(names, sorted(t * 10_000_000 for t in launcher), strict=False))
    sink = Sink()
    emit_process_startup(
        sink,
        alloc * 10_000_000,
        now * 10_000_000,
        None if started is None else started * 10_000_000,
        marks,
        None if ready is None else ready * 10_000_000,
    )
    spans = [(s, e) for *_, s, e in sink.spans]
    assert all(s < e for s, e in spans)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))
    if now > alloc:
        assert spans[0][0] == alloc * 10_000_000 and spans[-1][1] == now * 10_000_000
    else:
        assert spans == []


def _torchrun_layout(root: Path, restart: int = 0) -> dict[str, str]:
    """The log directories torchrun makes (a root by mkdtemp, the run's, the attempt's with one
    directory per local rank) and the environment it gives local rank 0."""
    attempt = root / "run-1_abc" / f"attempt_{restart}"
    (attempt / "0").mkdir(parents=True)
    return {
        "TORCHELASTIC_RUN_ID": "run-1",
        "TORCHELASTIC_RESTART_COUNT": str(restart),
        "TORCHELASTIC_ERROR_FILE": str(attempt / "0" / "error.json"),
    }


def test_launcher_marks_come_from_torchruns_log_directories(tmp_path: Path) -> None:
    agent = time.time_ns()
    time.sleep(0.05)  # the agent's imports (file times may lag the clock by a tick)
    root = tmp_path / "torchelastic_x"
    root.mkdir()
    time.sleep(0.05)  # the rendezvous
    made = time.time_ns()
    env = _torchrun_layout(root)
    after = time.time_ns()
    marks = dict(_torchrun.launcher_marks(env, agent_start_ns=agent))
    assert marks["launcher"] == agent
    spawn = marks["worker_spawn"]
    assert made - CLOCK_TICK_NS <= spawn <= after
    if _torchrun.birth_ns(str(root)) is None:  # no birth times on this file system
        assert list(marks) == ["launcher", "worker_spawn"]
    else:
        assert list(marks) == ["launcher", "rendezvous", "worker_spawn"]
        assert agent <= marks["rendezvous"] <= made


def test_a_parent_that_started_after_the_spawn_is_not_the_agent(tmp_path: Path) -> None:
    env = _torchrun_layout(tmp_path / "torchelastic_x")
    wrapper = time.time_ns() + 60 * S  # a wrapper script between torchrun and the worker
    marks = _torchrun.launcher_marks(env, agent_start_ns=wrapper)
    assert [phase for phase, _ in marks] in (["rendezvous", "worker_spawn"], ["worker_spawn"])


def test_a_log_directory_older_than_the_agent_is_no_rendezvous(tmp_path: Path) -> None:
    root = tmp_path / "logs"  # torchrun --log-dir logs, made before this torchrun started
    root.mkdir()
    time.sleep(0.05)  # elapsed time, not a wait: the folder is older than the agent
    agent = time.time_ns()
    time.sleep(0.05)  # elapsed time, not a wait: the agent's imports
    env = _torchrun_layout(root)
    marks = _torchrun.launcher_marks(env, agent_start_ns=agent)
    assert [phase for phase, _ in marks] == ["launcher", "worker_spawn"]


@pytest.mark.parametrize(
    "env",
    [
        {},  # not under torchrun
        {"TORCHELASTIC_RUN_ID": "r", "TORCHELASTIC_RESTART_COUNT": "0"},  # no log directory
        {
            "TORCHELASTIC_RUN_ID": "r",
            "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_ERROR_FILE": "relative/error.json",
        },
    ],
)
def test_launcher_marks_without_log_directories(env: dict[str, str]) -> None:
    marks = _torchrun.launcher_marks(env, agent_start_ns=123)
    assert marks == ([] if not env else [("launcher", 123)])


READY = (
    "import json, sys, time; t = time.time_ns(); {first}"
    "from ett import _startup; "
    "print(json.dumps([t, time.time_ns(), _startup.interpreter_ready_ns()]))"
)


@pytest.mark.parametrize(("first", "split"), [("", True), ("import numpy; ", False)])
def test_the_interpreter_is_ready_when_the_library_is_imported_before_heavy_packages(
    first: str, split: bool
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", READY.format(first=first)], check=True, **SUBPROCESS
    )  # type: ignore[call-overload]
    before, after, ready = json.loads(out.stdout)
    if split:
        assert before <= ready <= after
    else:
        assert ready is None
