"""A database outage loses nothing: the collector answers 503 with ``Retry-After`` while the
database cannot take spans, the real OpenTelemetry SDK exporter retries, and every span arrives.

Each test runs an `ett serve` process and an SDK ``TracerProvider`` (``BatchSpanProcessor`` over
``OTLPSpanExporter``, as a user of the plain SDK would) exporting spans throughout, and disturbs
the database mid-ingest:

- PostgreSQL (a server of the test's own, so that stopping it disturbs no other test) stopped for
  15 s (``pg_ctl stop -m fast``: acknowledged commits are on disk) and started again;
- PostgreSQL restarted (``pg_ctl restart``);
- SQLite on a small tmpfs made full by the test, then given room again (needs root to mount; the
  test skips, also under CI, where the machine cannot make a full filesystem).

Then the spans stored must equal the spans sent. The exporter's timeout is raised to 60 s (its
default, 10 s, bounds the retries of a batch to about 8 s of outage; see docs/collector.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from ett import semconv as sc
from tests.conftest import PostgresServer, throwaway_postgres
from tests.support.collector_process import Collector, start_collector
from tests.support.waits import wait_until

OUTAGE_S = 15.0
EXPORT_TIMEOUT_S = 60.0


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone."""
    with throwaway_postgres("ett-pg-outage-") as server:
        yield server


class Exporting:
    """An SDK tracer provider exporting spans to the collector from a thread, until stopped."""

    def __init__(self, collector: Collector, job_id: str, payload: str = "") -> None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        resource = Resource.create({sc.JOB_ID: job_id, sc.ATTEMPT: 0, sc.RANK: 0})
        self.provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=collector.url + "/v1/traces", timeout=EXPORT_TIMEOUT_S)
        self.provider.add_span_processor(
            BatchSpanProcessor(
                exporter,
                max_queue_size=100_000,
                schedule_delay_millis=100,
                max_export_batch_size=50,
            )
        )
        self._tracer = self.provider.get_tracer("outage-test")
        self._payload = payload
        self.sent = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._emit, name="outage-emitter")
        self._thread.start()

    def _emit(self) -> None:
        while not self._done.is_set():
            for _ in range(10):
                with self._tracer.start_as_current_span(sc.SPAN_EVAL) as span:
                    if self._payload:
                        span.set_attribute("payload", self._payload)
                self.sent += 1
            time.sleep(0.05)  # elapsed time, not a wait: 10 spans every 50 ms, a steady trainer

    def finish(self) -> int:
        """Stop emitting, flush every queued span (retries included); returns spans sent."""
        self._done.set()
        self._thread.join()
        assert self.provider.force_flush(int(4 * EXPORT_TIMEOUT_S * 1000))
        self.provider.shutdown()
        return self.sent


def _metric(collector: Collector, name: str, label: str) -> float:
    for line in collector.get("/metrics").text.splitlines():
        if line.startswith(name) and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def _stored(collector: Collector) -> int:
    spans: int = collector.get("/healthz").json()["spans"]
    return spans


def _wait_for_spans(collector: Collector) -> None:
    wait_until(lambda: _stored(collector), what="a span stored before the disturbance")


READS_IN_AN_OUTAGE = ("/api/v1/alerts", "/api/v1/jobs/outage-job", "/api/v1/jobs")
"""Reads answered while the database is down: each a 503 with ``Retry-After``. ``/metrics``
answers 200 with the process's counters and ``ett_database_up 0``."""


def _log(collector: Collector) -> str:
    """What the collector process has written so far (stdout and stderr)."""
    return "".join(p.read_text() for p in collector.home.glob("collector-*.log"))


def _postmaster_started(server: PostgresServer) -> str:
    with psycopg.connect(server.conninfo) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()::text").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.postgres
