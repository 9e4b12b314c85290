"""The trainer's own account of a run: one JSON-lines file per rank in ``RUN_DIR/steplog``.

Each line is one event with at least ``attempt``, ``rank``, ``step``, ``time`` (unix seconds) and
``event``; attempts append to the same file. Tests compare this account with the collector's.

Events: ``start``, ``phase`` (``phase``, ``duration_s``), ``resume``, ``compile`` (``cache``,
``duration_s``, ``load_s``, ``frames``), ``first_batch`` (``before``: the instant just before
``sess.first_batch()`` was called), ``step`` (``loss``), ``ckpt_save``
(``mode``, ``blocking_s``, ``bytes``), ``ckpt_persist`` (``persist_s``), ``ckpt_commit``
(rank 0), ``eval`` (``loss``, ``duration_s``), ``fault`` (``kind``), ``failure`` (``cause``,
``error_type``), ``end`` (``reason``).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_PROGRESS_EVENTS = frozenset({"resume", "first_batch", "step"})


def steplog_path(directory: Path, rank: int) -> Path:
    """The step log file of ``rank``."""
    return Path(directory) / f"rank{rank}.jsonl"


class StepLog:
    """Appends events for one rank; thread-safe (checkpoint uploads log from their thread)."""

    def __init__(self, directory: Path, *, rank: int, attempt: int) -> None:
        Path(directory).mkdir(parents=True, exist_ok=True)
        self.path = steplog_path(directory, rank)
        self.rank = rank
        self.attempt = attempt
        self.step = -1
        self._lock = threading.Lock()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def event(self, event: str, step: int | None = None, **fields: Any) -> None:
        """Append one event (``step`` defaults to the last step seen)."""
        if step is None:
            step = self.step
        elif event in _PROGRESS_EVENTS:
            self.step = step
        record = {
            "attempt": self.attempt,
            "rank": self.rank,
            "step": step,
            "time": time.time(),
            "event": event,
            **fields,
        }
        if event == "step":  # CPU clocks: robust to machine load, unlike wall time
            record["thread_cpu"] = time.thread_time()
            record["process_cpu"] = time.process_time()
        line = (json.dumps(record, sort_keys=True) + "\n").encode()
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, line)  # one write per line: whole lines even on a crash

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read_steplog(path: Path) -> list[dict[str, Any]]:
    """All events of one step log file, in order (a torn last line is skipped)."""
    events = []
    for line in Path(path).read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


def read_run(directory: Path) -> Iterator[dict[str, Any]]:
    """Every event of every rank in ``directory``, by time."""
    events = [e for p in sorted(Path(directory).glob("rank*.jsonl")) for e in read_steplog(p)]
    yield from sorted(events, key=lambda e: e["time"])
