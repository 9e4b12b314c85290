"""Inside the simulated loop (issue 26): step-time regressions, planted stragglers and the waits
every window carries; with nothing planted, the ETT figures are those of an untimed loop."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from ett import semconv as sc
from ett_simulator import (
    FleetSpec,
    ProfileError,
    generate,
    load_profile,
    parse_regression,
    parse_straggler,
    read_stragglers,
    read_truth,
    simulate,
)

START = 1_790_000_000.0  # 2026-09-21T14:13:20Z
MODEL = "dcn-v2"  # step_s 0.12 in the default profile


def _jobs(
    *, regress: tuple[str, ...] = (), stragglers: tuple[str, ...] = (), timed: bool = True
) -> list:
    prof = load_profile(overrides={"loop": {"timed": timed}}, models=[MODEL])
    fleet = FleetSpec(
        prof,
        jobs=10,
        days=2,
        seed=5,
        start=START,
        regressions=tuple(parse_regression(r) for r in regress),
        stragglers=tuple(parse_straggler(s) for s in stragglers),
    )
    return [(job, truth) for job, truth in generate(fleet) if not job.plan.standalone]


def _windows(rank) -> list[tuple[int, int, dict]]:
    return [(s[1], s[2], dict(s[3])) for s in rank.spans if s[0] == sc.SPAN_TRAIN_WINDOW]


def _steady_step_s(rank, after: float = 0.0) -> float:
    """The median seconds per step of a rank's windows that start after ``after`` (unix s)."""
    steps = [
        (b - a) / 1000 / (w[sc.STEP_LAST] - w[sc.STEP_FIRST] + 1)
        for a, b, w in _windows(rank)
        if a / 1000 >= after
    ]
    return statistics.median(steps)


def _compute_per_step(rank) -> float:
    ws = _windows(rank)[1:]
    steps = sum(w[sc.STEP_LAST] - w[sc.STEP_FIRST] + 1 for _, _, w in ws)
    return sum((b - a) / 1000 - w[sc.WINDOW_WAIT_S] for a, b, w in ws) / steps


def test_unplanted_windows_carry_waits_and_change_no_ett_figure() -> None:
    timed, untimed = _jobs(), _jobs(timed=False)
    assert [t for _, t in timed] == [t for _, t in untimed]  # every spec figure, job by job
    job, _ = timed[0]
    share = load_profile()["loop.compute_share"]
    for rank in job.ranks:
        waits = [w[sc.WINDOW_WAIT_S] / ((b - a) / 1000) for a, b, w in _windows(rank)]
        assert all(0 <= x <= 1 for x in waits)
        assert 1 - share <= statistics.median(waits) < 1 - share * 0.9  # the rank's spread
    for (tj, _), (uj, _) in zip(timed, untimed, strict=True):
        for tr, ur in zip(tj.ranks, uj.ranks, strict=True):
            plain = [
                (a, b, {k: v for k, v in w.items() if k != sc.WINDOW_WAIT_S})
                for a, b, w in _windows(tr)
            ]
            assert plain == _windows(ur)
            assert all(sc.WINDOW_WAIT_S not in w for _, _, w in _windows(ur))
    assert _steady_step_s(job.ranks[0]) == pytest.approx(0.12, rel=0.01)


def test_a_step_regression_stretches_the_step_time_from_its_instant() -> None:
    at = START + 86400
    jobs = _jobs(regress=(f"model={MODEL} component=step factor=1.3 at=2026-09-22T14:13:20Z",))
    before = [j for j, _ in jobs if j.plan.attempts[-1].end / 1000 < at]
    after = [j for j, _ in jobs if j.plan.attempts[0].alloc / 1000 > at]
    assert before and after
    for job in before:
        assert _steady_step_s(job.ranks[0]) == pytest.approx(0.12, rel=0.01)
    for job in after:
        assert _steady_step_s(job.ranks[0]) == pytest.approx(0.156, rel=0.01)


