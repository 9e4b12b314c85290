"""Start-up before the trainer's first line: the phases the library measures by itself.

When a session starts (``ett.init()``), the seconds between the process's start and that call
are already spent: the interpreter started and imported torch and the trainer's packages. The
library names them right away, as spans that start where the attempt does, so the collector's
``alloc(a)`` (the earliest start of an ``ett.attempt`` or ``ett.startup.*`` span) is right while
the job runs, and stays right if the process is SIGKILLed later (the ``ett.attempt`` span only
arrives at the end). The phases tile ``[allocation, init()]`` without overlap:

- ``ett.startup.scheduling`` from the allocation (``ETT_ALLOCATED_AT``), component
  ``scheduler``, when the allocation is before the process (or its launcher) started;
- under torchrun, its share before this process started (``ett._torchrun``):
  ``launcher`` (the agent's interpreter and imports, ``runtime``), ``rendezvous`` (``comms``, a
  barrier) and ``worker_spawn`` (``runtime``). No phase starts before the allocation, so they
  only show where the allocation is known to precede them (``ETT_ALLOCATED_AT`` from the
  scheduler); without it the attempt starts at this process's start and they are not counted;
- ``ett.startup.imports`` from the process start (or the allocation, when later), component
  ``runtime``, in two parts (attribute ``ett.startup.part``) where the library can tell them
  apart: ``interpreter``, from the process start to the instant this module was imported, and
  ``packages``, from there to ``init()``. That instant marks the end of the interpreter's own
  start-up only when no heavy package (:data:`HEAVY_PACKAGES`) was imported before it: a program
  that imports torch first, then the library, gets one ``imports`` span (the library cannot see
  when torch's import began). The zero-code ``ett-instrument`` imports the library from
  ``sitecustomize``, at interpreter start, so its runs always get both parts.

The process start comes from the OS (Linux: ``/proc/<pid>/stat`` field 22, clock ticks since
boot, against ``/proc/uptime``: 10 ms ticks); where that is not readable, the imports phase
starts at the allocation instant (itself the time the library was imported, on such systems).
Nothing here raises into the program: an instant that cannot be read is left out.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from opentelemetry.util.types import AttributeValue

from . import semconv
from ._spans import SpanSink
from ._torchrun import launcher_marks

HEAVY_PACKAGES = ("torch", "numpy", "jax", "tensorflow", "pandas", "torchrec")
"""Packages whose import is the program's, not the interpreter's, start-up."""

LOADED_NS = time.time_ns()
"""When this module was imported (``import ett`` imports it)."""


def _boot_ns() -> int | None:
    """Nanoseconds since boot, the clock of ``/proc/<pid>/stat``'s start times; None where
    unknown."""
    try:
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    except (AttributeError, OSError):
        try:
            with open("/proc/uptime", encoding="ascii") as f:
                return int(float(f.read().split()[0]) * 1e9)
        except (OSError, ValueError, IndexError):
            return None


_BOOT_AT_LOAD_NS = _boot_ns()
"""The boot clock read with :data:`LOADED_NS`: process starts are placed on the wall clock through
this one pair of readings, so they agree with :data:`LOADED_NS` however the wall clock is slewed or
stepped later (a VM's wall clock drifts from its boot clock by milliseconds a minute; read at
each call, a long-lived process's start moved later by all the drift since)."""

_LOADED_BEFORE_HEAVY = not any(name in sys.modules for name in HEAVY_PACKAGES)


def interpreter_ready_ns() -> int | None:
    """The end of the interpreter's own start-up as far as the library can see: when it was
    imported, if no heavy package was imported before it; else None (module docstring)."""
    return LOADED_NS if _LOADED_BEFORE_HEAVY else None


_SAME_INSTANT_NS = 20_000_000
"""Two readings of the process start (the identity's and this module's) agree to within a few
clock ticks: a smaller gap between allocation and process start is no scheduling phase."""


def process_start_ns(pid: int | None = None) -> int | None:
    """Unix nanoseconds at which process ``pid`` (default: this one) started, from the OS; None
    where unknown."""
    try:
        with open(f"/proc/{pid or 'self'}/stat", encoding="ascii") as f:
            stat = f.read()
        # field 22 (starttime); the fields after the ")" of comm are numbered from 3
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    if _BOOT_AT_LOAD_NS is None:
        return None
    return LOADED_NS - (_BOOT_AT_LOAD_NS - start_ticks * 1_000_000_000 // hz)


def _emit(sink: SpanSink, phase: str, start_ns: int, end_ns: int, part: str | None = None) -> None:
    attrs: dict[str, AttributeValue] = {semconv.COMPONENT: semconv.default_component(phase)}
    if part is not None:
        attrs[semconv.STARTUP_PART] = part
    sink.end(sink.start(semconv.startup_span_name(phase), attrs, start_ns), end_ns=end_ns)


Mark = tuple[str, int, str | None]
"""(phase, instant it starts, part of the phase or None)."""


def _marks(
    alloc_ns: int, started_ns: int | None, launcher: Sequence[tuple[str, int]], ready_ns: int | None
) -> list[Mark]:
    phases, parts = semconv.StartupPhaseValues, semconv.ImportsPartValues
    if started_ns is None:
        marks: list[Mark] = [(phases.IMPORTS, alloc_ns, None)]
    else:
        if started_ns <= alloc_ns + _SAME_INSTANT_NS:  # the attempt starts with this process
            launcher = ()
        marks = [(phases.SCHEDULING, alloc_ns, None)]
        marks += [(phase, instant, None) for phase, instant in launcher]
        marks.append((phases.IMPORTS, started_ns, None))
        if marks[1][1] <= alloc_ns + _SAME_INSTANT_NS:  # no wait worth a scheduling phase
            marks = [(marks[1][0], alloc_ns, None), *marks[2:]]
    if ready_ns is not None and ready_ns > max(marks[-1][1], alloc_ns):
        marks[-1] = (phases.IMPORTS, marks[-1][1], parts.INTERPRETER)
        marks.append((phases.IMPORTS, ready_ns, parts.PACKAGES))
    return marks


def emit_process_startup(
    sink: SpanSink,
    alloc_ns: int,
    now_ns: int,
    started_ns: int | None,
    launcher: Sequence[tuple[str, int]] = (),
    ready_ns: int | None = None,
) -> list[str]:
    """Emit the phases of the module docstring for an attempt allocated at ``alloc_ns`` whose
    process started at ``started_ns`` (None: unknown), up to ``now_ns``. ``launcher`` holds the
    launcher's ``(phase, instant)`` marks (``ett._torchrun.launcher_marks``), ``ready_ns``
    the end of the interpreter's own start-up (:func:`interpreter_ready_ns`). Each mark's phase
    runs to the next mark; instants are clamped to ``[alloc_ns, now_ns]`` and kept in order,
    so the phases tile ``[alloc_ns, now_ns]``; empty ones are left out. Returns the phases
    emitted, in order."""
    marks = _marks(alloc_ns, started_ns, launcher, ready_ns)
    starts: list[int] = []
    for _, instant, _ in marks:
        starts.append(min(max(instant, starts[-1] if starts else alloc_ns), now_ns))
    emitted = []
    for (phase, _, part), start, end in zip(marks, starts, [*starts[1:], now_ns], strict=True):
        if end > start:
            _emit(sink, phase, start, end, part)
            emitted.append(phase if part is None else f"{phase}.{part}")
    return emitted


def observed_startup(sink: SpanSink, alloc_ns: int, now_ns: int | None = None) -> list[str]:
    """:func:`emit_process_startup` with what this process can observe now: its start, its
    launcher's marks (under torchrun, from its parent) and :func:`interpreter_ready_ns`."""
    now_ns = time.time_ns() if now_ns is None else now_ns
    launcher: list[tuple[str, int]] = []
    try:
        if "TORCHELASTIC_RUN_ID" in os.environ and os.getppid() > 1:
            launcher = launcher_marks(agent_start_ns=process_start_ns(os.getppid()))
    except Exception:  # telemetry never stops the program
        launcher = []
    return emit_process_startup(
        sink, alloc_ns, now_ns, process_start_ns(), launcher, interpreter_ready_ns()
    )
