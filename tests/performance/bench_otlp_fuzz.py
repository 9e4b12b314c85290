"""The seeded fuzz of ``POST /v1/traces`` at scale: 100,000 bodies by default (a nightly run;
``make test`` runs 300 of them in ``tests/integration/test_otlp_fuzz.py``), on SQLite.

    .venv/bin/python -m tests.performance.bench_otlp_fuzz [--bodies N] [--seed S]
    ETT_FUZZ_BODIES=N make bench      # through pytest (marker: performance)

Checks what the small run checks (never a 500, mixed requests keep their good spans, still
serving after) and prints the rate and this process's peak RSS along the way: the peak must
level off, not grow with the number of bodies.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

import pytest

from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.otlp_fuzz import SEED, FuzzRun, fuzz, peak_rss_mib

DEFAULT_BODIES = 100_000
RSS_GROWTH_MIB = 256
"""How much the peak RSS may still grow after the first tenth of the run (SQLite's page cache
and the allocator's arenas fill up early; a leak of a few KiB per body would pass this)."""


def run(folder: Path, count: int, seed: int = SEED) -> tuple[FuzzRun, float]:
    url = f"sqlite:///{folder / 'fuzz.db'}"
    store = Store(url)
    store.upgrade()
    app = create_app(Settings(db_url=url, max_body_bytes=1 << 20), Pipeline(store))
    start_rss = peak_rss_mib()
    t0 = time.perf_counter()
    try:
        result = asyncio.run(fuzz(app, store, count, seed))
    finally:
        store.close()
    elapsed = time.perf_counter() - t0
    print(f"\n{count} fuzz bodies (seed {seed}) in {elapsed:.0f} s: {count / elapsed:.0f} bodies/s")
    codes = dict(sorted(result.codes.items()))
    lost = len(result.mixed_lost)
    print(
        f"answers: {codes}; {result.mixed} mixed requests, {lost} lost good spans; "
        f"a good request after: {result.last_good}"
    )
    samples = ", ".join(f"{r:.0f}" for r in result.rss_mib)
    print(f"peak RSS (MiB) at start {start_rss:.0f}, after each tenth: {samples}")
    return result, elapsed


def check(result: FuzzRun, count: int) -> None:
    assert result.unexpected == [], f"unexpected answers: {result.unexpected[:10]}"
    assert result.mixed_lost == [], f"good spans of mixed requests lost: {result.mixed_lost[:10]}"
    assert result.last_good == 200
    assert sum(result.codes.values()) == count
    first, last = result.rss_mib[0], result.rss_mib[-1]
    assert last - first < RSS_GROWTH_MIB, f"peak RSS grew from {first:.0f} to {last:.0f} MiB"


@pytest.mark.performance
@pytest.mark.timeout(4 * 3600)
def test_bench_otlp_fuzz(tmp_path: Path) -> None:
    count = int(os.environ.get("ETT_FUZZ_BODIES", DEFAULT_BODIES))
    result, _ = run(tmp_path, count)
    check(result, count)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bodies", type=int, default=DEFAULT_BODIES)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result, _ = run(Path(tmp), args.bodies, args.seed)
    check(result, args.bodies)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
