"""Alert quality: the default rules backtested over simulated fleets whose regressions are known.

Each scenario simulates a fleet into its own SQLite database (the profile's noise: Poisson
failures, log-normal durations), plants 0-2 regressions of one model's component, backtests the
default rules over the fleet after its first week (the baseline's warm-up) and scores the
regression firings against what was planted (``ett_collector.alerts._quality``): precision,
recall, detection delay per planted regression, false firings per fleet-day. Printed beside the
issue's targets; it is a benchmark, not a timed test.

    .venv/bin/python -m tests.performance.bench_alert_quality            # the full table
    .venv/bin/python -m tests.performance.bench_alert_quality --quick    # three scenarios
    .venv/bin/python -m pytest -m performance -s tests/performance/bench_alert_quality.py

Targets (issue 24), on regressions of factor >= 3 on a component holding >= 5 % of the model's
lost time: precision >= 0.9, recall >= 0.9, median first detection <= 6 h after the onset and
never more than 24 h; at most one false firing per 30 fleet-days on a flat fleet.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

pytestmark = pytest.mark.performance

DAY = 86400.0
START = 1_800_000_000.0  # a fixed past: the same fleets on every run


@dataclass(frozen=True)
class Scenario:
    name: str
    jobs: int
    days: float
    seed: int
    regress: tuple[tuple[str, str, float, float], ...] = ()
    """``(model, component, factor, onset day)`` each."""
    hard: bool = False
    """What the rules are not meant to see (a small factor or a small component): reported,
    not counted toward the targets."""


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


def scenarios(quick: bool, seeds: int = 1) -> list[Scenario]:
    """The scenarios; ``seeds`` > 1 adds replicates of the 400-job ones (regressed, flat and
    hard) with other seeds: the same plants on other draws of the fleet's noise."""
    base = _scenarios(quick)
    extra = [
        replace(s, name=f"{s.name} #{k}", seed=s.seed + 100 * k)
        for k in range(1, seeds)
        for s in base
        if s.jobs == 400
    ]
    return [*base, *extra]


def _scenarios(quick: bool) -> list[Scenario]:
    regressed = [
        Scenario("ckpt x6", 400, 20, 11, (("dlrm-small", "checkpoint", 6, 12),)),
        Scenario("failure x4", 400, 20, 12, (("dlrm-large", "failure", 4, 11),)),
        Scenario(
            "ckpt x3 + data x5",
            400,
            20,
            13,
            (("dcn-v2", "checkpoint", 3, 10), ("dlrm-large", "data", 5, 13)),
        ),
        Scenario("compile x4", 400, 20, 14, (("dlrm-small", "compile", 4, 12),)),
        Scenario("scheduler x5", 400, 20, 15, (("dlrm-large", "scheduler", 5, 11),)),
        Scenario(
            "model x4 + failure x3",
            400,
            20,
            16,
            (("dcn-v2", "model", 4, 10), ("dlrm-small", "failure", 3, 14)),
        ),
    ]
    flat = [Scenario(f"flat {s}", 400, 20, s) for s in (21, 22, 23)]
    dense = [  # four times the jobs per model and day: how the delay scales with them
        Scenario("dense: ckpt x3", 1600, 20, 41, (("dlrm-large", "checkpoint", 3, 11),)),
        Scenario("dense: flat", 1600, 20, 42),
    ]
    hard = [
        Scenario(
            "ckpt x1.5 (small factor)",
            400,
            20,
            31,
            (("dlrm-large", "checkpoint", 1.5, 11),),
            hard=True,
        ),
        Scenario(
            "comms x3 (small component)", 400, 20, 32, (("dcn-v2", "comms", 3, 11),), hard=True
        ),
    ]
    if quick:
        return [regressed[0], flat[0], hard[0]]
    return [*regressed, *flat, *dense, *hard]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run(s: Scenario, rules_path: str | None = None) -> Outcome:
    """Simulate, backtest and score one scenario (in its own process); ``rules_path``: a
    rules file over the defaults (None: the defaults)."""
    from ett_collector.alerts import backtest, load_facts, load_rules
    from ett_collector.alerts._quality import Planted, score
    from ett_collector.alerts.rules import REGRESSION_KINDS
    from ett_collector.storage import Store
    from ett_simulator import simulate_into_db

    began = time.perf_counter()
    rules = load_rules(rules_path)
    kinds = {r.name for r in rules.rules if r.kind in REGRESSION_KINDS}
    planted = [
        Planted(component=c, factor=k, at=START + d * DAY, model=m) for m, c, k, d in s.regress
    ]
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
        )
        store = Store(url)
        try:
            since, until = START + 7 * DAY, START + s.days * DAY
            firings = [f for f in backtest(store.engine, rules, since, until) if f.rule in kinds]
            jobs = load_facts(store.engine, None)
        finally:
            store.engine.dispose()
    q = score(firings, planted, since, until, jobs)
    false = [f for f in firings if not any(p.named_by(f) for p in planted)]
    return Outcome(
        s,
        q.firings,
        q.true_firings,
        q.false_firings,
        q.days,
        [d for d in q.to_dict()["planted"]],
        time.perf_counter() - began,
        [
            f"{_iso(f.fired_at)} {f.labels.get('model')}/{f.labels.get('component')}"
            for f in false[:4]
        ],
    )


