"""A real `ett serve`, spans sent by opentelemetry-sdk's OTLP/HTTP exporter, figures read back."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.collector_process import Collector, start_collector
from tests.support.figures import WORKED_EXAMPLE, WORKED_EXAMPLE_LOST_BY_COMPONENT
from tests.support.replay import encode_request, send_spans
from tests.support.worked_example import worked_example

pytestmark = pytest.mark.e2e

EXPECTED = WORKED_EXAMPLE


def _check_worked_example(c: Collector, job_id: str) -> dict:
    job = c.job(job_id)
    for key, value in EXPECTED.items():
        if isinstance(value, (float, list)):
            assert job[key] == pytest.approx(value), key
        else:
            assert job[key] == value, key
    assert job["lost_by_component"] == pytest.approx(WORKED_EXAMPLE_LOST_BY_COMPONENT)
    assert [a["attempt"] for a in job["attempts"]] == [0, 1]
    assert job["attempts"][0]["critical_rank"] == 0
    return job


def test_sdk_exporter_to_sqlite_collector(collector: Collector) -> None:
    base = 1_790_000_000.0
    spans = worked_example("e2e-sqlite", base=base)
    assert send_spans(spans, collector.url) == len(spans)
    job = _check_worked_example(collector, "e2e-sqlite")
    assert job["alloc"] == pytest.approx(base)

    segs = collector.get("/api/v1/jobs/e2e-sqlite/segments").json()
    assert sum(s["duration_s"] for s in segs) == pytest.approx(500)

    lost = collector.get(
        "/api/v1/lost-time", group_by="component", since=str(base), until=str(base + 500)
    ).json()
    assert lost[0]["key"] == "scheduler" and lost[0]["lost_s"] == pytest.approx(60)
    assert sum(r["lost_s"] for r in lost) == pytest.approx(200)
    # a window clips: only [base, base+100] → start-up 50 idle, nothing else lost
    clipped = collector.get(
        "/api/v1/lost-time", group_by="job", since=str(base), until=str(base + 100)
    ).json()
    assert clipped == [
        {
            "key": "e2e-sqlite",
            "idle_s": pytest.approx(50),
            "failure_s": pytest.approx(0),
            "lost_s": pytest.approx(50),
        }
    ]

    listed = collector.get("/api/v1/jobs", state="completed").json()
    assert [j["job_id"] for j in listed] == ["e2e-sqlite"]


def test_replay_changes_nothing_and_out_of_order_recomputes(collector: Collector) -> None:
    spans = worked_example("e2e-order", base=1_790_000_000.0)
    attempt1 = [s for s in spans if s.attempt == 1]
    attempt0 = [s for s in spans if s.attempt == 0]
    send_spans(attempt1, collector.url)
    early = collector.job("e2e-order")
    assert early["failures"] == 0 and early["state"] == "completed"
    send_spans(attempt0, collector.url)  # late spans of an earlier attempt arrive after
    _check_worked_example(collector, "e2e-order")
    assert collector.job("e2e-order")["span_count"] == len(spans)
    body = encode_request(worked_example("e2e-replay", base=1_790_000_000.0))
    for _ in range(2):  # the same request twice: the second changes nothing
        r = httpx.post(
            collector.url + "/v1/traces",
            content=body,
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert r.status_code == 200
        job = _check_worked_example(collector, "e2e-replay")
        assert job["span_count"] == len(spans)


def test_cli_report_and_lost_time_read_the_same_figures(collector: Collector) -> None:
    spans = worked_example("e2e-cli", base=1_790_000_000.0)
    send_spans(spans, collector.url)
    api = collector.job("e2e-cli")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ett_cli",
            "report",
            "e2e-cli",
            "--json",
            "--db",
            collector.db_url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    cli = json.loads(out.stdout)
    for key in EXPECTED:
        assert cli[key] == api[key]
    table = subprocess.run(
        [
            sys.executable,
            "-m",
            "ett_cli",
            "lost-time",
            "--by",
            "component",
            "--since",
            "1790000000",
            "--db",
            collector.db_url,
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "scheduler" in table and "Lost time by component" in table
    missing = subprocess.run(
        [sys.executable, "-m", "ett_cli", "report", "nope", "--db", collector.db_url],
        capture_output=True,
        text=True,
    )
    assert missing.returncode == 1 and "no job 'nope'" in missing.stderr


def test_bad_input_is_refused_and_the_service_keeps_serving(collector: Collector) -> None:
    url = collector.url + "/v1/traces"
    bad = httpx.post(
        url, content=b"\xff\x00garbage", headers={"Content-Type": "application/x-protobuf"}
    )
    assert bad.status_code == 400
    wrong = httpx.post(url, content=b"{}", headers={"Content-Type": "text/plain"})
    assert wrong.status_code == 415
    bomb = gzip.compress(b"\x00" * (40 * 1024 * 1024))
    big = httpx.post(
        url,
        content=bomb,
        headers={"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"},
    )
    assert big.status_code == 413
    # still serving: a good request lands
    spans = worked_example("e2e-after-bad", base=1_790_000_000.0)
    send_spans(spans, collector.url)
    _check_worked_example(collector, "e2e-after-bad")


def test_partial_success_for_spans_without_identity(collector: Collector) -> None:
    start = time.time_ns() - 60 * 10**9  # a minute ago: spans from 1970 are refused anyway
    body = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "x"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "0" * 31 + "1",
                                "spanId": "0" * 15 + "1",
                                "name": "ett.eval",
                                "startTimeUnixNano": str(start),
                                "endTimeUnixNano": str(start + 10**9),
                            },
                            {
                                "traceId": "0" * 31 + "1",
                                "spanId": "0" * 15 + "2",
                                "name": "ett.eval",
                                "startTimeUnixNano": str(start),
                                "endTimeUnixNano": str(start + 10**9),
                                "attributes": [
                                    {"key": "ett.job.id", "value": {"stringValue": "partial"}},
                                    {"key": "ett.attempt", "value": {"intValue": "0"}},
                                    {"key": "ett.rank", "value": {"intValue": "0"}},
                                ],
                            },
                        ]
                    }
                ],
            }
        ]
    }
    r = httpx.post(collector.url + "/v1/traces", json=body)
    assert r.status_code == 200
    partial = r.json()["partialSuccess"]
    assert int(partial["rejectedSpans"]) == 1 and "ett.job.id" in partial["errorMessage"]
    assert collector.job("partial")["span_count"] == 1


def test_bearer_token(tmp_path: Path) -> None:
    c = start_collector(tmp_path / "home", token="s3cret")
    try:
        spans = worked_example("e2e-token", base=1_790_000_000.0)
        assert httpx.get(c.url + "/api/v1/jobs").status_code == 401
        assert send_spans(spans, c.url) == 0  # no token: refused, nothing stored
        assert c.get("/api/v1/jobs").json() == []
        sent = send_spans(spans, c.url, headers={"Authorization": "Bearer s3cret"})
        assert sent == len(spans)
        _check_worked_example(c, "e2e-token")
    finally:
        c.stop()


@pytest.mark.postgres
def test_sdk_exporter_to_postgres_collector(tmp_path: Path, postgres_url: str) -> None:
    c = start_collector(tmp_path / "home", db_url=postgres_url)
    try:
        spans = worked_example("e2e-pg", base=1_790_000_000.0)
        send_spans(spans, c.url)
        _check_worked_example(c, "e2e-pg")
    finally:
        c.stop()


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_count_accepted_rejected_and_unknown(collector: Collector) -> None:
    spans = worked_example("e2e-metrics", base=1_790_000_000.0)
    send_spans(spans, collector.url)
    # fmt: off
    body = {"resourceSpans": [{"resource": {"attributes": [
        {"key": "ett.job.id", "value": {"stringValue": "e2e-metrics"}},
        {"key": "ett.attempt", "value": {"intValue": "1"}},
        {"key": "ett.rank", "value": {"intValue": "0"}}]},
        "scopeSpans": [{"spans": [{
            "traceId": "a" * 32, "spanId": "b" * 16, "name": "ett.something_new",
            "startTimeUnixNano": "1790000450000000000", "endTimeUnixNano": "1790000451000000000",
            "attributes": [{"key": "ett.future_attribute", "value": {"boolValue": True}}]}]}]}]}
    # fmt: on
    assert httpx.post(collector.url + "/v1/traces", json=body).status_code == 200
    text = collector.get("/metrics").text
    assert _metric(text, 'ett_ingest_spans_total{outcome="accepted",') == len(spans) + 1
    assert _metric(text, "ett_ingest_unknown_span_names_total") == 1
    assert _metric(text, "ett_ingest_unknown_attributes_total") == 1
    # the unknown span is kept and changes nothing in the figures
    job = _check_worked_example(collector, "e2e-metrics")
    assert job["span_count"] == len(spans) + 1


def test_live_job_is_running_then_presumed_dead(tmp_path: Path) -> None:
    import time

    from ett import semconv as sc
    from tests.support.spans import span

    c = start_collector(tmp_path / "home")
    try:
        now = time.time()
        spans = [
            span(name, now + a, now + b, job="e2e-live", trace_id="1" * 32, **extra)
            for name, a, b, extra in [
                (sc.startup_span_name("pg_init"), -30, -25, {}),
                (sc.SPAN_FIRST_BATCH, -21, -20, {}),
                (sc.SPAN_CHECKPOINT_SAVE, -15, -14, {sc.CHECKPOINT_STEP: 10}),
                (sc.SPAN_TRAIN_WINDOW, -20, -1, {}),
            ]
        ]
        send_spans(spans, c.url)
        job = c.job("e2e-live")
        assert job["state"] == "running"
        assert job["wall_s"] >= 30 and job["at_risk_s"] > 10 and job["unsaved_s"] == 0
    finally:
        c.stop()


def test_several_worker_processes_share_the_database(tmp_path: Path) -> None:
    c = start_collector(tmp_path / "home", workers=2)
    try:
        jobs = [worked_example(f"e2e-workers-{i}", base=1_790_000_000.0) for i in range(6)]
        for spans in jobs:  # separate requests, spread over both workers
            assert send_spans(spans, c.url) == len(spans)
        for i in range(6):
            _check_worked_example(c, f"e2e-workers-{i}")
        text = c.get("/metrics").text  # summed over both processes
        assert _metric(text, 'ett_ingest_spans_total{outcome="accepted",') == sum(map(len, jobs))
    finally:
        c.stop()
