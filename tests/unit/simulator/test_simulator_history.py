"""The history ends at ``start + days`` (by default: now): no span, and no job end in the truth,
lies after it; a job that would still be running then is left out whole (its restarts and its
publish job with it), the others are drawn as before, and the count is reported. ``--live`` jobs
are not history."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ett import semconv as sc
from ett_cli import main
from ett_simulator import FleetSpec, generate, job_specs, load_profile, read_truth, simulate
from ett_simulator.fleet import last_ms
from ett_simulator.regression import parse_instant

START = 1_790_000_000.0  # 2026-09-21
NOW = 1_796_061_600.0  # 2026-11-30T18:00:00Z, the clock of the runs without a start
DAY = 86400.0


class _SpanEnds:
    """A sink that decodes every body with the official messages and keeps each span's end."""

    def __init__(self) -> None:
        self.ends_ns: list[int] = []
        self.jobs: set[str] = set()

    def send(self, body: bytes, spans: int) -> int:
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            attrs = {kv.key: kv.value.string_value for kv in rs.resource.attributes}
            self.jobs.add(attrs[sc.JOB_ID])
            self.ends_ns += [s.end_time_unix_nano for ss in rs.scope_spans for s in ss.spans]
        return spans

    def close(self) -> None:
        pass


@pytest.mark.parametrize(
    ("seed", "jobs", "days", "start"),
    [(1, 20, 1.0, None), (2, 40, 2.0, None), (3, 12, 0.5, START), (4, 60, 7.0, START)],
)
def test_no_span_sent_ends_after_the_history(
    seed: int, jobs: int, days: float, start: float | None
) -> None:
    fleet = FleetSpec(load_profile(), jobs=jobs, days=days, seed=seed, start=start)
    sink = _SpanEnds()
    result = simulate(fleet, sink, clock=lambda: NOW)
    end = (start if start is not None else NOW - days * DAY) + days * DAY
    assert result.end == end and result.start == end - days * DAY
    assert sink.ends_ns and max(sink.ends_ns) <= end * 1e9
    assert max(a["end"] for t in result.truths for a in t.attempts) <= end
    # the truth holds exactly the jobs that were sent; each drawn job is sent or left out
    assert sink.jobs == {t.job_id for t in result.truths}
    trained = {t.job_id for t in result.truths if not t.standalone_publish}
    assert len(trained) + len(result.dropped) == jobs
    assert not trained & set(result.dropped)
    assert not {t.job_id.removesuffix("-publish") for t in result.truths} & set(result.dropped)


def test_short_histories_leave_jobs_out_and_long_ones_few() -> None:
    def dropped(days: float) -> int:
        fleet = FleetSpec(load_profile(), jobs=40, days=days, seed=9, start=START)
        return len(simulate(fleet, None).dropped)

    assert dropped(0.25) >= 20  # jobs last hours: most of a six-hour history's cross its end
    assert dropped(30) <= 2


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    jobs=st.integers(0, 8),
    days=st.floats(0.05, 3.0),
    start=st.one_of(st.none(), st.floats(START, START + 365 * DAY)),
)
def test_history_property(seed: int, jobs: int, days: float, start: float | None) -> None:
    """Kept jobs end by the end and are the jobs an endless history would hold; every job left
    out (with its publish job) really crosses the end; nothing else is lost."""
    fleet = FleetSpec(load_profile(), jobs=jobs, days=days, seed=seed, start=start)
    _, end = fleet.window(NOW)
    specs = job_specs(fleet, now=NOW)
    dropped: list[str] = []
    kept = list(generate(fleet, specs, on_dropped=lambda spec: dropped.append(spec.job_id)))
    for job, truth in kept:
        assert max((s[2] for r in job.ranks for s in r.spans), default=0) <= end * 1000
        assert all(a["end"] <= end for a in truth.attempts)
    endless = [dataclasses.replace(s, until_ms=None) for s in specs]
    unbounded = [t for _, t in generate(fleet, endless)]
    assert [t for _, t in kept] == [
        t for t in unbounded if t.job_id.split("-publish")[0] not in dropped
    ]
    by_id = {s.job_id: s for s in endless}
    for job_id in dropped:
        units = [j for j, _ in generate(fleet, [by_id[job_id]])]
        assert last_ms(units) > end * 1000


def test_live_jobs_are_not_history() -> None:
    """A ``--live`` job starts at the clock and runs on past the history's end."""
    times = iter([NOW, NOW])
    fleet = FleetSpec(load_profile(), jobs=0, days=1, seed=1, live=1)
    result = simulate(fleet, None, clock=lambda: next(times, NOW + 30 * DAY))
    assert result.end == NOW and result.dropped == []
    (live,) = result.truths
    assert live.job_id.startswith("live1-") and live.attempts[-1]["end"] > NOW


def test_the_command_says_how_many_it_left_out_and_writes_only_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truth = tmp_path / "truth.jsonl"
    argv = ["simulate", "--dry-run", "--jobs", "30", "--days", "1", "--seed", "5"]
    assert main([*argv, "--truth", str(truth)]) == 0
    out = capsys.readouterr().out
    found = re.search(r"history (\S+) to (\S+): (\d+) of 30 training job\(s\) left out", out)
    assert found is not None, out
    start, end, left_out = parse_instant(found[1], ""), parse_instant(found[2], ""), int(found[3])
    assert end - start == DAY and 0 < left_out < 30
    jobs, _ = read_truth(truth)
    assert len([t for t in jobs if not t.standalone_publish]) == 30 - left_out
    assert max(a["end"] for t in jobs for a in t.attempts) <= end + 1  # printed to the second
