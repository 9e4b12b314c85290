"""The loop's alert kinds (issue 26) backtested over simulated fleets whose truth is known.

Each scenario simulates a fleet into its own SQLite database (``ett simulate`` planting, or not,
a slow model, ``--regress "... component=step factor=K"``, and a straggler rank,
``--straggler``), backtests the shipped ``throughput_regression`` and ``straggler`` rules
(enabled here whatever the default says) over the fleet after its first week, and scores their
firings against what was planted (``ett_collector.alerts._quality``): precision, recall,
detection delay, false firings per fleet-day. Every attempt steps at its own pace (5 %
log-normal, :data:`STEP_SIGMA`), so the throughput test sees per-job noise. The ``ckpt x6``
fleet plants an ETT regression (checkpoint blocking, a stall the loop facts leave out): the
loop's kinds must stay quiet on it.
A benchmark, not a timed test: it prints its table.

    .venv/bin/python -m tests.performance.bench_loop_alerts            # the table
    .venv/bin/python -m tests.performance.bench_loop_alerts --quick    # three scenarios
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.performance

DAY = 86400.0
START = 1_800_000_000.0  # a fixed past: the same fleets on every run
KINDS = ("throughput_regression", "straggler")
STEP_SIGMA = 0.05
"""Each attempt's own pace (``loop.step_sigma``: 5 % log-normal, nodes that differ), so that
jobs' throughputs differ as on a real fleet; the default profile's is 0."""


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: int
    days: float
    seed: int
    regress: tuple[tuple[str, str, float, float], ...] = ()
    """``(model, component, factor, onset day)`` each (component ``step``: a slow model)."""
    stragglers: tuple[tuple[str, int, float, float], ...] = ()
    """``(model, rank, factor, onset day)`` each."""
    hard: bool = False
    """What the rules are not meant to see (reported, not counted toward the totals)."""


@dataclass
class Outcome:
    scenario: Scenario
    firings: int
    true_firings: int
    false_firings: int
    days: float
    detections: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    false_examples: list[str] = field(default_factory=list)


def scenarios(quick: bool) -> list[Scenario]:
    """The scenarios of the table."""
    slow = Scenario("slow dcn-v2 step x1.3", 240, 16, 51, (("dcn-v2", "step", 1.3, 10),))
    strag = Scenario("straggler dlrm-large r1 x1.5", 240, 16, 52, (), (("dlrm-large", 1, 1.5, 10),))
    flat = [Scenario(f"flat {s}", 240, 16, s) for s in (61, 62)]
    if quick:
        return [slow, strag, flat[0]]
    return [
        slow,
        Scenario("slow dlrm-small step x1.15", 240, 16, 53, (("dlrm-small", "step", 1.15, 10),)),
        strag,
        Scenario("straggler dcn-v2 r3 x1.3", 240, 16, 54, (), (("dcn-v2", 3, 1.3, 10),)),
        Scenario(
            "both", 240, 16, 55, (("dlrm-small", "step", 1.3, 10),), (("dcn-v2", 1, 1.5, 11),)
        ),
        Scenario("ckpt x6 (ETT only)", 240, 16, 56, (("dlrm-small", "checkpoint", 6, 10),)),
        *flat,
        Scenario("slow x1.05 (small)", 240, 16, 57, (("dcn-v2", "step", 1.05, 10),), hard=True),
        Scenario(
            "straggler x1.2 (below min_score)",
            240,
            16,
            58,
            (),
            (("dlrm-large", 1, 1.2, 10),),
            hard=True,
        ),
    ]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(s: Scenario) -> Outcome:
    """Simulate, backtest and score one scenario (in its own process)."""
    from ett_collector.alerts import backtest, load_facts, load_rules
    from ett_collector.alerts._quality import Planted, score
    from ett_collector.alerts.rules import RuleSet, with_changes
    from ett_collector.storage import Store
    from ett_simulator import simulate_into_db

    began = time.perf_counter()
    rules = RuleSet(
        tuple(with_changes(r, enabled=True) for r in load_rules().rules if r.kind.value in KINDS)
    )
    planted = [
        Planted(c, k, START + d * DAY, model=m) for m, c, k, d in s.regress if c == "step"
    ] + [Planted("straggler", k, START + d * DAY, model=m) for m, _, k, d in s.stragglers]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'fleet.db'}"
        simulate_into_db(
            url,
            jobs=s.jobs,
            days=s.days,
            seed=s.seed,
            start=START,
            regress=[
                f"model={m} component={c} factor={k} at={_iso(START + d * DAY)}"
                for m, c, k, d in s.regress
            ],
            stragglers=[
                f"model={m} rank={r} factor={k} at={_iso(START + d * DAY)}"
                for m, r, k, d in s.stragglers
            ],
            overrides={"loop": {"step_sigma": STEP_SIGMA}},
        )
        store = Store(url)
        try:
            since, until = START + 7 * DAY, START + s.days * DAY
            firings = backtest(store.engine, rules, since, until)
            jobs = load_facts(store.engine, None)
        finally:
            store.engine.dispose()
    q = score(firings, planted, since, until, jobs)
    false = [f for f in firings if not any(p.explains(f) for p in planted)]
    return Outcome(
        s,
        q.firings,
        q.true_firings,
        q.false_firings,
        q.days,
        list(q.to_dict()["planted"]),
        time.perf_counter() - began,
        [
            f"{_iso(f.fired_at)} {f.labels.get('model')}/{f.labels.get('component')}"
            for f in false[:4]
        ],
    )


def _h(seconds: object) -> str:
    return "-" if seconds is None else f"{float(seconds) / 3600:.1f} h"  # type: ignore[arg-type]


def report(outcomes: Sequence[Outcome], out: object = sys.stdout) -> dict[str, float | None]:
    """Print the table and the totals; returns the totals."""

    def say(line: str = "") -> None:
        print(line, file=out)  # type: ignore[call-overload]

    say(
        f"{'scenario':34} {'jobs':>4} {'days':>4} {'fired':>5} {'true':>4} {'false':>5} "
        f"{'planted (found, delay)':44} {'s':>4}"
    )
    for o in outcomes:
        planted = "; ".join(
            f"{d['model']}/{d['component']} x{d['factor']:g}: "
            + (f"found {_h(d['delay_s'])}" if d["found"] else "MISSED")
            for d in o.detections
        )
        say(
            f"{o.scenario.name:34} {o.scenario.jobs:4d} {o.scenario.days:4.0f} "
            f"{o.firings:5d} {o.true_firings:4d} {o.false_firings:5d} {planted or '-':44} "
            f"{o.seconds:4.0f}"
        )
        if o.false_examples:
            say(f"{'':34} false: {', '.join(o.false_examples)}")
    counted = [o for o in outcomes if not o.scenario.hard]
    fired = sum(o.firings for o in counted)
    true = sum(o.true_firings for o in counted)
    found = [d for o in counted for d in o.detections if d["scored"]]
    delays = [float(d["delay_s"]) for d in found if d["found"]]  # type: ignore[arg-type]
    days = sum(o.days for o in counted)
    unplanted = [o for o in counted if not o.detections]
    totals: dict[str, float | None] = {
        "precision": true / fired if fired else None,
        "recall": sum(bool(d["found"]) for d in found) / len(found) if found else None,
        "max_delay_h": max(delays) / 3600 if delays else None,
        "false_per_fleet_day": sum(o.false_firings for o in counted) / days if days else None,
        "false_on_unplanted": float(sum(o.false_firings for o in unplanted)),
        "unplanted_days": sum(o.days for o in unplanted),
    }
    say()
    for k, v in totals.items():
        say(f"{k:24} {'-' if v is None else f'{v:.3g}'}")
    return totals


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="three scenarios")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    with ProcessPoolExecutor(args.workers) as pool:
        outcomes = list(pool.map(run, scenarios(args.quick)))
    report(outcomes)
    return 0


def test_loop_alert_quality() -> None:
    """``pytest -m performance -s``: the quick table."""
    assert main(["--quick"]) == 0


if __name__ == "__main__":
    sys.exit(main())
