"""Freshness benchmark (issue 11): a live fleet on top of hours of history, against a real
``ett serve``. Prints each figure next to its target; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_freshness [--jobs 50] [--ranks 16]
        [--history-h 12] [--live-s 180] [--db URL]
    .venv/bin/python -m pytest -m performance -s tests/performance/bench_freshness.py

The fleet: ``jobs`` jobs x ``ranks`` ranks, each rank trained for ``history-h`` hours of 10 s
windows with an async checkpoint every 30 min, up to now. The history is seeded straight into
the database before the server starts, in the state compaction leaves it (one run per rank up
to ~12 min ago, the newer windows raw, the checkpoint and start-up spans raw), so seeding takes
seconds, not hours. Then ``ett serve`` (default settings but the database) starts on it, and
live: each rank posts its next ``ett.train.window`` over OTLP/HTTP when the window ends (every
10 s per rank, ranks staggered across the 10 s), for ``live-s`` seconds. Measured during the
live phase, after a warm-up (the first recompute of every job, the posts' catch-up):

- figures' lag: every 0.5 s, for each job, how long the oldest acknowledged span that its
  stored figures do not reflect yet has been acknowledged (0 when they reflect every span; a
  span is reflected once the figures' ``last_span_end`` reaches its end). The figures are read
  from the database, not through the API, so observing does not change what is measured.
  p50 / p95 / max over (job, sample) pairs; target p95 <= 2 s;
- ``GET /api/v1/jobs?limit=100`` (what a dashboard polls) and ``GET /api/v1/jobs/{id}`` latency,
  p50 / p95, once a second each; target < 100 ms;
- the server's recomputes per second (``ett_recompute_duration_seconds_count``), its CPU (% of
  one core, from ``/proc``) and peak RSS; ingest POST latency p95 (target < 1 s).
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from ett import semconv as sc
from ett_collector.domain import SpanRecord, summarize
from ett_collector.storage import Store
from ett_collector.storage._runs import Run
from tests.support.collector_process import stop_process
from tests.support.ports import free_port
from tests.support.replay import encode_request
from tests.support.spans import first_batch, persist, phase, save, window

WINDOW_S = 10.0
CKPT_EVERY_S = 1800.0
RAW_KEPT_S = 750.0
"""Seeded windows newer than this (before now) are stored raw, older ones as runs: between the
600 s retention and the 900 s after which compaction runs again, as a steady state has them."""
STEPS = 50
PROTO = {"Content-Type": "application/x-protobuf"}
POSTERS = 6
SAMPLE_S = 0.5


def _ident(job: int, rank: int, ranks: int) -> dict[str, Any]:
    return {
        "job": f"fresh-{job:03d}",
        "rank": rank,
        "trace_id": f"{job + 1:016x}{rank + 1:016x}",
        sc.MODEL: f"dlrm-{job % 5}",
        sc.TEAM: f"team-{job % 3}",
        sc.WORLD_SIZE: ranks,
    }


@dataclass
class Rank:
    """One rank's clock: window ``i`` is ``[origin + 10 i, origin + 10 (i + 1)]``."""

    job: int
    rank: int
    origin: float
    kw: dict[str, Any]
    next_i: int = 0

    def window(self, i: int) -> SpanRecord:
        a = self.origin + i * WINDOW_S
        steps = {sc.STEP_FIRST: STEPS * i, sc.STEP_LAST: STEPS * i + STEPS - 1, sc.SAMPLES: 4096}
        return window(a, a + WINDOW_S, **self.kw, **steps)

    def due(self, i: int) -> float:
        return self.origin + (i + 1) * WINDOW_S


def fleet(jobs: int, ranks: int, history_s: float, now: float) -> list[Rank]:
    """Every rank, staggered over the window, having trained ``history_s`` up to ``now``."""
    out = []
    n = jobs * ranks
    for k, (j, r) in enumerate(itertools.product(range(jobs), range(ranks))):
        offset = WINDOW_S * ((k * 7919) % n) / n  # spread, not in job order
        origin = now - history_s + offset
        out.append(Rank(j, r, origin, _ident(j, r, ranks)))
    return out


