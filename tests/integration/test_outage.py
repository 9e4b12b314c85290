"""A database outage loses nothing: the collector answers 503 with ``Retry-After`` while the
database is gone, the real OpenTelemetry SDK exporter retries, and every span arrives.

The test runs a PostgreSQL server of its own (so that stopping it disturbs no other test), an
`ett serve` process on it, and an SDK ``TracerProvider`` exporting spans throughout; it stops
the server for a few seconds mid-ingest (``pg_ctl stop -m fast``: acknowledged commits are on
disk) and starts it again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from instrument import semconv as sc
from tests.conftest import (
    PG_MISSING,
    PG_SUPERUSER,
    PostgresServer,
    _find_pg_bindir,
    _server_user_prefix,
)
from tests.support.collector_process import Collector, start_collector
from tests.support.ports import free_port

pytestmark = pytest.mark.postgres

OUTAGE_S = 5.0


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone."""
    bindir = _find_pg_bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail(PG_MISSING)
        pytest.skip(PG_MISSING)
    prefix = _server_user_prefix()
    root = Path(tempfile.mkdtemp(prefix="ett-pg-outage-"))
    if prefix:
        shutil.chown(root, user=PG_SUPERUSER, group=None)
    server = PostgresServer(bindir=bindir, root=root, port=free_port(), prefix=prefix)
    try:
        server.start()
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _stop_fast(server: PostgresServer) -> None:
    pg_ctl = str(server.bindir / "pg_ctl")
    subprocess.run(
        [*server.prefix, pg_ctl, "-D", str(server.datadir), "-m", "fast", "-w", "stop"],
        check=True,
        capture_output=True,
        timeout=60,
    )


def _metric(collector: Collector, name: str, label: str) -> float:
    for line in collector.get("/metrics").text.splitlines():
        if line.startswith(name) and label in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_postgres_outage_loses_no_span(own_postgres: PostgresServer, tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    db_url = own_postgres.create_database("ett")
    collector = start_collector(tmp_path / "home", db_url=db_url)
    try:
        resource = Resource.create({sc.JOB_ID: "outage-job", sc.ATTEMPT: 0, sc.RANK: 0})
        provider = TracerProvider(resource=resource)
        exporter = OTLPSpanExporter(endpoint=collector.url + "/v1/traces", timeout=60)
        provider.add_span_processor(
            BatchSpanProcessor(
                exporter,
                max_queue_size=100_000,
                schedule_delay_millis=100,
                max_export_batch_size=50,
            )
        )
        tracer = provider.get_tracer("outage-test")
        sent = 0
        done = threading.Event()

        def emit() -> None:
            nonlocal sent
            while not done.is_set():
                for _ in range(10):
                    with tracer.start_as_current_span(sc.SPAN_EVAL):
                        pass
                    sent += 1
                time.sleep(0.05)

        emitter = threading.Thread(target=emit)
        emitter.start()
        time.sleep(1.5)
        stored_before = collector.get("/healthz").json()["spans"]
        _stop_fast(own_postgres)
        down = collector.get("/readyz")
        health = collector.get("/healthz")
        time.sleep(OUTAGE_S)
        own_postgres.launch()
        time.sleep(1.5)
        done.set()
        emitter.join()
        assert provider.force_flush(120_000)
        provider.shutdown()

        assert stored_before > 0
        assert down.status_code == 503 and down.headers["retry-after"]
        assert health.status_code == 200  # liveness holds through the outage
        refused = _metric(collector, "ett_ingest_requests_total", 'code="503"')
        assert refused > 0, "no export met the outage: the test proved nothing"
        assert _metric(collector, "ett_ingest_requests_total", 'code="500"') == 0
        assert collector.get("/healthz").json()["spans"] == sent
        assert collector.get("/readyz").status_code == 200
        print(f"\n{sent} spans sent, {refused:.0f} exports answered 503, none lost")
    finally:
        collector.stop()
