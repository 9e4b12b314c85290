"""Recompute concurrency benchmark: reads of one job while a big job streams in (issue 11).

A real ``ett serve``; a big job's spans are POSTed in batches while small jobs get a new span now
and then (each makes its job dirty), and K reader threads GET one job at a time: most a random
small job, some the big one. Prints p50/p95/max of both kinds of read, of the big job's POSTs,
and how many recomputes the collector ran, each next to its target, with the CPU of the server
and of this process and the load average (the machine may be shared), and the server's CPU
per read (its CPU seconds over the run, ingest and recomputes included, over the reads answered).
After the ingest, the readers go on alone for ``--quiet-s`` seconds: reads/s, latency and CPU
per read of reads only. Views in one run (:data:`VIEWS`): before, without the read cache
(``ETT_READ_CACHE=0``); with it, its stamp looked up on every read (``ETT_READ_RECHECK_S=0``);
with it and the default recheck interval (a stamp just checked is trusted that long); and the
last with the K reader threads spread over 5 processes of their own: in the first three the
POSTing thread shares this process's GIL with 50 busy readers, so its latency includes the
client's own contention. ``--server-workers N`` runs ``ett serve --workers N`` (its CPU is that
of all its processes). Then an idle collector holding presumed-dead jobs: recomputes per second
and CPU. Prints figures; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_recompute [--spans N] [--readers K]
        [--server-workers N] [--quiet-s S] [--views off,on-recheck0,on,on-procs] [--no-idle]
        [--postgres-url URL] [--profile-read N]

``--profile-read N`` prints only the CPU of the parts of one job read, in process.

Where one GET of a job went (2026-12-01, this 2-core VM). In process (``--profile-read 3000``,
load 5.9), SQLite / PostgreSQL: ``Store.job_state`` 187 / 339 us (a SQLAlchemy select; on
PostgreSQL BEGIN and ROLLBACK round trips too), ``json.loads`` of the figures 16, their encode
18; the ASGI app (routing, thread hand-off, the read) 388 / 600 us without the read cache, 116 /
228 with it (``Store.figures_stamp`` 13 / 61 us). Under uvicorn, one reader, load 1.3, server
CPU per read: plain uvicorn with a constant ASGI app 87 us, plus Starlette's routing and
middleware 110, plus ``anyio.to_thread`` 227 (an executor's hand-off 167); the whole read 583-660
us before, 253-317 after. The summary itself is small (1.1-1.4 KB, the 60,000-span job's too):
decode and encode were never the cost; the SQLAlchemy query and the hand-offs were.

The recheck interval (2026-12-01 10:28-10:36 UTC, this 2-core VM, two runs each, 60,000 spans,
50 readers; ``--views off,on-recheck0,on`` / the pytest form), GET p95 during the ingest, cache
off / recheck 0 / recheck 0.25 s: SQLite 104-107 / 59 / 57-58 ms (load 0.8-2.0), 95 / 63 / 32
(load 1.0-1.8); PostgreSQL 184-185 / 109-110 / 91 ms (load 0.6-3.6), 176-177 / 100 / 81-83
(load 1.4-3.1). Readers alone, server CPU per read: SQLite 938 / 211-247 / 121-124 us,
PostgreSQL 1,014-1,031 / 345-378 / 126-138 us; reads/s 1,015-1,239 / 2,301-5,534 / 7,371-8,481.

Targets (issue 11): GET of any job p95 < 100 ms during the big job's ingest with K = 50 readers;
a small job's read never waits behind the big job's recompute; ingest p95 < 1 s; idle CPU with
presumed-dead jobs near zero.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import re
import socket
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx
import pytest

from ett import semconv as sc
from ett_collector.domain import SpanRecord
from ett_collector.settings import DEFAULT_READ_RECHECK_S, DEFAULT_READ_THREADS
from tests.support.collector_process import start_collector
from tests.support.replay import encode_request
from tests.support.spans import span
from tests.support.worked_example import worked_example

PROTO = {"Content-Type": "application/x-protobuf"}
BASE = 1.79e9
SMALL_JOBS = 20


def _big_job(n: int, ranks: int = 8) -> list[SpanRecord]:
    """A long job of ``n`` spans over ``ranks`` ranks, in the order a live job sends them."""
    out: list[SpanRecord] = []
    per_rank = n // ranks
    for rank in range(ranks):

        def add(name: str, a: float, b: float, rank: int = rank, **attrs: Any) -> None:
            out.append(
                span(
                    name,
                    BASE + a,
                    BASE + b,
                    0,
                    rank,
                    "big",
                    span_id=len(out) + 1,
                    trace_id=f"{rank:032x}",
                    **{sc.MODEL: "bench"},
                    **attrs,
                )
            )

        add(sc.startup_span_name("pg_init"), 0, 5)
        add(sc.SPAN_FIRST_BATCH, 29, 30)
        for i in range(per_rank - 2):
            t = 30.0 + i
            if i % 100 == 99:
                add(
                    sc.SPAN_CHECKPOINT_SAVE,
                    t,
                    t + 0.5,
                    **{sc.CHECKPOINT_STEP: i, sc.CHECKPOINT_MODE: "sync"},
                )
            else:
                steps = {sc.STEP_FIRST: i * 10, sc.STEP_LAST: i * 10 + 9, sc.SAMPLES: 640}
                add(sc.SPAN_TRAIN_WINDOW, t, t + 1, **steps)
    out.sort(key=lambda s: s.start)
    return out


def _stats(ms: list[float]) -> str:
    if len(ms) < 2:
        return f"n={len(ms)}"
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return f"n={len(ms):5d} p50 {q[49]:8.1f} ms  p95 {q[94]:8.1f} ms  max {max(ms):8.1f} ms"


def _recomputes(client: httpx.Client, url: str) -> tuple[float, float]:
    """How many recomputes the collector ran so far, and their seconds in all."""
    text = client.get(url + "/metrics").text
    found = [
        re.search(rf"^ett_recompute_duration_seconds_{key} (\S+)$", text, re.M)
        for key in ("count", "sum")
    ]
    count, total = (float(m.group(1)) if m else 0.0 for m in found)
    return count, total


class _Flag(Protocol):
    def is_set(self) -> bool: ...


class _Reader:
    """A lean HTTP/1.1 keep-alive client for GETs: a reader's own CPU stays small, so that on a
    shared machine the server's is what is measured (httpx took about 1 ms of CPU per GET here,
    twice the server's)."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.sock = socket.create_connection((self.host, parts.port or 80), timeout=300)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def get(self, path: str) -> tuple[int, bytes]:
        """Status and body of ``GET path``."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        while b"\r\n\r\n" not in self.buf:
            self._more()
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
        assert found is not None, head
        length = int(found.group(1))
        while len(self.buf) < length:
            self._more()
        body, self.buf = self.buf[:length], self.buf[length:]
        return int(head[9:12]), body

    def _more(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def close(self) -> None:
        self.sock.close()


def _read_loop(url: str, i: int, done: _Flag, big: list[float], small: list[float]) -> None:
    """Reader ``i``: GET one job after another until ``done``; a fifth read the big job."""
    own = random.Random(i)
    is_big = i % 5 == 0
    client = _Reader(url)
    try:
        while not done.is_set():
            job = "big" if is_big else f"small-{own.randrange(SMALL_JOBS)}"
            t0 = time.perf_counter()
            status, _ = client.get(f"/api/v1/jobs/{job}")
            ms = (time.perf_counter() - t0) * 1000
            if status in (200, 503):  # 503: the big job not computed yet (404: not seen yet)
                (big if is_big else small).append(ms)
    finally:
        client.close()


def _readers(url: str, ids: list[int], done: _Flag) -> tuple[list[float], list[float]]:
    big: list[float] = []
    small: list[float] = []
    threads = [threading.Thread(target=_read_loop, args=(url, i, done, big, small)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return big, small


def _reader_process(
    url: str, ids: list[int], phases: list[tuple[Any, Any]], ready: Any, out: Any
) -> None:
    """A process of reader threads (spawned): says it is ``ready`` once imported, then for each
    ``(start, done)`` of ``phases`` waits for ``start`` (None: at once) and reads until ``done``;
    the latencies of each phase go back through ``out``."""
    ready.put(len(ids))
    for start, done in phases:
        if start is not None:
            start.wait()
        out.put(_readers(url, ids, done))


def run(
    home: Path,
    db_url: str | None,
    spans: int,
    readers: int,
    batch: int = 2000,
    reader_procs: int = 0,
    read_cache: bool = True,
    server_workers: int = 1,
    quiet_s: float = 5.0,
    recheck_s: float = DEFAULT_READ_RECHECK_S,
) -> dict[str, Any]:
    """One run against a fresh collector (``ett serve --workers server_workers``; without the
    read cache unless ``read_cache``; ``ETT_READ_RECHECK_S=recheck_s``); returns the latencies
    (ms) and counts. Reader threads run in this process, or spread over ``reader_procs``
    processes of their own. After the ingest the readers go on alone for ``quiet_s`` seconds."""
    env = {"ETT_READ_THREADS": str(DEFAULT_READ_THREADS), "ETT_READ_RECHECK_S": f"{recheck_s:g}"}
    if not read_cache:
        env["ETT_READ_CACHE"] = "0"
    os.environ.update(env)
    try:
        c = start_collector(home, db_url=db_url, workers=server_workers)
    finally:
        for key in env:
            del os.environ[key]
    big_reads: list[float] = []
    small_reads: list[float] = []
    quiet_reads: list[float] = []
    posts: list[float] = []
    done = threading.Event()
    ctx = multiprocessing.get_context("spawn")
    procs_done = ctx.Event()
    procs_quiet_go, procs_quiet_done = ctx.Event(), ctx.Event()
    ready = ctx.Queue()
    out = ctx.Queue()
    try:
        with httpx.Client(timeout=300) as client:
            for i in range(SMALL_JOBS):
                body = encode_request(worked_example(f"small-{i}", base=BASE + 600 * i))
                assert client.post(c.url + "/v1/traces", content=body, headers=PROTO).is_success
            c.wait_computed()
            before = _recomputes(client, c.url)
        big = _big_job(spans)
        bodies = [encode_request(big[i : i + batch]) for i in range(0, len(big), batch)]

        def ingest() -> None:
            try:
                with httpx.Client(timeout=300) as client:
                    for body in bodies:
                        t0 = time.perf_counter()
                        r = client.post(c.url + "/v1/traces", content=body, headers=PROTO)
                        posts.append((time.perf_counter() - t0) * 1000)
                        assert r.status_code == 200, r.text
            finally:
                done.set()
                procs_done.set()

        def touch() -> None:  # a new span for a small job now and then: that job goes dirty
            with httpx.Client(timeout=300) as client:
                k = 0
                while not done.is_set():
                    job = f"small-{k % SMALL_JOBS}"
                    t = BASE + 600 * (k % SMALL_JOBS) + 500 + k
                    extra = [span(sc.SPAN_TRAIN_WINDOW, t, t + 1, 1, 0, job, span_id=10**6 + k)]
                    client.post(c.url + "/v1/traces", content=encode_request(extra), headers=PROTO)
                    k += 1
                    done.wait(0.1)

        procs = [
            ctx.Process(
                target=_reader_process,
                args=(
                    c.url,
                    list(range(readers))[k::reader_procs],
                    [(None, procs_done), (procs_quiet_go, procs_quiet_done)],
                    ready,
                    out,
                ),
            )
            for k in range(reader_procs)
        ]
        for proc in procs:
            proc.start()
        for _ in procs:  # every reader process imported and about to read
            ready.get(timeout=300)
        threads = [threading.Thread(target=ingest), threading.Thread(target=touch)]
        if not procs:
            threads += [
                threading.Thread(target=_read_loop, args=(c.url, i, done, big_reads, small_reads))
                for i in range(readers)
            ]
        t0 = time.perf_counter()
        server_cpu0, own_cpu0 = _tree_cpu_s(c.process.pid), time.process_time()
        load0 = os.getloadavg()[0]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        server_cpu = _tree_cpu_s(c.process.pid) - server_cpu0
        own_cpu = time.process_time() - own_cpu0
        for _ in procs:
            their_big, their_small = out.get(timeout=600)
            big_reads += their_big
            small_reads += their_small
        # the readers alone: what a read costs without ingest or recomputes beside it
        quiet = threading.Event()
        quiet_threads = [
            threading.Thread(target=_read_loop, args=(c.url, i, quiet, quiet_reads, quiet_reads))
            for i in (range(readers) if not procs else ())
        ]
        q_cpu0, q_t0 = _tree_cpu_s(c.process.pid), time.perf_counter()
        procs_quiet_go.set()
        for t in quiet_threads:
            t.start()
        time.sleep(quiet_s)
        quiet.set()
        procs_quiet_done.set()
        for t in quiet_threads:
            t.join()
        q_elapsed = time.perf_counter() - q_t0
        q_cpu = _tree_cpu_s(c.process.pid) - q_cpu0
        load1 = os.getloadavg()[0]
        for _ in procs:
            their_big, their_small = out.get(timeout=600)
            quiet_reads += their_big + their_small
        for proc in procs:
            proc.join(timeout=60)
        with httpx.Client(timeout=300) as client:
            after = _recomputes(client, c.url)
    finally:
        c.stop()
    reads = len(small_reads) + len(big_reads)
    return {
        "small": small_reads,
        "big": big_reads,
        "posts": posts,
        "quiet": quiet_reads,
        "recomputes": after[0] - before[0],
        "recompute_s": after[1] - before[1],
        "server_cpu_pct": 100 * server_cpu / elapsed,
        "server_cpu_per_read_us": 1e6 * server_cpu / max(reads, 1),
        "bench_cpu_pct": 100 * own_cpu / elapsed,
        "seconds": elapsed,
        "quiet_reads_per_s": len(quiet_reads) / q_elapsed,
        "quiet_cpu_per_read_us": 1e6 * q_cpu / max(len(quiet_reads), 1),
        "quiet_cpu_pct": 100 * q_cpu / q_elapsed,
        "load": (load0, load1),
        "reader_procs": reader_procs,
        "read_cache": read_cache,
        "recheck_s": recheck_s,
        "server_workers": server_workers,
    }


def _dead_job(job: str, base: float) -> list[SpanRecord]:
    """A job that trained a while and went silent without an end: presumed dead from then on."""
    out = [
        span(sc.startup_span_name("pg_init"), base, base + 5, 0, 0, job),
        span(sc.SPAN_FIRST_BATCH, base + 9, base + 10, 0, 0, job),
    ]
    steps = {sc.STEP_FIRST: 0, sc.STEP_LAST: 9, sc.SAMPLES: 640}
    out += [
        span(sc.SPAN_TRAIN_WINDOW, base + t, base + t + 10, 0, 0, job, **steps)
        for t in range(10, 200, 10)
    ]
    return out


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(pid: int) -> float:
    """:func:`_cpu_s` of ``pid`` and of its living descendants (``ett serve --workers N``)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += _cpu_s(p)
        except OSError:
            continue
        todo += parents.get(p, [])
    return total


