"""The spool on disk (``ett._spool``, ``ett._backlog``): its records survive truncation and
corruption up to the last whole one, files are private and never shared between processes,
jobs or ranks, and the size bound drops the newest ordinary spans first, counted."""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ett import semconv
from ett._backlog import Backlog
from ett._config import Identity, resolve_spool
from ett._export import is_priority
from ett._spool import (
    FILE_HEADER,
    KIND_BATCH,
    KIND_DROPS,
    Scan,
    SpoolWriter,
    batch_record,
    drops_record,
    private_dir,
    safe_name,
)
from ett._spool_send import Drained, Sender, drain_file
from tests.support.ports import free_port


def _identity(job: str = "job/1", rank: int = 0, attempt: int = 0) -> Identity:
    return Identity(job_id=job, attempt=attempt, rank=rank, world_size=2, allocated_at=0.0)


def _spans(names: list[str], payload: str = "") -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    for name in names:
        tracer.start_span(name, attributes={"payload": payload}).end()
    return list(exporter.get_finished_spans())


def _file(records: list[bytes]) -> bytes:
    return FILE_HEADER + b"".join(records)


def test_every_truncation_reads_the_whole_records_before_it() -> None:
    records = [batch_record(3, b"a" * 50), drops_record(7), batch_record(1, b"b" * 20)]
    data = _file(records)
    ends = [len(FILE_HEADER)]
    for record in records:
        ends.append(ends[-1] + len(record))
    for cut in range(len(data) + 1):
        scan = Scan(io.BytesIO(data[:cut]))
        got = list(scan)  # never raises
        whole = [end for end in ends[1:] if end <= cut]
        assert [end for end, _ in got] == whole, cut
        header = len(FILE_HEADER) if cut >= len(FILE_HEADER) else 0
        assert scan.good_end == (whole[-1] if whole else header), cut
        assert (scan.problem is None) == (cut in ends), cut
    kinds = [(r.kind, r.spans, r.drops) for _, r in Scan(io.BytesIO(data))]
    assert kinds == [(KIND_BATCH, 3, 0), (KIND_DROPS, 0, 7), (KIND_BATCH, 1, 0)]


def test_a_corrupted_record_stops_the_reading_there() -> None:
    first, second = batch_record(2, b"x" * 40), batch_record(2, b"y" * 40)
    data = bytearray(_file([first, second, drops_record(1)]))
    data[len(FILE_HEADER) + len(first) + 20] ^= 0xFF  # a byte of the second payload
    scan = Scan(io.BytesIO(bytes(data)))
    assert [r.body for _, r in scan] == [b"x" * 40]
    assert scan.good_end == len(FILE_HEADER) + len(first)
    assert scan.problem is not None and "checksum" in scan.problem
    garbage = Scan(io.BytesIO(b"\x00" * 100))
    assert list(garbage) == [] and garbage.problem is not None