def seed(url: str, ranks: list[Rank], now: float, progress: Callable[[str], None]) -> int:
    """Store the fleet's history up to ``now`` as compaction leaves it; returns spans stored."""
    store = Store(url)
    store.upgrade()
    sql = store.compactor.sql
    spans = 0
    by_job: dict[int, list[Rank]] = {}
    for r in ranks:
        by_job.setdefault(r.job, []).append(r)
    for j, job_ranks in sorted(by_job.items()):
        job_id = job_ranks[0].kw["job"]
        records: list[SpanRecord] = []
        run_rows, folded = [], 0
        line = now - RAW_KEPT_S
        for r in job_ranks:
            kw = r.kw
            alloc = r.origin - 90
            records.append(phase("pg_init", alloc, alloc + 20 + r.rank % 7, **kw))
            records.append(phase("model_init", alloc + 30, alloc + 85, **kw))
            records.append(first_batch(r.origin, **kw))
            n = int((now - r.origin) // WINDOW_S)
            cut = int((line - r.origin) // WINDOW_S)  # windows [0, cut) become one run
            run = Run.of(r.window(0))
            last = r.window(cut - 1)
            run.end, run.step_last = last.end, last.attributes[sc.STEP_LAST]  # type: ignore[assignment]
            run.samples, run.count = 4096 * cut, cut
            run_rows.append(run.row())
            folded += cut
            records += [r.window(i) for i in range(cut, n)]
            r.next_i = n
            for k in range(1, int((now - r.origin) // CKPT_EVERY_S) + 1):
                a = r.origin + k * CKPT_EVERY_S + 0.5
                if a + 30 < now:
                    records.append(save(STEPS * k, a, a + 2.0, mode="async", **kw))
                    records.append(persist(STEPS * k, a + 2.0, a + 30.0, **kw))
        records.sort(key=lambda s: s.end)
        windows = [s for s in records if s.name == sc.SPAN_TRAIN_WINDOW]
        others = [s for s in records if s.name != sc.SPAN_TRAIN_WINDOW]
        store.ingest(others[:1])  # the job's row first: runs and the line refer to it
        with store.engine.begin() as conn:
            conn.exec_driver_sql(sql.insert_run, run_rows)
            conn.exec_driver_sql(sql.advance, (job_id, line))
            conn.exec_driver_sql(sql.uncount, (-folded, job_id))  # the runs' windows count
        rest = sorted(others[1:] + windows, key=lambda s: s.end)
        for i in range(0, len(rest), 512):
            store.ingest(rest[i : i + 512])
        spans += len(records) + folded
        progress(f"seeded {j + 1}/{len(by_job)} jobs ({spans:,} spans)")
    store.close()
    return spans


@dataclass
class Live:
    """What the live phase measured."""

    acks: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Per job, (span end, acknowledged at) in acknowledgement order."""
    posts: list[float] = field(default_factory=list)
    errors: int = 0
    lags: list[float] = field(default_factory=list)
    lag_max_by_job: dict[str, float] = field(default_factory=dict)
    list_gets: list[float] = field(default_factory=list)
    job_gets: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _post_loop(url: str, work: queue.Queue[list[SpanRecord] | None], live: Live) -> None:
    """Post each list of windows taken from ``work`` (one rank's, due now) until None."""
    with httpx.Client(base_url=url, timeout=60, headers=PROTO) as client:
        while (records := work.get()) is not None:
            t = time.perf_counter()
            try:
                ok = client.post("/v1/traces", content=encode_request(records)).status_code == 200
            except httpx.HTTPError:
                ok = False
            acked = time.time()
            with live.lock:
                live.posts.append(time.perf_counter() - t)
                if ok:
                    job = records[0].job_id
                    live.acks.setdefault(job, []).extend((w.end, acked) for w in records)
                else:
                    live.errors += 1


def _sample(engine: Any, live: Live, measuring: threading.Event) -> None:
    """One look at the stored figures: each job's lag behind its acknowledged spans."""
    t0 = time.time()
    with live.lock:
        acks = {job: list(xs) for job, xs in live.acks.items()}
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT job_id, last_span_end FROM job_figures"))
        reflected = {job: float(end) for job, end in rows}
    if not measuring.is_set():
        return
    for job, xs in acks.items():
        end = reflected.get(job, float("-inf"))
        waiting = [at for span_end, at in xs if span_end > end and at <= t0]
        lag = t0 - min(waiting) if waiting else 0.0
        live.lags.append(lag)
        live.lag_max_by_job[job] = max(live.lag_max_by_job.get(job, 0.0), lag)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _recomputes(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("ett_recompute_duration_seconds_count"):
            return float(line.split()[-1])
    return 0.0


def _q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def _progress(msg: str) -> None:
    sys.stderr.write(f"\r  {msg:<70}")
    sys.stderr.flush()


def serve(home: Path, url: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "ett_cli", "serve", "--port", str(port), "--db", url]
    log = open(home / "collector.log", "ab")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(
        cmd, env={**os.environ, "ETT_HOME": str(home), **env}, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((home / "collector.log").read_text()[-3000:])
        try:
            if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                return proc, base
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    stop_process(proc)
    raise RuntimeError("ett serve did not answer /healthz within 120 s")


def run(
    home: Path,
    jobs: int = 50,
    ranks: int = 16,
    history_h: float = 12.0,
    live_s: float = 180.0,
    warmup_s: float = 20.0,
    url: str | None = None,
    env: dict[str, str] | None = None,
) -> dict[str, float]:
    url = url or f"sqlite:///{home / 'collector.db'}"
    print(
        f"\nfreshness benchmark: {jobs} jobs x {ranks} ranks, {history_h:g} h of history,"
        f" {live_s:g} s live ({url.split(':')[0]})"
    )
    t = time.perf_counter()
    fleet_now = time.time()
    all_ranks = fleet(jobs, ranks, history_h * 3600, fleet_now)
    spans = seed(url, all_ranks, fleet_now, _progress)
    seed_s = time.perf_counter() - t
    proc, base = serve(home, url, env or {})
    live = Live()
    measuring = threading.Event()
    work: queue.Queue[list[SpanRecord] | None] = queue.Queue()
    engine = create_engine(url)
    try:
        with httpx.Client(base_url=base, timeout=120) as client:
            while client.get("/healthz").json()["dirty_jobs"]:  # the first recompute of all
                time.sleep(0.2)
            posters = [
                threading.Thread(target=_post_loop, args=(base, work, live), daemon=True)
                for _ in range(POSTERS)
            ]
            for p in posters:
                p.start()
            heap = [(r.due(r.next_i), k) for k, r in enumerate(all_ranks)]
            heapq.heapify(heap)
            start = time.time()
            warm_end, end = start + warmup_s, start + warmup_s + live_s
            cpu0 = rec0 = 0.0
            t_cpu0 = t_next_sample = t_next_read = start
            peak_rss = 0.0
            shown = -1
            while (now := time.time()) < end:
                if not measuring.is_set() and now >= warm_end:
                    cpu0, rec0, t_cpu0 = _cpu_s(proc.pid), _recomputes(client), time.time()
                    measuring.set()
                while heap and heap[0][0] <= now:
                    _, k = heapq.heappop(heap)
                    r = all_ranks[k]
                    records = []
                    while r.due(r.next_i) <= now:  # one post, with any windows overdue
                        records.append(r.window(r.next_i))
                        r.next_i += 1
                    work.put(records)
                    heapq.heappush(heap, (r.due(r.next_i), k))
                if now >= t_next_sample:
                    _sample(engine, live, measuring)
                    peak_rss = max(peak_rss, rss_mb(proc.pid))
                    t_next_sample = now + SAMPLE_S
                if now >= t_next_read:
                    for path, into in (
                        ("/api/v1/jobs?limit=100", live.list_gets),
                        (f"/api/v1/jobs/fresh-{int(now) % jobs:03d}", live.job_gets),
                    ):
                        t = time.perf_counter()
                        client.get(path).raise_for_status()
                        if measuring.is_set():
                            into.append(time.perf_counter() - t)
                    t_next_read = now + 1.0
                left = end - now
                if int(left) != shown:  # once a second
                    shown = int(left)
                    _progress(
                        f"{'live' if measuring.is_set() else 'warm-up'}: {left:5.0f} s left,"
                        f" {len(live.posts):,} posts, lag p95 {_q(live.lags, 0.95):.2f} s"
                    )
                time.sleep(max(0.0, min(0.05, (heap[0][0] if heap else end) - time.time())))
            cpu = _cpu_s(proc.pid) - cpu0
            recomputes = _recomputes(client) - rec0
            measured_s = time.time() - t_cpu0
            for _ in posters:
                work.put(None)
            for p in posters:
                p.join(timeout=60)
    finally:
        for _ in range(POSTERS):
            work.put(None)
        stop_process(proc)
        engine.dispose()
    sys.stderr.write("\n")
    by_job = list(live.lag_max_by_job.values())
    out = {
        "spans": float(spans),
        "seed_s": seed_s,
        "posts": float(len(live.posts)),
        "post_errors": float(live.errors),
        "post_p95_s": _q(live.posts, 0.95),
        "lag_p50_s": _q(live.lags, 0.5),
        "lag_p95_s": _q(live.lags, 0.95),
        "lag_max_s": max(live.lags, default=float("nan")),
        "job_worst_lag_p50_s": _q(by_job, 0.5),
        "list_p50_s": _q(live.list_gets, 0.5),
        "list_p95_s": _q(live.list_gets, 0.95),
        "job_p50_s": _q(live.job_gets, 0.5),
        "job_p95_s": _q(live.job_gets, 0.95),
        "recomputes_per_s": recomputes / measured_s,
        "cpu_pct": 100 * cpu / measured_s,
        "peak_rss_mb": peak_rss,
        "samples": float(len(live.lags)),
    }
    report(out)
    return out


def report(f: dict[str, float]) -> None:
    ms = 1e3
    print(f"history seeded: {f['spans']:,.0f} spans in {f['seed_s']:.1f} s")
    rows = [
        (
            "figures' lag p50 / p95 / max",
            f"{f['lag_p50_s']:.2f} / {f['lag_p95_s']:.2f} / {f['lag_max_s']:.2f} s",
            "p95 <= 2 s",
        ),
        ("worst lag of the median job", f"{f['job_worst_lag_p50_s']:.2f} s", ""),
        (
            "GET /api/v1/jobs?limit=100 p50 / p95",
            f"{f['list_p50_s'] * ms:.0f} / {f['list_p95_s'] * ms:.0f} ms",
            "< 100 ms",
        ),
        (
            "GET /api/v1/jobs/{id} p50 / p95",
            f"{f['job_p50_s'] * ms:.0f} / {f['job_p95_s'] * ms:.0f} ms",
            "< 100 ms",
        ),
        (
            "POST /v1/traces p95",
            f"{f['post_p95_s'] * ms:.0f} ms ({f['posts']:,.0f} posts,"
            f" {f['post_errors']:.0f} not 200)",
            "< 1 s",
        ),
        ("recomputes per second", f"{f['recomputes_per_s']:.1f}", ""),
        ("collector CPU (% of one core)", f"{f['cpu_pct']:.0f} %", ""),
        ("collector peak RSS", f"{f['peak_rss_mb']:.0f} MB", ""),
    ]
    for label, value, target in rows:
        print(f"  {label:38} {value:>34}   {target}")
    print(f"  ({f['samples']:,.0f} lag samples; load average {os.getloadavg()[0]:.1f})")


def profile_one(home: Path, ranks: int = 16, history_h: float = 12.0, rounds: int = 200) -> None:
    """One job of the fleet, in process: each round its ranks' next windows are ingested, then
    the job is recomputed by two pipelines on the same database: one whose store loads from
    scratch (``loads_kept=0``, as before) and one whose store continues its previous load (the
    default). Prints each one's CPU per recompute (load, summarize, save) side by side."""
    url = f"sqlite:///{home / 'one.db'}"
    now = time.time()
    job_ranks = fleet(1, ranks, history_h * 3600, now)
    seed(url, job_ranks, now, _progress)
    sys.stderr.write("\n")
    job = job_ranks[0].kw["job"]
    stores = {"from scratch": Store(url, loads_kept=0), "continued": Store(url)}
    cpu: dict[str, dict[str, list[float]]] = {k: {} for k in stores}

    def timed(name: str, part: str, fn: Callable[[], Any]) -> Any:
        t = time.process_time()
        out = fn()
        cpu[name].setdefault(part, []).append(time.process_time() - t)
        return out

    for i in range(rounds + 5):
        stores["continued"].ingest([r.window(r.next_i) for r in job_ranks])
        for r in job_ranks:
            r.next_i += 1
        for name, store in stores.items():
            seq = store.dirty_seq(job)
            t = time.process_time()
            spans = timed(name, "load", lambda s=store: s.load_spans(job))
            at = time.time()
            summary = timed(name, "summarize", lambda sp=spans, a=at: summarize(sp, a))
            timed(name, "save", lambda s=store, sm=summary, q=seq, a=at: s.save_summary(sm, q, a))
            cpu[name].setdefault("total", []).append(time.process_time() - t)
            if i < 5:  # the first rounds warm both up
                for xs in cpu[name].values():
                    xs.pop()
    for store in stores.values():
        store.close()
    print(
        f"\none job of {ranks} ranks, {history_h:g} h of history, {rounds} recomputes after"
        " each new window per rank: CPU per recompute, p50 (mean)"
    )
    print(f"  {'':12} {'from scratch':>18} {'continued':>18}   ratio of p50")
    for part in ("load", "summarize", "save", "total"):
        a, b = cpu["from scratch"][part], cpu["continued"][part]
        cells = [f"{_q(x, 0.5) * 1e3:7.2f} ({sum(x) / len(x) * 1e3:6.2f}) ms" for x in (a, b)]
        print(f"  {part:12} {cells[0]:>18} {cells[1]:>18}   {_q(a, 0.5) / _q(b, 0.5):.2f}x")
    print(f"  (target: one recompute under ~20 ms of CPU; load average {os.getloadavg()[0]:.1f})")


try:
    import pytest
except ImportError:  # the benchmark runs as a script without pytest
    pass
else:

    @pytest.mark.performance
    @pytest.mark.timeout(1800)
    def test_bench_freshness(tmp_path: Path) -> None:
        live_s = float(os.environ.get("ETT_BENCH_LIVE_S", "60"))
        f = run(tmp_path, jobs=int(os.environ.get("ETT_BENCH_JOBS", "50")), live_s=live_s)
        assert f["samples"] > 0 and f["posts"] > 0
        assert f["post_errors"] == 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="figures go to stdout; a progress line to stderr",
    )
    parser.add_argument("--jobs", type=int, default=50, help="jobs in the fleet (default 50)")
    parser.add_argument("--ranks", type=int, default=16, help="ranks per job (default 16)")
    parser.add_argument(
        "--history-h", type=float, default=12.0, help="hours of history seeded (default 12)"
    )
    parser.add_argument(
        "--live-s", type=float, default=180.0, help="seconds of the live phase (default 180)"
    )
    parser.add_argument(
        "--warmup-s", type=float, default=20.0, help="live seconds not measured (default 20)"
    )
    parser.add_argument(
        "--db",
        default=None,
        help="database URL (default: a SQLite file in a temporary folder); a PostgreSQL URL"
        " must name an empty database",
    )
    parser.add_argument(
        "--profile-one",
        type=int,
        metavar="ROUNDS",
        default=0,
        help="instead: one job's recompute, ROUNDS times in process, from scratch and continued"
        " side by side (CPU of load, summarize and save)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile_one:
            profile_one(Path(tmp), args.ranks, args.history_h, args.profile_one)
            return 0
        run(Path(tmp), args.jobs, args.ranks, args.history_h, args.live_s, args.warmup_s, args.db)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