def _h(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.1f} h"


def _share(d: dict[str, object]) -> float:
    """A planted regression's share of its model's lost time, in % (0 when unknown)."""
    share = d["share_pct"]
    return float(share) if isinstance(share, int | float) else 0.0


def report(outcomes: Sequence[Outcome], out: object = sys.stdout) -> dict[str, float | None]:
    """Print the table and the totals against the targets; returns the totals."""

    def say(line: str = "") -> None:
        print(line, file=out)  # type: ignore[call-overload]

    say(
        f"{'scenario':28} {'jobs':>5} {'days':>4} {'fired':>5} {'true':>4} {'false':>5} "
        f"{'planted (found, delay, share of lost)':40} {'s':>5}"
    )
    for o in outcomes:
        planted = "; ".join(
            f"{d['model']}/{d['component']} x{d['factor']:g}: "
            + (f"found {_h(d['delay_s'])}" if d["found"] else "MISSED")  # type: ignore[arg-type]
            + (f", {d['share_pct']:.1f}%" if d["share_pct"] is not None else "")
            for d in o.detections
        )
        say(
            f"{o.scenario.name:28} {o.scenario.jobs:5d} {o.scenario.days:4.0f} "
            f"{o.firings:5d} {o.true_firings:4d} {o.false_firings:5d} {planted or '-':40} "
            f"{o.seconds:5.0f}"
        )
        if o.false_examples:
            say(f"{'':28} false: {', '.join(o.false_examples)}")
    counted = [o for o in outcomes if not o.scenario.hard]
    fired = sum(o.firings for o in counted)
    true = sum(o.true_firings for o in counted)
    in_scope = [d for o in counted for d in o.detections if _share(d) >= 5.0]
    found = in_scope
    delays = [float(d["delay_s"]) for d in found if d["found"]]  # type: ignore[arg-type]
    flat = [o for o in counted if not o.scenario.regress]
    flat_days = sum(o.days for o in flat)
    flat_false = sum(o.false_firings for o in flat)
    totals: dict[str, float | None] = {
        "precision": true / fired if fired else None,
        "recall": sum(bool(d["found"]) for d in found) / len(found) if found else None,
        "median_delay_h": statistics.median(delays) / 3600 if delays else None,
        "max_delay_h": max(delays) / 3600 if delays else None,
        "false_per_30_flat_days": 30 * flat_false / flat_days if flat_days else None,
        "false_per_fleet_day": sum(o.false_firings for o in counted)
        / max(sum(o.days for o in counted), 1e-9),
    }

    def fmt(v: float | None, digits: int = 2) -> str:
        return "-" if v is None else f"{v:.{digits}f}"

    def ci(hits: int, n: int) -> str:
        lo, hi = wilson(hits, n)
        return f"[{lo:.2f}, {hi:.2f}] of {n}" if n else ""

    n_found = sum(bool(d["found"]) for d in found)

    say()
    say(f"{'figure':34} {'measured':>9}  target")
    say(f"{'precision':34} {fmt(totals['precision']):>9}  >= 0.9   95% {ci(true, fired)}")
    say(
        f"{'recall (factor >= 3, share >= 5%)':34} {fmt(totals['recall']):>9}  >= 0.9   "
        f"95% {ci(n_found, len(found))}"
    )
    say(f"{'median first detection (h)':34} {fmt(totals['median_delay_h'], 1):>9}  <= 6")
    say(f"{'worst first detection (h)':34} {fmt(totals['max_delay_h'], 1):>9}  <= 24")
    flat_note = f"({flat_false} in {flat_days:.0f} d)"
    say(
        f"{'false firings per 30 flat fleet-days':34} "
        f"{fmt(totals['false_per_30_flat_days']):>9}  <= 1  {flat_note}"
    )
    say(f"{'false firings per fleet-day (all)':34} {fmt(totals['false_per_fleet_day'], 3):>9}")
    return totals


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``hits / n`` (95 % by default): how far a
    precision or recall measured on this few firings may be from the rule's own."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="three scenarios instead of thirteen")
    parser.add_argument("--processes", type=int, default=2, help="scenarios run at once")
    parser.add_argument("--rules", metavar="FILE", help="a rules file over the defaults")
    parser.add_argument("--only", metavar="NAME", help="the scenarios whose name contains this")
    parser.add_argument(
        "--skip", metavar="NAME", help="leave out the scenarios whose name contains this"
    )
    parser.add_argument(
        "--seeds", type=int, default=1, help="replicates of the 400-job scenarios (default 1)"
    )
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    todo = [
        s
        for s in scenarios(args.quick, args.seeds)
        if (args.only is None or args.only in s.name)
        and (args.skip is None or args.skip not in s.name)
    ]
    began = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.processes)) as pool:
        outcomes = []
        for i, o in enumerate(pool.map(run, todo, [args.rules] * len(todo)), 1):
            outcomes.append(o)
            print(
                f"[{i}/{len(todo)}] {o.scenario.name}: {o.firings} firings, {o.seconds:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    report(outcomes)
    print(f"\n{len(todo)} scenarios in {time.perf_counter() - began:.0f} s")
    return 0


def test_bench_alert_quality() -> None:
    main(["--quick"])


if __name__ == "__main__":
    raise SystemExit(main())
