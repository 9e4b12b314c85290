"""Simulator benchmark: generation (model + OTLP protobuf encoding) against the collector's ingest
of the same spans, measured in one run. Prints figures; it is not a timed test.

    .venv/bin/python tests/performance/bench_simulator.py [--jobs N]
    make bench      # runs it through pytest (marker: performance)

Target (issue 9): generation at least 5x the collector's ingest rate (spans per second), so the
simulator is never the bottleneck of a load test.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pytest

from ett_simulator import FleetSpec, load_profile, simulate
from ett_simulator.sinks import EndpointSink
from tests.support.collector_process import start_collector

START = 1_790_000_000.0


class _Recorder:
    """A sink that keeps the request bodies (to send them later, timed apart)."""

    def __init__(self) -> None:
        self.bodies: list[tuple[bytes, int]] = []

    def send(self, body: bytes, spans: int) -> int:
        self.bodies.append((body, spans))
        return spans

    def close(self) -> None:
        pass


def run(jobs: int, home: Path) -> dict[str, float]:
    """Generate a fleet twice (dry run, then into a real ``ett serve`` on SQLite)."""
    fleet = FleetSpec(load_profile(), jobs=jobs, days=30, seed=99, start=START)
    simulate(FleetSpec(load_profile(), jobs=2, days=1, seed=1, start=START), None)  # warm up
    dry = simulate(fleet, None)
    gen_rate = dry.spans / dry.seconds
    recorder = _Recorder()
    simulate(fleet, recorder)
    collector = start_collector(home)
    try:
        sink = EndpointSink(collector.url)
        t0 = time.perf_counter()
        accepted = sum(sink.send(body, n) for body, n in recorder.bodies)
        ingest_s = time.perf_counter() - t0
        sink.close()
    finally:
        collector.stop()
    ingest_rate = dry.spans / ingest_s
    print(
        f"\nsimulator: {jobs} jobs, {dry.spans:,} spans in {dry.requests} requests\n"
        f"  generation (model + protobuf encoding): {dry.seconds:.2f} s, {gen_rate:,.0f} spans/s\n"
        f"  collector ingest over HTTP (1 process, SQLite): {ingest_s:.2f} s, "
        f"{ingest_rate:,.0f} spans/s\n"
        f"  ratio generation / ingest: {gen_rate / ingest_rate:.1f}x (target >= 5x)"
    )
    assert accepted == dry.spans
    return {"generation": gen_rate, "ingest": ingest_rate, "ratio": gen_rate / ingest_rate}


@pytest.mark.performance
def test_bench_simulator(tmp_path: Path) -> None:
    figures = run(60, tmp_path / "ett-home")
    assert figures["generation"] > 0 and figures["ingest"] > 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(args.jobs, Path(tmp) / "ett-home")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
