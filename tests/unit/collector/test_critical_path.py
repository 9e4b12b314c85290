"""The start-up critical path through barrier phases (docs/metrics.md, v1.1)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ett import semconv as sc
from ett_collector.domain import SegmentKind, summarize
from tests.support.spans import attempt_end, first_batch, per_component, phase, window

DONE = sc.EndReasonValues.COMPLETED.value
NOW = 1e6


def _startup(spans: list) -> list:  # type: ignore[type-arg]
    return [s for s in summarize(spans, NOW).segments if s.kind == SegmentKind.STARTUP]


def test_a_slow_rank_carries_the_wait_of_the_others_at_pg_init() -> None:
    # rank 1 imports for 30 s; rank 0 is done in 5 s and then waits inside pg_init for rank 1
    spans = [
        phase("imports", 0, 5, rank=0),
        phase("pg_init", 5, 32, rank=0),
        phase("model_init", 32, 45, rank=0),
        first_batch(45, rank=0),
        phase("imports", 0, 30, rank=1),
        phase("pg_init", 30, 32, rank=1),
        phase("model_init", 32, 40, rank=1),
        first_batch(40, rank=1),
        window(45, 50, rank=0),
        attempt_end(0, 50, DONE, rank=0),
        attempt_end(0, 50, DONE, rank=1),
    ]
    s = summarize(spans, NOW)
    assert s.attempts[0].critical_rank == 0
    assert s.tts_s == 45
    # the 25 s rank 0 waited are rank 1's imports (runtime), not comms
    assert per_component(s.segments, SegmentKind.STARTUP) == pytest.approx(
        {"runtime": 30, "comms": 2, "model": 13}
    )


def test_a_phase_marked_as_barrier_is_one_and_an_unmarked_one_is_not() -> None:
    def spans(marked: bool) -> list:  # type: ignore[type-arg]
        mark = {sc.BARRIER: True} if marked else {}
        return [
            phase("data_prep", 0, 4, rank=0),
            phase("warm_sync", 4, 20, rank=0, **mark),
            first_batch(20, rank=0),
            phase("data_prep", 0, 18, **{sc.COMPONENT: "data"}, rank=1),
            phase("warm_sync", 18, 20, rank=1, **mark),
            first_batch(20, rank=1),
            attempt_end(0, 20, DONE, rank=0),
            attempt_end(0, 20, DONE, rank=1),
        ]

    marked = per_component(_startup(spans(True)))
    assert marked == pytest.approx({"data": 18, "other": 2})
    unmarked = per_component(_startup(spans(False)))  # follows rank 0, which mostly waited
    assert unmarked == pytest.approx({"other": 20})


@st.composite
def barrier_starts(draw):  # type: ignore[no-untyped-def]
    world = draw(st.integers(1, 5))
    imports = [draw(st.floats(0.5, 50.0)) for _ in range(world)]
    work = draw(st.floats(0.1, 10.0))  # pg_init's own work, once all ranks are in
    tails = [draw(st.floats(0.5, 30.0)) for _ in range(world)]
    skewed = draw(st.booleans())
    skews = [draw(st.floats(-3.0, 3.0)) if skewed else 0.0 for _ in range(world)]
    return world, imports, work, tails, skews


@given(barrier_starts())
@settings(max_examples=150, deadline=None)
def test_waits_go_to_the_last_arrival_and_segments_tile_start_up(case) -> None:  # type: ignore[no-untyped-def]
    world, imports, work, tails, skews = case
    enter = max(imports)
    leave = enter + work
    spans = []
    for r in range(world):
        k = skews[r]  # each rank's clock may disagree; lengths come from its own spans
        spans += [
            phase("imports", k, k + imports[r], rank=r),
            phase("pg_init", k + imports[r], k + leave, rank=r),
            phase("model_init", k + leave, k + leave + tails[r], rank=r),
            first_batch(k + leave + tails[r], rank=r),
            attempt_end(k, k + leave + tails[r] + 1, DONE, rank=r),
        ]
    s = summarize(spans, NOW)
    startup = [x for x in s.segments if x.kind == SegmentKind.STARTUP]
    alloc, first = s.alloc, s.attempts[0].first_batch
    assert first is not None
    # the pieces tile [alloc, first] in order
    assert startup[0].start == alloc
    assert startup[-1].end == pytest.approx(first)
    for a, b in itertools.pairwise(startup):
        assert b.start == pytest.approx(a.end)
        assert b.end >= b.start
    assert sum(x.duration for x in startup) == pytest.approx(first - alloc)
    comp = per_component(startup)
    spread = max(skews) - min(skews)
    assert comp.get("comms", 0.0) <= work + spread + 1e-9
    if spread == 0:
        # a rank that only waited never carries the wait: the last to arrive carries its
        # imports, the barrier only its own work, the critical rank what follows
        assert comp == pytest.approx({"runtime": max(imports), "comms": work, "model": max(tails)})