def idle_dead_jobs(home: Path, db_url: str | None, jobs: int, seconds: float) -> dict[str, Any]:
    """Recomputes and CPU of an idle collector holding ``jobs`` presumed-dead jobs (live
    refresh every second, as ``start_collector`` sets it)."""
    c = start_collector(home, db_url=db_url)
    try:
        with httpx.Client(timeout=300) as client:
            spans = [s for i in range(jobs) for s in _dead_job(f"dead-{i}", BASE + 300 * i)]
            for i in range(0, len(spans), 2000):
                body = encode_request(spans[i : i + 2000])
                assert client.post(c.url + "/v1/traces", content=body, headers=PROTO).is_success
            c.wait_computed()
            time.sleep(3)  # elapsed time, not a wait: the first live refreshes after the backlog
            r0, cpu0 = _recomputes(client, c.url)[0], _cpu_s(c.process.pid)
            time.sleep(seconds)  # elapsed time, not a wait: the idle span measured
            r1, cpu1 = _recomputes(client, c.url)[0], _cpu_s(c.process.pid)
    finally:
        c.stop()
    return {"recomputes_per_s": (r1 - r0) / seconds, "cpu_pct": 100 * (cpu1 - cpu0) / seconds}


def report_idle(label: str, r: dict[str, Any], jobs: int) -> None:
    print(
        f"\n{label}: idle collector with {jobs} presumed-dead jobs: "
        f"{r['recomputes_per_s']:.1f} recomputes/s, {r['cpu_pct']:.1f} % of a core"
    )
    print("  target: near zero")