def test_files_and_folders_are_the_owners_alone(tmp_path: Path) -> None:
    root = tmp_path / "spool"
    root.mkdir(mode=0o755)
    root.chmod(0o755)  # a wider folder of ours is narrowed
    writer = SpoolWriter(root, _identity())
    assert writer.append(batch_record(1, b"z"))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_IMODE(writer.job_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(writer.path.stat().st_mode) == 0o600
    assert writer.job_dir.name == safe_name("job/1") and "/" not in writer.job_dir.name
    writer.close()  # pending records: the file stays for a reader
    assert writer.path.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder of another user")
def test_a_folder_of_another_user_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "theirs"
    root.mkdir(mode=0o700)
    os.chown(root, 65534, 65534)
    writer = SpoolWriter(root, _identity())
    assert not writer.append(batch_record(1, b"z")) and writer.failed


def test_ranks_and_jobs_never_share_a_file(tmp_path: Path) -> None:
    writers = [
        SpoolWriter(tmp_path, _identity("a", rank=0)),
        SpoolWriter(tmp_path, _identity("a", rank=1)),
        SpoolWriter(tmp_path, _identity("b", rank=0)),
        SpoolWriter(tmp_path, _identity("a", rank=0, attempt=1)),
    ]
    for i, writer in enumerate(writers):
        assert writer.append(batch_record(1, bytes([i]) * 10))
    assert len({w.path for w in writers}) == 4
    assert {w.job_dir.name for w in writers} == {"a", "b"}
    for i, writer in enumerate(writers):
        with open(writer.path, "rb") as f:
            assert [r.body for _, r in Scan(f)] == [bytes([i]) * 10]


def test_a_file_held_by_a_live_process_is_left_to_it(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path, _identity())
    assert writer.append(batch_record(1, b"live"))
    sender = Sender(f"http://127.0.0.1:{free_port()}/v1/traces", {}, timeout_s=1.0)
    out = Drained()
    drain_file(writer.path, sender, out, deadline=float("inf"))
    assert out.skipped_live == 1 and out.files == 0 and writer.path.exists()
    writer.close()
    out = Drained()  # now free: read, but the collector does not answer: all kept
    drain_file(writer.path, sender, out, deadline=float("inf"))
    assert out.files == 1 and out.stopped is None and out.records == 0
    with open(writer.path, "rb") as f:
        assert [r.body for _, r in Scan(f)] == [b"live"]


def test_a_full_spool_drops_the_newest_ordinary_spans_and_counts_them(tmp_path: Path) -> None:
    writer = SpoolWriter(tmp_path, _identity())
    sender = Sender(f"http://127.0.0.1:{free_port()}/v1/traces", {}, timeout_s=1.0)
    backlog = Backlog(writer, sender, max_bytes=20_000, is_priority=is_priority)
    stored = 0
    for _ in range(10):  # ~5 KB a batch: the fifth does not fit
        assert backlog.store(_spans([semconv.SPAN_EVAL] * 4, payload="p" * 1000))
        stored += 4
    assert 0 < backlog.dropped < stored
    assert backlog.store(_spans([semconv.SPAN_FAILURE, semconv.SPAN_EVAL], payload="q" * 6000))
    with open(writer.path, "rb") as f:
        records = [r for _, r in Scan(f)]
    kept = sum(r.spans for r in records if r.kind == KIND_BATCH)
    lost = sum(r.drops for r in records if r.kind == KIND_DROPS)
    assert kept + lost == stored + 2 and lost == backlog.dropped
    assert records[-2].kind == KIND_BATCH and records[-2].spans == 1  # the failure, in reserve
    assert writer.size <= 20_000 + (1 << 20)


def test_spool_settings() -> None:
    assert resolve_spool({}) == (None, 256 << 20)
    assert resolve_spool({"ETT_SPOOL_DIR": "/x", "ETT_SPOOL_MAX_MB": "1.5"}) == ("/x", 3 << 19)
    assert resolve_spool({"ETT_SPOOL_DIR": "off"}) == ("", 0)
    assert resolve_spool({"ETT_SPOOL_MAX_MB": "0"}) == ("", 0)


def test_private_dir_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert not private_dir(tmp_path / "f")


def _flush(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "ett", "flush", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_the_flush_command_answers_in_one_line(tmp_path: Path) -> None:
    helped = _flush("--help")
    assert helped.returncode == 0 and "--spool-dir" in helped.stdout
    assert "$XDG_STATE_HOME/ett/spool" in helped.stdout and "(default 300)" in helped.stdout
    empty = _flush("--spool-dir", str(tmp_path / "none"))
    assert empty.returncode == 0 and "nothing to deliver" in empty.stdout
    bad = _flush("--timeout", "0")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
    writer = SpoolWriter(tmp_path, _identity())
    assert writer.append(batch_record(1, b"z"))
    writer.close()
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"}
    down = _flush("--spool-dir", str(tmp_path), env=env)
    assert down.returncode == 1 and "did not answer" in down.stderr
    assert "1 file left in" in down.stderr  # "1 files left" before
    assert "Traceback" not in down.stderr and writer.path.exists()
    for url in ("htp://127.0.0.1:4318", "127.0.0.1:4318", "http://127.0.0.1:99999"):
        typo = _flush("--spool-dir", str(tmp_path), "--endpoint", url)
        assert typo.returncode == 2 and typo.stderr.count("\n") == 1, typo.stderr
        assert "not an http:// or https:// URL" in typo.stderr and writer.path.exists()


def test_the_flush_line_counts_in_words(tmp_path: Path, capsys) -> None:
    """It printed "delivered 1 spans (1 batches) from 1 files"."""
    from ett._flush import _report
    from ett._spool_send import Drained

    one = Drained(files=1, records=1, spans=1, skipped_live=1, dropped_full=1)
    assert _report(one, tmp_path, None) == 0  # type: ignore[arg-type]  # complete: no sender
    out = capsys.readouterr().out
    assert "delivered 1 span (1 batch) from 1 file; 1 file held by running" in out
    assert "; 1 span had been lost" in out
    assert _report(Drained(files=2, records=3, spans=4), tmp_path, None) == 0  # type: ignore[arg-type]
    assert "delivered 4 spans (3 batches) from 2 files\n" in capsys.readouterr().out


def test_an_attempt_ending_while_the_collector_is_away_loses_nothing() -> None:
    import time

    import ett

    root = Path(os.environ["ETT_SPOOL_DIR"])  # the test's own (tests/conftest.py)
    sess = ett.init(
        job_id="away",
        endpoint=f"http://127.0.0.1:{free_port()}",
        install_handlers=False,
        window_s=0.05,
        exit_timeout_s=0,
    )
    sess.first_batch()
    for step in range(5):
        with sess.checkpoint_save(step):
            sess.step()
    started = time.monotonic()
    sess.end()
    assert time.monotonic() - started < 2.0  # the exit is not held by the outage
    assert sess.dropped_spans == 0
    [path] = list(root.glob("away/*.spool"))
    with open(path, "rb") as f:
        spans = sum(record.spans for _, record in Scan(f))
    assert spans >= 5 + 2  # the saves, the first batch and the attempt at least
    assert b"ett.attempt" in path.read_bytes()


@pytest.mark.parametrize("endpoint", ["notaurl/v1/traces", "collector/v1/traces", "ftp://x/v1"])
def test_the_spool_sender_answers_none_for_a_url_it_cannot_send_to(endpoint: str) -> None:
    """OTEL_EXPORTER_OTLP_ENDPOINT=collector (no scheme) raised ValueError out of the
    sender, which ended the export thread with a traceback: every later span was left queued."""
    from ett._spool_send import Sender

    assert Sender(endpoint, {}).send(b"") is None


def test_spans_rejected_from_the_spool_count_as_dropped() -> None:
    """The spool's sender said the collector's partial success but did not count it: spans
    rejected on a delivery from disk were missing from dropped_spans."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    from ett._answers import HttpStatus
    from tests.support.otlp_receiver import OtlpReceiver

    answer = ExportTraceServiceResponse()
    answer.partial_success.rejected_spans = 2
    answer.partial_success.error_message = "2 spans rejected: span 'x' has ett.rank -1"
    status = HttpStatus()
    with OtlpReceiver(status=200, body=answer.SerializeToString()) as rx:
        assert Sender(rx.url + "/v1/traces", {}, status=status).send(b"") == 200
    assert status.rejected == 2 and status.count == 1