def test_a_straggler_computes_longer_and_the_others_wait_for_it() -> None:
    at = START + 86400
    jobs = _jobs(stragglers=(f"model={MODEL} rank=1 factor=1.5 at=2026-09-22T14:13:20Z",))
    hit = [j for j, _ in jobs if j.plan.attempts[0].alloc / 1000 > at and j.plan.world_size > 1]
    assert hit
    share = load_profile()["loop.compute_share"]
    for job in hit:
        ranks = [r for r in job.ranks if r.attempt == 0]
        shapes = {
            tuple((a, b, w[sc.STEP_FIRST], w[sc.STEP_LAST]) for a, b, w in _windows(r))
            for r in ranks
        }
        assert len(shapes) == 1  # every rank's windows step alike: wall step times are equal
        others = statistics.median(_compute_per_step(r) for r in ranks if r.rank != 1)
        assert _compute_per_step(ranks[1]) / others == pytest.approx(1.5, rel=0.1)
        assert _steady_step_s(ranks[0]) == pytest.approx(0.12 * (1 + share * 0.5), rel=0.02)
    quiet = [j for j, _ in jobs if j.plan.attempts[-1].end / 1000 < at and j.plan.world_size > 1]
    for job in quiet:
        ranks = [r for r in job.ranks if r.attempt == 0]
        cps = [_compute_per_step(r) for r in ranks]
        assert max(cps) / min(cps) < 1.15  # the spread alone names no straggler


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("model=dcn-v2 rank=1 factor=1.5", "at= is missing"),
        ("model=dcn-v2 rank=-1 factor=1.5 at=2026-09-22T00:00:00Z", "rank must be"),
        ("model=dcn-v2 rank=1 factor=0.5 at=2026-09-22T00:00:00Z", "factor must be"),
        ("model=dcn-v2 rank=1 factor=2 at=2026-09-22T00:00:00Z speed=3", "cannot read"),
    ],
)
def test_a_bad_straggler_says_how_to_write_it(text: str, expected: str) -> None:
    with pytest.raises(ProfileError, match=expected):
        parse_straggler(text)


def test_a_straggler_of_an_unknown_model_is_refused() -> None:
    with pytest.raises(ProfileError, match="lacks"):
        FleetSpec(
            load_profile(),
            stragglers=(parse_straggler("model=nope rank=1 factor=2 at=2026-09-22T00:00:00Z"),),
        )


def test_the_truth_file_holds_the_slow_model_and_the_straggler(tmp_path: Path) -> None:
    path = tmp_path / "truth.jsonl"
    at = "at=2026-09-22T00:00:00Z"
    fleet = FleetSpec(
        load_profile(models=[MODEL]),
        jobs=3,
        days=1,
        seed=1,
        start=START,
        regressions=(parse_regression(f"model={MODEL} component=step factor=1.3 {at}"),),
        stragglers=(parse_straggler(f"model={MODEL} rank=3 factor=1.5 {at}"),),
    )
    simulate(fleet, None, path)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert lines[0]["record"] == "regression" and lines[0]["component"] == "step"
    assert lines[1] == {
        "record": "straggler",
        "model": MODEL,
        "rank": 3,
        "factor": 1.5,
        "at": 1790035200.0,
        "at_iso": "2026-09-22T00:00:00Z",
    }
    jobs, regressions = read_truth(path)
    assert [r.component for r in regressions] == ["step"] and len(jobs) == len(lines) - 2
    assert [(s.model, s.rank, s.factor) for s in read_stragglers(path)] == [(MODEL, 3, 1.5)]


def test_the_command_plants_a_straggler_and_refuses_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ett_cli import main

    truth = tmp_path / "t.jsonl"
    argv = [
        "simulate",
        "--dry-run",
        "--jobs",
        "2",
        "--days",
        "1",
        "--models",
        MODEL,
        "--start",
        "2026-09-21T00:00:00Z",
        "--truth",
        str(truth),
    ]
    good = "model=dcn-v2 rank=1 factor=1.5 at=2026-09-21T06:00:00Z"
    assert main([*argv, "--straggler", good]) == 0
    assert [s.rank for s in read_stragglers(truth)] == [1]
    capsys.readouterr()
    assert main([*argv, "--straggler", "model=dcn-v2 rank=one factor=2 at=2026-09-21"]) == 2
    err = capsys.readouterr().err
    assert "rank must be an integer" in err and "Traceback" not in err


def test_the_fast_attribute_encoding_is_key_values() -> None:
    """Large ints and floats (steps, samples, waits) skip key_value's calls, byte for byte."""
    import random

    from ett_simulator.wire import Encoder, key_value

    rng = random.Random(1)
    ints = [16383, 16384, 2**31, 2**63 - 1, 2**64 - 1, *(rng.randrange(2**50) for _ in range(200))]
    floats = [0.0, -1.5, 1e-9, float("inf"), *(rng.random() * 100 for _ in range(200))]
    encoder = Encoder()
    for key, values in (("i", ints), ("f", floats)):
        for v in values:
            ref = key_value(key, v)
            assert encoder._encode_attrs(((key, v),)) == b"\x4a" + bytes([len(ref)]) + ref