def _p95(ms: list[float]) -> float:
    return statistics.quantiles(ms, n=100, method="inclusive")[94] if len(ms) > 1 else float("nan")


def report(label: str, views: list[dict[str, Any]], spans: int, readers: int) -> None:
    """Each figure next to its target, one column per view of the run."""
    where = [
        ("cache " + (f"on, recheck {r['recheck_s']:g} s" if r["read_cache"] else "off"))
        + (f", {r['reader_procs']} reader procs" if r["reader_procs"] else "")
        + (f", {r['server_workers']} workers" if r["server_workers"] != 1 else "")
        for r in views
    ]
    print(
        f"\n{label}: {spans:,} spans of one job POSTed in batches of 2,000 while {readers} "
        "readers GET jobs; p95 in ms, target, then each view"
    )
    print(f"  {'':36s} {'target':>8s} " + " ".join(f"{w:>30s}" for w in where))
    rows = [
        ("GET small job (dirty now and then)", "small", 100.0),
        ("GET the big job (dirty throughout)", "big", 100.0),
        ("POST of the big job (2,000 spans)", "posts", 1000.0),
    ]
    for name, key, target in rows:
        cells = " ".join(f"{_p95(r[key]):30.1f}" for r in views)
        print(f"  {name:36s} {target:8.0f} {cells}")
    for key, name, fmt in [
        ("seconds", "ingest seconds", "30.1f"),
        ("recomputes", "recomputes", "30.0f"),
        ("recompute_s", "recompute seconds (all jobs)", "30.1f"),
        ("server_cpu_pct", "ett serve CPU, % of one core", "30.0f"),
        ("server_cpu_per_read_us", "ett serve CPU / reads, us", "30.0f"),
        ("bench_cpu_pct", "this process's CPU, % of one core", "30.0f"),
    ]:
        print(f"  {name:36s} {'':8s} " + " ".join(f"{r[key]:{fmt}}" for r in views))
    print("  then the readers alone:")
    for key, name, fmt in [
        ("quiet_reads_per_s", "reads per second", "30.0f"),
        ("quiet_cpu_per_read_us", "ett serve CPU per read, us", "30.0f"),
        ("quiet_cpu_pct", "ett serve CPU, % of one core", "30.0f"),
    ]:
        print(f"  {name:36s} {'':8s} " + " ".join(f"{r[key]:{fmt}}" for r in views))
    cells = " ".join(f"{_p95(r['quiet']):30.1f}" for r in views)
    print(f"  {'GET p95, ms':36s} {100.0:8.0f} {cells}")
    loads = " ".join(f"{r['load'][0]:21.1f} ->{r['load'][1]:6.1f}" for r in views)
    print(f"  {'load average (1 min), start -> end':36s} {'':8s} {loads}")
    for r, w in zip(views, where, strict=True):
        print(f"  {w}:")
        print(f"    GET small {_stats(r['small'])}")
        print(f"    GET big   {_stats(r['big'])}")
        print(f"    POST      {_stats(r['posts'])}")
        print(f"    GET alone {_stats(r['quiet'])}")


