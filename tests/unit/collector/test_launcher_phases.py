"""The collector reads the library's start-up in parts as it is: torchrun's ``launcher`` and
``worker_spawn`` are runtime, its ``rendezvous`` comms (a barrier), the two parts of
``imports`` runtime; the start-up still adds up to ``first batch - allocation``."""

from __future__ import annotations

from typing import Any

import pytest

from ett import semconv as sc
from ett._startup import emit_process_startup
from ett_collector.domain import SegmentKind, summarize
from tests.support.spans import attempt_end, first_batch, per_component, phase, window

S = 1_000_000_000
DONE = sc.EndReasonValues.COMPLETED.value


class PhaseSink:
    """The library's SpanSink, writing the collector's span records for one rank."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.records: list[Any] = []

    def start(self, name: str, attributes: dict[str, Any], start_ns: int | None = None) -> Any:
        return (name, attributes, start_ns or 0)

    def end(self, span: Any, exc: BaseException | None = None, end_ns: int | None = None) -> None:
        name, attributes, start = span
        phase_name = sc.startup_phase(name)
        assert phase_name is not None
        record = phase(phase_name, start / S, (end_ns or 0) / S, rank=self.rank, **attributes)
        self.records.append(record)


def _rank(rank: int, rendezvous_at: float, started: float, ready: float, init: float) -> list:  # type: ignore[type-arg]
    sink = PhaseSink(rank)
    launcher = [
        ("launcher", 2 * S),
        ("rendezvous", int(rendezvous_at * S)),
        ("worker_spawn", 9 * S),
    ]
    emit_process_startup(sink, 0, int(init * S), int(started * S), launcher, int(ready * S))
    return sink.records


def test_launcher_phases_and_import_parts_are_charged_by_their_components() -> None:
    spans = [
        *_rank(0, 5, 9.5, 10, 14),
        phase("pg_init", 14, 15, rank=0),
        first_batch(15, rank=0),
        window(15, 20, rank=0),
        attempt_end(0, 20, DONE, rank=0),
    ]
    s = summarize(spans, 1e6)
    startup = per_component(s.segments, SegmentKind.STARTUP)
    assert s.tts_s == pytest.approx(15)
    # scheduling 0-2, launcher 2-5, rendezvous 5-9, spawn 9-9.5, imports 9.5-14, pg_init 14-15
    assert startup == pytest.approx({"scheduler": 2, "runtime": 3 + 0.5 + 4.5, "comms": 4 + 1})
    assert sum(startup.values()) == pytest.approx(s.tts_s)


def test_two_nodes_the_later_rendezvous_carries_the_wait() -> None:
    """Rank 1's agent entered the rendezvous at 8 s (its launcher was slow): rank 0's agent
    waited from 5 s; the wait is rank 1's launcher (runtime), not comms."""
    spans = []
    for rank, rendezvous_at in ((0, 5.0), (1, 8.0)):
        spans += _rank(rank, rendezvous_at, 9.5, 10, 14)
        spans += [phase("pg_init", 14, 15, rank=rank), first_batch(15, rank=rank)]
        spans += [attempt_end(0, 15, DONE, rank=rank)]
    startup = per_component(summarize(spans, 1e6).segments, SegmentKind.STARTUP)
    assert startup == pytest.approx({"scheduler": 2, "runtime": 6 + 0.5 + 4.5, "comms": 1 + 1})
