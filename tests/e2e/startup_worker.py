"""A torchrun worker that only starts an ETT session: its own instants and the library's
start-up spans (in memory) go to ``<out>/rank<RANK>.json`` (``test_torchrun_startup.py``)."""

import json
import os
import sys
import time

FIRST_LINE_NS = time.time_ns()

import ett  # noqa: E402  (first: the interpreter's part of imports ends here)

IMPORTED_NS = time.time_ns()

from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from ett import semconv  # noqa: E402
from ett._startup import process_start_ns  # noqa: E402


def main(out: str) -> None:
    exporter = InMemorySpanExporter()
    before = time.time_ns()
    session = ett.init(exporter=exporter, install_handlers=False)
    after = time.time_ns()
    session.end()
    phases = [
        {
            "phase": semconv.startup_phase(s.name),
            "component": (s.attributes or {}).get(semconv.COMPONENT),
            "part": (s.attributes or {}).get(semconv.STARTUP_PART),
            "start": s.start_time,
            "end": s.end_time,
        }
        for s in exporter.get_finished_spans()
        if semconv.startup_phase(s.name) is not None
    ]
    record = {
        "first_line": FIRST_LINE_NS,
        "imported": IMPORTED_NS,
        "init_before": before,
        "init_after": after,
        "started": process_start_ns(),
        "agent_started": process_start_ns(os.getppid()),
        "phases": sorted(phases, key=lambda p: p["start"]),
    }
    rank = os.environ.get("RANK", "0")
    with open(os.path.join(out, f"rank{rank}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


if __name__ == "__main__":
    main(sys.argv[1])