VIEWS = {
    "off": (False, 0, DEFAULT_READ_RECHECK_S),
    "on-recheck0": (True, 0, 0.0),
    "on": (True, 0, DEFAULT_READ_RECHECK_S),
    "on-procs": (True, 5, DEFAULT_READ_RECHECK_S),
}
"""(read cache, reader processes, ``ETT_READ_RECHECK_S``) of each view: without the cache
(``ETT_READ_CACHE=0``: every read decodes and encodes the job's stored figures); with it, the
stamp looked up on every read; with it and the default recheck interval; and that with the
readers out of the POSTing process. Readers run in this process unless said."""


def views(
    home: Path,
    new_db: Callable[[], str | None],
    spans: int,
    readers: int,
    names: tuple[str, ...] = tuple(VIEWS),
    server_workers: int = 1,
    quiet_s: float = 5.0,
) -> list[dict[str, Any]]:
    """The run once per view named (:data:`VIEWS`), each on a fresh database from ``new_db``
    (None: SQLite under ``home``)."""
    out = []
    for i, name in enumerate(names):
        cache, procs, recheck_s = VIEWS[name]
        out.append(
            run(
                home / f"view-{i}",
                new_db(),
                spans,
                readers,
                reader_procs=procs,
                read_cache=cache,
                server_workers=server_workers,
                quiet_s=quiet_s,
                recheck_s=recheck_s,
            )
        )
    return out


