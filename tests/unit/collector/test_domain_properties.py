"""Property tests of the ETT invariants over random jobs (hypothesis)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ett import semconv as sc
from ett_collector.domain import Category, summarize
from ett_collector.schemas import job_json
from tests.support.spans import attempt_end, first_batch, persist, phase, save, span, window

PHASES = ["pg_init", "model_init", "sharding_plan", "checkpoint_load", "compile", "warmup"]
REASONS = [None, "completed", "failed", "preempted"]


@st.composite
def named_stalls(draw, attempt: int, rank: int, lo: float, hi: float):
    """Data stalls, user-named blocking events (known, unknown and no component) and shutdown
    steps anywhere in the attempt, start-up and shutdown included."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        a = draw(st.floats(lo, hi + 10))
        b = a + draw(st.floats(0, 8))
        kind = draw(st.sampled_from(["data", "blocking", "shutdown"]))
        if kind == "data":
            out.append(span(sc.SPAN_DATA_WAIT, a, b, attempt=attempt, rank=rank))
        elif kind == "blocking":
            comp = draw(st.sampled_from([None, "other", "model", "failure", "no_such_component"]))
            attrs = {sc.BLOCKING_NAME: "sdc_check"} | ({sc.COMPONENT: comp} if comp else {})
            out.append(span(sc.SPAN_BLOCKING, a, b, attempt=attempt, rank=rank, **attrs))
        else:
            step = draw(st.sampled_from([*sc.ShutdownStepValues, "my_step"]))
            name = sc.shutdown_span_name(str(step))
            out.append(span(name, a, b, attempt=attempt, rank=rank))
    return out


@st.composite
def attempt_spans(draw, attempt: int, t0: float):
    spans = []
    ranks = draw(st.integers(1, 3))
    trained = draw(st.booleans())
    t_first = t0 + draw(st.floats(0, 50))
    t_end = t_first + draw(st.floats(0, 200))
    for rank in range(ranks):
        skew = draw(st.floats(-2, 2))
        for _ in range(draw(st.integers(0, 3))):
            a = t0 + draw(st.floats(0, 60))
            spans.append(
                phase(
                    draw(st.sampled_from(PHASES)),
                    a,
                    a + draw(st.floats(0, 30)),
                    attempt=attempt,
                    rank=rank,
                )
            )
        if trained:
            fb = t_first + skew + draw(st.floats(0, 5))
            spans.append(first_batch(fb, attempt=attempt, rank=rank))
            t = fb
            while t < t_end:
                nxt = t + draw(st.floats(1, 40))
                spans.append(window(t, nxt, attempt=attempt, rank=rank))
                t = nxt
            for step in range(draw(st.integers(0, 3))):
                a = draw(st.floats(t_first, t_end + 1))
                mode = draw(st.sampled_from(["sync", "async"]))
                spans.append(
                    save(step, a, a + draw(st.floats(0, 5)), mode, attempt=attempt, rank=rank)
                )
                if mode == "async" and draw(st.booleans()):
                    spans.append(
                        persist(step, a, a + draw(st.floats(0, 20)), attempt=attempt, rank=rank)
                    )
            for name in (sc.SPAN_EVAL, sc.SPAN_COMPILE, sc.SPAN_PUBLISH):
                if draw(st.booleans()):
                    a = draw(st.floats(t_first, t_end + 1))
                    spans.append(
                        span(name, a, a + draw(st.floats(0, 10)), attempt=attempt, rank=rank)
                    )
            spans += draw(named_stalls(attempt, rank, t0, t_end))
        reason = draw(st.sampled_from(REASONS))
        if reason is not None:
            spans.append(
                attempt_end(t0, t_end + draw(st.floats(0, 10)), reason, attempt=attempt, rank=rank)
            )
        elif not spans:
            spans.append(phase("pg_init", t0, t0 + 1, attempt=attempt, rank=rank))
    return spans, t_end


@st.composite
def jobs(draw):
    spans = []
    t = 1000.0
    for attempt in range(draw(st.integers(1, 3))):
        part, t_end = draw(attempt_spans(attempt, t))
        spans += part
        t = t_end + draw(st.floats(-5, 60))
    now = t + draw(st.floats(0, 100))
    return spans, now


@settings(max_examples=300, deadline=None)
@given(jobs())
def test_segments_tile_wall_time_and_ratios_sum_to_100(job) -> None:
    spans, now = job
    s = summarize(spans, now)
    segs = s.segments
    if s.wall_s == 0:
        assert sum(seg.duration for seg in segs) == 0
        return
    assert segs[0].start == pytest.approx(s.alloc)
    for seg in segs:
        assert seg.end >= seg.start
    for a, b in itertools.pairwise(segs):
        assert a.end == pytest.approx(b.start), "segments never overlap and leave no gap"
    assert segs[-1].end == pytest.approx(s.alloc + s.wall_s)
    total = sum(seg.duration for seg in segs)
    assert total == pytest.approx(s.wall_s, abs=1e-6)
    assert s.productive_s + s.idle_s + s.failure_s == pytest.approx(s.wall_s, abs=1e-6)
    for p in (s.ett_pct, s.idle_pct, s.failure_pct):
        assert -1e-9 <= p <= 100 + 1e-9
    if s.wall_s > 0:
        assert s.ett_pct + s.idle_pct + s.failure_pct == pytest.approx(100)
    lost = sum(s.lost_by_component.values())
    assert lost == pytest.approx(s.idle_s + s.failure_s, abs=1e-6)
    assert s.unsaved_s <= s.failure_s + 1e-6
    assert set(s.lost_by_component) <= {c.value for c in sc.ComponentValues}
    by_kind = {
        kind: sum(seg.shares().get("checkpoint", 0.0) for seg in segs if seg.kind == kind)
        for kind in ("startup", "cutout", "shutdown")
    }
    assert s.checkpoint_restore_s == pytest.approx(by_kind["startup"])
    assert s.checkpoint_blocking_s == pytest.approx(by_kind["cutout"])
    assert s.lost_by_component.get("checkpoint", 0.0) == pytest.approx(sum(by_kind.values()))
    events = [sp for sp in spans if sp.name == sc.SPAN_BLOCKING]
    assert sum(e.count for e in s.blocking_events) == len(events)
    assert all(e.seconds >= 0 for e in s.blocking_events)
    covered = sum(e.seconds for e in s.blocking_events)
    assert covered <= sum(sp.end - sp.start for sp in events) + 1e-6
    stats = s.checkpoint_blocking_stats
    assert stats.count >= s.checkpoint_advice.checkpoints
    if stats.count:
        assert stats.min_s <= stats.mean_s <= stats.max_s
        assert stats.min_s <= stats.p95_s <= stats.max_s
        assert stats.mean_s * stats.count >= s.checkpoint_blocking_s - 1e-6
    for seg in segs:
        if seg.category == Category.PRODUCTIVE:
            assert seg.components == ()
        else:
            assert seg.components


@settings(max_examples=100, deadline=None)
@given(jobs(), st.randoms())
def test_span_order_does_not_matter(job, rnd) -> None:
    spans, now = job
    shuffled = list(spans)
    rnd.shuffle(shuffled)
    a, b = summarize(spans, now), summarize(shuffled, now)
    assert job_json(a, with_segments=True) == job_json(b, with_segments=True)
