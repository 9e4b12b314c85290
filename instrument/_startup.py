"""Start-up before the trainer's first line: the phases the library measures by itself.

When a session starts (``ett.init()``), the seconds between the process's start and that call
are already spent: the interpreter started and imported torch and the trainer's packages. The
library names them right away, as spans that start where the attempt does, so the collector's
``alloc(a)`` (the earliest start of an ``ett.attempt`` or ``ett.startup.*`` span) is right while
the job runs, and stays right if the process is SIGKILLed later (the ``ett.attempt`` span only
arrives at the end):

- ``ett.startup.scheduling`` [allocation, process start], component ``scheduler``, when the
  allocation instant (``ETT_ALLOCATED_AT``) is before the process started: the job waited for
  its processes (a scheduler, a container pull, torchrun's rendezvous before it spawned them);
- ``ett.startup.imports`` [process start (or the allocation, when later), now], component
  ``runtime``: interpreter start-up and package imports. One phase: splitting interpreter
  start from the heavy imports would need a hook that runs before them (the zero-code
  ``ett-instrument`` starts its session there, so its ``imports`` phase is the interpreter's
  own start-up alone).

The process start comes from the OS (Linux: ``/proc/self/stat`` field 22, clock ticks since
boot, against ``/proc/uptime``); where that is not readable, the imports phase starts at the
allocation instant (itself the time the library was imported, on such systems).
"""

from __future__ import annotations

import os
import time

from opentelemetry.util.types import AttributeValue

from . import semconv
from ._spans import SpanSink

_SAME_INSTANT_NS = 20_000_000
"""Two readings of the process start (the identity's and this module's) agree to within a few
clock ticks: a smaller gap between allocation and process start is no scheduling phase."""


def process_start_ns() -> int | None:
    """Unix nanoseconds at which this process started, from the OS; None where unknown."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            stat = f.read()
        # field 22 (starttime); the fields after the ")" of comm are numbered from 3
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime_s = float(f.read().split()[0])
        now_ns = time.time_ns()
        hz = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None
    return now_ns - int((uptime_s - start_ticks / hz) * 1e9)


def _emit(sink: SpanSink, phase: str, start_ns: int, end_ns: int) -> None:
    attrs: dict[str, AttributeValue] = {semconv.COMPONENT: semconv.default_component(phase)}
    sink.end(sink.start(semconv.startup_span_name(phase), attrs, start_ns), end_ns=end_ns)


def emit_process_startup(
    sink: SpanSink, alloc_ns: int, now_ns: int, started_ns: int | None
) -> list[str]:
    """Emit ``scheduling`` and ``imports`` (module docstring) for an attempt allocated at
    ``alloc_ns`` whose process started at ``started_ns`` (None: unknown), up to ``now_ns``.
    Returns the phases emitted."""
    emitted = []
    phases = semconv.StartupPhaseValues
    if started_ns is not None and alloc_ns + _SAME_INSTANT_NS < started_ns <= now_ns:
        _emit(sink, phases.SCHEDULING, alloc_ns, started_ns)
        emitted.append(phases.SCHEDULING.value)
    imports_from = alloc_ns if started_ns is None else max(alloc_ns, started_ns)
    if imports_from < now_ns:
        _emit(sink, phases.IMPORTS, imports_from, now_ns)
        emitted.append(phases.IMPORTS.value)
    return emitted