def _cpu_us(fn: Callable[[], Any], n: int) -> float:
    """Microseconds of this process's CPU (all threads) per call of ``fn``."""
    fn()
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n * 1e6


def profile_read(db_url: str, n: int) -> list[tuple[str, float]]:
    """The parts of one ``GET /api/v1/jobs/{id}`` in this process (``--profile-read N``): CPU
    per call of the database reads, the decode and encode, the query layer and the whole app
    called as ASGI (its thread hand-off included), with the read cache off and on. uvicorn's
    own part (HTTP parsing and writing, ~90 us) is not in it."""
    import asyncio
    import json

    from ett_collector.api._app import create_app, json_body
    from ett_collector.settings import Settings
    from ett_collector.storage import Store
    from ett_collector.write.pipeline import Pipeline

    store = Store(db_url)
    store.upgrade()
    for i in range(SMALL_JOBS):
        store.ingest(worked_example(f"small-{i}", base=BASE + 600 * i))
    pipeline = Pipeline(store)
    while pipeline.recompute_dirty():
        pass
    job = "small-3"
    apps = {
        cache: create_app(Settings(db_url=db_url, read_cache_jobs=cache), Pipeline(store))
        for cache in (0, 1000)
    }
    _, _, figures = store.job_state(job)
    summary = json.dumps(figures, separators=(",", ":"), ensure_ascii=False)
    query = apps[1000].state.query

    def get(app: Any) -> Callable[[], None]:
        path = f"/api/v1/jobs/{job}"
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(b"host", b"ett")],
            "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 2),
        }

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                assert message["status"] == 200, message

        loop = asyncio.new_event_loop()
        return lambda: loop.run_until_complete(app(dict(scope), receive, send))

    try:
        return [
            (
                "Store.job_state (figures as JSON text, one query)",
                _cpu_us(lambda: store.job_state(job), n),
            ),
            (
                "Store.figures_stamp (the cache's lookup)",
                _cpu_us(lambda: store.figures_stamp(job), n),
            ),
            ("json.loads of the stored figures", _cpu_us(lambda: json.loads(summary), n)),
            ("JSONResponse encode of the answer", _cpu_us(lambda: json_body(figures), n)),
            ("Query.job (job_state, decode)", _cpu_us(lambda: query.job(job), n)),
            (
                "Query.job_body, cache hit (stamp, lookup)",
                _cpu_us(lambda: query.job_body(job, json_body), n),
            ),
            ("ASGI app, cache off (routing, thread, read)", _cpu_us(get(apps[0]), n)),
            ("ASGI app, cache on", _cpu_us(get(apps[1000]), n)),
        ]
    finally:
        store.close()


