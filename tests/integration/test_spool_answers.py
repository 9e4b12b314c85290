"""What the collector's answer makes of a spooled record (``ett._spool_send.verdict``), against
a real `ett serve` with a token: a wrong token keeps every record (the settings are wrong, not
the spans); with the right one, a record the collector refuses for good (400: not a request)
is dropped and counted, the others are delivered and stored, and the file is removed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ett import semconv
from ett._backlog import encode
from ett._config import Identity
from ett._spool import Scan, SpoolWriter, batch_record
from ett._spool_send import Drained, Sender, drain_file
from tests.support.collector_process import start_collector

TOKEN = "spool-answers-token-77c1"


def _request(identity: Identity, n: int) -> bytes:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(identity.attributes()))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("t")
    for _ in range(n):
        tracer.start_span(semconv.SPAN_EVAL).end()
    return encode(memory.get_finished_spans())


def test_the_answer_decides_what_a_spooled_record_becomes(tmp_path: Path) -> None:
    identity = Identity(job_id="answers", attempt=0, rank=0, world_size=1, allocated_at=1.0)
    writer = SpoolWriter(tmp_path / "spool", identity)
    assert writer.append(
        batch_record(2, b"\xffnot a request") + batch_record(3, _request(identity, 3))
    )
    writer.close()
    collector = start_collector(tmp_path / "home", token=TOKEN)
    try:
        url = collector.url + "/v1/traces"
        wrong = Drained()
        drain_file(writer.path, Sender(url, {"authorization": "Bearer nope"}), wrong, 1e18)
        assert wrong.stopped == 401 and wrong.spans == 0 and writer.path.exists()
        with open(writer.path, "rb") as f:
            assert [r.spans for _, r in Scan(f)] == [2, 3]  # both kept
        right = Drained()
        sender = Sender(url, {"authorization": f"Bearer {TOKEN}"})
        drain_file(writer.path, sender, right, 1e18)
        assert right.complete and right.dropped_refused == 2 and right.spans == 3
        assert not writer.path.exists()
        collector.wait_computed()
        db = collector.db_url.removeprefix("sqlite:///")
        with sqlite3.connect(db) as conn:
            query = "SELECT count(*) FROM spans WHERE job_id = 'answers'"
            assert conn.execute(query).fetchone()[0] == 3
    finally:
        collector.stop()
