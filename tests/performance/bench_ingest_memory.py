"""Large requests against a real `ett serve` (SQLite): the memory K concurrent 31 MiB requests
take, and how long small posts wait while one very large request is stored. Prints figures
measured in one run, each configuration beside the one before it; it is not a timed test.

    .venv/bin/python -m tests.performance.bench_ingest_memory
    make bench      # through pytest (marker: performance)

1. Peak RSS of the server (``VmHWM``) while K = 4 clients post a 31 MiB body (246k spans over
   100 jobs) each at once, retrying 429 as told by ``Retry-After``: without an in-flight limit
   and in one transaction per request (as before issue 12), without a limit but in chunks, and
   with the default ``ETT_MAX_INFLIGHT_BYTES``.
2. Latency of small posts (one span each, back to back) while one request of 288k spans is
   stored: in one transaction (as before) and in chunks of ``INGEST_CHUNK_SPANS``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from ett_collector.api._app import INGEST_CHUNK_SPANS
from ett_collector.settings import DEFAULT_MAX_INFLIGHT_BYTES
from tests.support.bodies import window_body
from tests.support.ports import free_port

PROTO = {"Content-Type": "application/x-protobuf"}
MIB = 1 << 20
NO_LIMIT = 1 << 40
ONE_TRANSACTION = 1 << 40
_SERVE = (
    "import sys, ett_collector.api._app as app; app.INGEST_CHUNK_SPANS = int(sys.argv.pop(1)); "
    "from ett_cli._main import main; raise SystemExit(main())"
)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM in /proc")

    def spans(self) -> int:
        count: int = httpx.get(self.url + "/healthz", timeout=60).json()["spans"]
        return count

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _serve(home: Path, chunk: int, inflight: int, max_body: int = 32 * MIB) -> Server:
    """`ett serve` on a fresh SQLite database, with ``INGEST_CHUNK_SPANS`` set to ``chunk``."""
    home.mkdir(parents=True)
    port = free_port()
    env = {
        **os.environ,
        "ETT_HOME": str(home),
        "ETT_MAX_INFLIGHT_BYTES": str(inflight),
        "ETT_MAX_BODY_BYTES": str(max_body),
    }
    cmd = [sys.executable, "-c", _SERVE, str(chunk), "serve", "--port", str(port)]
    cmd += ["--db", f"sqlite:///{home / 'collector.db'}"]
    log = open(home / "serve.log", "ab")  # noqa: SIM115 - lives with the process
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return Server(url, proc)
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("ett serve did not answer /healthz within 60 s")


def _post_retrying(url: str, body: bytes, refusals: list[int]) -> None:
    """POST until it is taken, waiting as ``Retry-After`` says on 429 and 503."""
    with httpx.Client(timeout=600) as client:
        while True:
            r = client.post(url + "/v1/traces", content=body, headers=PROTO)
            if r.status_code == 200:
                return
            if r.status_code not in (429, 503):
                raise RuntimeError(f"POST answered {r.status_code}: {r.text[:200]}")
            refusals.append(r.status_code)
            time.sleep(float(r.headers.get("retry-after", "1")))


def concurrent_memory(home: Path, chunk: int, inflight: int, k: int = 4) -> dict[str, float]:
    """K clients post a 31 MiB body each at once; the server's peak RSS and what it took."""
    spans = 246_000
    bodies = [window_body(f"mem-{i}", spans, 1 + i * spans, jobs=100) for i in range(k)]
    server = _serve(home, chunk, inflight)
    try:
        idle = server.peak_rss_mib()
        refusals: list[int] = []
        threads = [
            threading.Thread(target=_post_retrying, args=(server.url, b, refusals)) for b in bodies
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - t0
        stored = server.spans()
        assert stored == k * spans, f"{stored} of {k * spans} spans stored"
        return {
            "peak_rss_mib": server.peak_rss_mib(),
            "idle_rss_mib": idle,
            "seconds": elapsed,
            "refused": len(refusals),
            "body_mib": len(bodies[0]) / MIB,
        }
    finally:
        server.stop()


def small_post_latency(home: Path, chunk: int, spans: int = 288_000) -> dict[str, float]:
    """Small posts back to back while one request of ``spans`` spans is stored."""
    large = window_body("large", spans, jobs=100)
    server = _serve(home, chunk, DEFAULT_MAX_INFLIGHT_BYTES, max_body=len(large) + MIB)
    try:
        done = threading.Event()
        errors: list[str] = []

        def post_large() -> None:
            try:
                r = httpx.post(server.url + "/v1/traces", content=large, headers=PROTO, timeout=600)
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text[:200]}")
            finally:
                done.set()

        latencies: list[float] = []
        big = threading.Thread(target=post_large)
        with httpx.Client(timeout=600) as client:
            big.start()
            n = 0
            while not done.is_set():
                body = window_body(f"small-{n % 20}", 1, first_span_id=10**9 + n)
                t = time.perf_counter()
                r = client.post(server.url + "/v1/traces", content=body, headers=PROTO)
                latencies.append(time.perf_counter() - t)
                if r.status_code != 200:
                    errors.append(f"small {r.status_code} {r.text[:200]}")
                n += 1
        big.join()
        if errors:
            raise RuntimeError(f"{len(errors)} requests failed, first: {errors[0]}")
        assert server.spans() == spans + n
        ordered = sorted(latencies)
        return {
            "small_posts": len(latencies),
            "p50_ms": 1000 * statistics.median(ordered),
            "p95_ms": 1000 * ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "max_ms": 1000 * ordered[-1],
        }
    finally:
        server.stop()


def run(tmp: Path) -> dict[str, dict[str, float]]:
    figures: dict[str, dict[str, float]] = {}
    print("\nK=4 concurrent 31 MiB requests (246k spans each), SQLite, `ett serve`, 1 worker:")
    for label, chunk, inflight in (
        ("no limit, one transaction (before)", ONE_TRANSACTION, NO_LIMIT),
        ("no limit, chunked", INGEST_CHUNK_SPANS, NO_LIMIT),
        (
            f"limit {DEFAULT_MAX_INFLIGHT_BYTES // MIB} MiB, chunked",
            INGEST_CHUNK_SPANS,
            DEFAULT_MAX_INFLIGHT_BYTES,
        ),
    ):
        f = concurrent_memory(tmp / f"mem-{len(figures)}", chunk, inflight)
        figures[f"memory: {label}"] = f
        rss, idle = f["peak_rss_mib"], f["idle_rss_mib"]
        print(
            f"  {label:<38} peak RSS {rss:7.0f} MiB (idle {idle:.0f})  all stored in "
            f"{f['seconds']:5.1f} s  {f['refused']:.0f} answered 429"
        )
    print("Small posts (1 span, back to back) while one request of 288k spans is stored:")
    for label, chunk in (
        ("one transaction (before)", ONE_TRANSACTION),
        (f"chunks of {INGEST_CHUNK_SPANS}", INGEST_CHUNK_SPANS),
    ):
        f = small_post_latency(tmp / f"lat-{len(figures)}", chunk)
        figures[f"latency: {label}"] = f
        print(
            f"  {label:<38} {f['small_posts']:.0f} posts  p50 {f['p50_ms']:6.0f} ms  "
            f"p95 {f['p95_ms']:6.0f} ms  max {f['max_ms']:6.0f} ms"
        )
    return figures


@pytest.mark.performance
@pytest.mark.timeout(1800)
def test_bench_ingest_memory(tmp_path: Path) -> None:
    figures = run(tmp_path)
    assert all(f["peak_rss_mib"] > 0 for k, f in figures.items() if k.startswith("memory"))


def main() -> int:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