def _fresh_postgres(url: str) -> str:
    """A new empty database on the server of ``url`` (any database there); its URL."""
    from sqlalchemy import create_engine, make_url, text

    name = f"bench_{uuid.uuid4().hex[:12]}"
    engine = create_engine(make_url(url), isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


@pytest.mark.performance
@pytest.mark.timeout(1800)
def test_bench_recompute_sqlite(tmp_path: Path) -> None:
    report("SQLite", views(tmp_path, lambda: None, 60_000, 50), 60_000, 50)
    report_idle("SQLite", idle_dead_jobs(tmp_path / "idle", None, 300, 10), 300)


@pytest.mark.performance
@pytest.mark.postgres
@pytest.mark.timeout(1800)
def test_bench_recompute_postgres(tmp_path: Path, postgres_server: Any) -> None:
    report("PostgreSQL", views(tmp_path, postgres_server.create_database, 60_000, 50), 60_000, 50)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spans", type=int, default=120_000)
    p.add_argument("--readers", type=int, default=50)
    p.add_argument("--dead-jobs", type=int, default=300)
    p.add_argument("--postgres-url", help="a PostgreSQL server (any database): one new each run")
    p.add_argument("--server-workers", type=int, default=1, help="ett serve --workers N")
    p.add_argument("--quiet-s", type=float, default=5.0, help="seconds of reads alone after")
    p.add_argument(
        "--views", default=",".join(VIEWS), help=f"views in order, of {', '.join(VIEWS)}"
    )
    p.add_argument("--no-idle", action="store_true", help="skip the idle collector's run")
    p.add_argument(
        "--profile-read",
        type=int,
        metavar="N",
        default=0,
        help="only the parts of one job read in process, N calls each",
    )
    args = p.parse_args()
    names = tuple(v.strip() for v in args.views.split(",") if v.strip())
    unknown = [v for v in names if v not in VIEWS]
    if unknown or not names:
        p.error(f"--views takes {', '.join(VIEWS)}; got {args.views!r}")
    label = "PostgreSQL" if args.postgres_url else "SQLite"
    pg = args.postgres_url

    def new_db() -> str | None:
        return _fresh_postgres(pg) if pg else None

    if args.profile_read:
        with tempfile.TemporaryDirectory() as tmp:
            db = new_db() or f"sqlite:///{Path(tmp) / 'profile.db'}"
            parts = profile_read(db, args.profile_read)
        print(
            f"\n{label}: one GET /api/v1/jobs/{{id}} in process, CPU per call "
            f"({args.profile_read} calls, load {os.getloadavg()[0]:.1f})"
        )
        for name, us in parts:
            print(f"  {name:52s} {us:8.1f} us")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        ran = views(
            Path(tmp), new_db, args.spans, args.readers, names, args.server_workers, args.quiet_s
        )
        report(label, ran, args.spans, args.readers)
    if args.no_idle:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        idle = idle_dead_jobs(Path(tmp) / "idle", new_db(), args.dead_jobs, 10)
    report_idle(label, idle, args.dead_jobs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
