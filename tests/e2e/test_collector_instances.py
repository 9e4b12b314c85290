"""Real `ett serve` processes: two collectors on one PostgreSQL (one of them with two worker
processes) agree with the domain's figures whatever the split of a job's spans between them; an
idle connection outlives an export window."""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from ett_collector.domain import SpanRecord, summarize
from ett_collector.schemas import job_json
from tests.support.collector_process import Collector, start_collector
from tests.support.replay import encode_request
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.e2e

BASE = 1_790_000_000.0


def _post(c: Collector, records: list[SpanRecord]) -> None:
    host, port = c.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        body = encode_request(records)
        conn.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
    finally:
        conn.close()


def _figures(job: dict[str, Any]) -> dict[str, Any]:
    """The figures of a job answer, without read-time fields."""
    return {k: v for k, v in job.items() if k not in ("computed_at", "fresh")}


@pytest.mark.postgres
def test_two_collectors_on_one_postgres_give_the_figures_of_the_domain(
    tmp_path: Path, fresh_postgres_url: str
) -> None:
    # finished jobs, so their figures do not depend on either collector's clock
    jobs = {f"pair-{i}": worked_example(f"pair-{i}", base=BASE + 1000 * i) for i in range(6)}
    rng = random.Random(11)
    batches: list[list[SpanRecord]] = []
    for spans in jobs.values():
        shuffled = spans[:]
        rng.shuffle(shuffled)  # out of order: late spans of earlier attempts too
        batches += [shuffled[i : i + 4] for i in range(0, len(shuffled), 4)]
    rng.shuffle(batches)
    # every read checks the database: with the default ETT_READ_RECHECK_S, an answer of one
    # process stays trusted for 0.25 s after another process's save, and the comparison below is
    # of each instance's answers once the other has saved
    exact = {"ETT_READ_RECHECK_S": "0"}
    a = start_collector(tmp_path / "a", db_url=fresh_postgres_url, env=exact)
    b = start_collector(tmp_path / "b", db_url=fresh_postgres_url, workers=2, env=exact)
    try:
        halves = (batches[0::2], batches[1::2])

        def send(c: Collector, part: list[list[SpanRecord]]) -> None:
            for batch in part:
                _post(c, batch)
                if rng.random() < 0.3:  # a read now and then: a recompute in this instance
                    c.get(f"/api/v1/jobs/{batch[0].job_id}")

        senders = [
            threading.Thread(target=send, args=(c, part))
            for c, part in zip((a, b), halves, strict=True)
        ]
        for t in senders:
            t.start()
        for t in senders:
            t.join(timeout=120)
        a.wait_computed()
        for job_id, spans in jobs.items():
            # held out: the domain's figures from the same spans; a finished job's figures do not
            # move with the clock, so any ``now`` after its end gives them
            reference = json.loads(json.dumps(job_json(summarize(spans, time.time(), 10.0))))
            assert _figures(a.job(job_id)) == reference, job_id
            assert _figures(b.job(job_id)) == reference, job_id
    finally:
        a.stop()
        b.stop()


def test_an_idle_connection_outlives_the_export_window(collector: Collector) -> None:
    host, port = collector.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    spans = worked_example("keep-alive", base=BASE)
    try:
        conn.request(
            "POST",
            "/v1/traces",
            encode_request(spans[:5]),
            {"Content-Type": "application/x-protobuf"},
        )
        first = conn.getresponse()
        first.read()
        assert first.status == 200 and not first.will_close
        sock = conn.sock
        local = sock.getsockname()
        time.sleep(6)  # longer than uvicorn's default keep-alive (5 s), as a 10 s exporter idles

        conn.request(
            "POST",
            "/v1/traces",
            encode_request(spans[5:]),
            {"Content-Type": "application/x-protobuf"},
        )
        second = conn.getresponse()
        second.read()
        assert second.status == 200
        assert conn.sock is sock and sock.getsockname() == local  # the same connection
    finally:
        conn.close()