def test_postgres_stopped_for_15_s_loses_no_span(
    own_postgres: PostgresServer, tmp_path: Path
) -> None:
    collector = start_collector(tmp_path / "home", db_url=own_postgres.create_database("ett"))
    try:
        exporting = Exporting(collector, "outage-job")
        _wait_for_spans(collector)
        own_postgres.halt()
        down = collector.get("/readyz")
        health = collector.get("/healthz")
        reads = {path: collector.get(path) for path in READS_IN_AN_OUTAGE}
        scraped = collector.get("/metrics")
        time.sleep(OUTAGE_S)  # elapsed time, not a wait: the outage lasts 15 s of exports
        own_postgres.launch()
        sent = exporting.finish()

        assert down.status_code == 503 and down.headers["retry-after"]
        assert health.status_code == 200  # liveness holds through the outage
        for path, answer in reads.items():  # 500 is for bugs: an outage is 503, every route
            assert answer.status_code == 503 and answer.headers["retry-after"], (path, answer)
            assert "the database is unavailable" in answer.json()["error"], answer.text
        # a 503 made Prometheus mark the target down and lose the outage's own signal
        assert scraped.status_code == 200, scraped.text
        assert "ett_database_up 0.0" in scraped.text.splitlines()
        assert not [line for line in scraped.text.splitlines() if line.startswith("ett_fleet_")]
        assert "ett_ingest_requests_total" in scraped.text
        refused = _metric(collector, "ett_ingest_requests_total", 'code="503"')
        assert refused > 0, "no export met the outage: the test proved nothing"
        assert _metric(collector, "ett_ingest_requests_total", 'code="500"') == 0
        assert _stored(collector) == sent
        assert collector.get("/readyz").status_code == 200
        assert "ett_database_up 1.0" in collector.get("/metrics").text.splitlines()
        wait_until(lambda: "answers again" in _log(collector), 60, "the loops' recovery line")
        log = _log(collector)
        # each background loop says the outage once, in one line, and once that it is over
        assert "Traceback" not in log, log[-3000:]
        assert 1 <= log.count("the database is unavailable (") <= 4, log[-3000:]
        print(
            f"\n{sent} spans sent across a {OUTAGE_S:.0f} s outage, {refused:.0f} exports "
            "answered 503, none lost"
        )
    finally:
        collector.stop()


@pytest.mark.postgres
def test_postgres_restart_loses_no_span(own_postgres: PostgresServer, tmp_path: Path) -> None:
    collector = start_collector(tmp_path / "home", db_url=own_postgres.create_database("ett"))
    try:
        exporting = Exporting(collector, "restart-job")
        _wait_for_spans(collector)
        before = _postmaster_started(own_postgres)
        own_postgres.restart()
        after = _postmaster_started(own_postgres)
        answered = _metric(collector, "ett_ingest_requests_total", 'code="200"')
        wait_until(  # exports keep coming, on the connections the restart cut
            lambda: _metric(collector, "ett_ingest_requests_total", 'code="200"') > answered,
            what="an export stored after the restart",
        )
        sent = exporting.finish()

        assert after != before, "the server was not restarted"
        assert _metric(collector, "ett_ingest_requests_total", 'code="500"') == 0
        assert _stored(collector) == sent
        refused = _metric(collector, "ett_ingest_requests_total", 'code="503"')
        print(
            f"\n{sent} spans sent across pg_ctl restart, {refused:.0f} exports answered 503, "
            "none lost"
        )
    finally:
        collector.stop()


@contextlib.contextmanager
def _small_tmpfs(size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on a new folder; skips where this machine cannot mount one."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a full filesystem needs a small tmpfs, and mounting one needs root here")
    mountpoint = Path(tempfile.mkdtemp(prefix="ett-full-disk-"))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        mountpoint.rmdir()
        pytest.skip(f"cannot mount a tmpfs to fill (no mount privilege): {done.stderr.strip()}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, capture_output=True)
        mountpoint.rmdir()


def _fill(path: Path) -> None:
    """Write ``path`` until the filesystem has no room left."""
    block = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        with contextlib.suppress(OSError):
            while True:
                f.write(block)
        with contextlib.suppress(OSError):  # the last few bytes too
            while True:
                f.write(b"\0" * 512)


def test_sqlite_full_disk_loses_no_span(tmp_path: Path) -> None:
    with _small_tmpfs("16m") as disk:
        collector = start_collector(tmp_path / "home", db_url=f"sqlite:///{disk / 'ett.db'}")
        try:
            exporting = Exporting(collector, "full-disk-job", payload="x" * 2000)
            _wait_for_spans(collector)
            _fill(disk / "filler")
            wait_until(
                lambda: _metric(collector, "ett_ingest_requests_total", 'code="503"'),
                what="the full disk to refuse a write",
                interval=0.2,
            )
            time.sleep(3.0)  # elapsed time, not a wait: the disk stays full for 3 s of exports
            (disk / "filler").unlink()
            sent = exporting.finish()

            assert _metric(collector, "ett_ingest_requests_total", 'code="500"') == 0
            assert _stored(collector) == sent
            assert collector.get("/readyz").status_code == 200
            refused = _metric(collector, "ett_ingest_requests_total", 'code="503"')
            print(
                f"\n{sent} spans sent across a full disk, {refused:.0f} exports answered 503, "
                "none lost"
            )
        finally:
            collector.stop()
