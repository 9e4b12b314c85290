"""Bad input to ``ett simulate``: a clear error naming the key and the allowed values, exit 2,
nothing sent; and the OTLP encoding read back by the official messages and by the collector."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ett import semconv as sc
from ett_cli import main
from ett_collector.otlp import PROTOBUF_CONTENT_TYPE, decode_traces
from ett_simulator import ProfileError, load_profile, parse_regression
from ett_simulator.wire import Encoder, RankSpans


class _Counter(http.server.BaseHTTPRequestHandler):
    posts = 0

    def do_POST(self) -> None:
        type(self).posts += 1
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    """A listener that only counts POSTs (to prove that nothing was sent)."""
    _Counter.posts = 0
    server = http.server.HTTPServer(("127.0.0.1", 0), _Counter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.mark.parametrize(
    ("profile", "args", "expected"),
    [
        ("[failures]\nrate_per_hour = -1\n", [], "failures.rate_per_hour: must be >= 0"),
        ("[checkpoint]\nintervall_s = 60\n", [], "unknown profile key checkpoint.intervall_s"),
        ("[fleet]\nranks = [1, 0]\nrank_weights = [1, 1]\n", [], "world sizes must be >= 1"),
        ("[failures.causes]\nsegfault = 1\n", [], "allowed keys of [failures.causes] are"),
        ("[colours]\nred = 1\n", [], "unknown profile table [colours]"),
        ("[compile]\nhit_probability_first = 1.5\n", [], "probability in [0, 1]"),
        (
            "",
            ["--regress", "model=bert component=checkpoint factor=2 at=2026-11-01"],
            "model 'bert', which the profile lacks; allowed: dlrm-small, dlrm-large, dcn-v2",
        ),
        (
            "",
            ["--regress", "model=dcn-v2 component=disk factor=2 at=2026-11-01"],
            "unknown component 'disk'; allowed: scheduler",
        ),
        (
            "",
            ["--regress", "model=dcn-v2 component=eval factor=-2 at=2026-11-01"],
            "factor must be a number > 0",
        ),
        (
            "",
            ["--regress", "model=dcn-v2 component=eval factor=2 at=yesterday"],
            "cannot read time 'yesterday'",
        ),
        ("", ["--regress", "model=dcn-v2 component=eval factor=2"], "at= is missing"),
        ("", ["--models", "a,,b"], "write names separated by commas"),
        ("", ["--jobs", "-3"], "jobs must be >= 0"),
        ("", ["--days", "inf"], "days must be a number > 0, got inf"),
        ("", ["--days", "1e9"], "it must lie between 1970-01-01 and 2500-01-01"),
        ("", ["--start", "1960-01-01T00:00:00Z"], "it must lie between 1970-01-01 and 2500-01-01"),
        ("", ["--start", "2999-01-01T00:00:00Z"], "--start 2999-01-01T00:00:00Z: after now ("),
    ],
)
def test_bad_input_exits_2_naming_the_key_and_sends_nothing(
    tmp_path: Path,
    endpoint: str,
    capsys: pytest.CaptureFixture[str],
    profile: str,
    args: list[str],
    expected: str,
) -> None:
    path = tmp_path / "profile.toml"
    path.write_text(profile)
    truth = tmp_path / "truth.jsonl"
    argv = ["simulate", "--endpoint", endpoint, "--profile", str(path), "--jobs", "2"]
    code = main([*argv, "--truth", str(truth), *args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert expected in err
    assert "Traceback" not in err
    assert _Counter.posts == 0
    assert not truth.exists()


def test_a_start_after_now_is_kept_with_live_jobs() -> None:
    """``--live`` keeps its behaviour: its jobs run from now on, whatever ``--start`` says."""
    import argparse

    from ett_simulator.commands import _fleet

    args = argparse.Namespace(
        profile=None,
        models=None,
        teams=None,
        regress=[],
        straggler=[],
        jobs=1,
        days=1.0,
        seed=0,
        start="2400-01-01T00:00:00Z",
        live=1,
    )
    assert _fleet(args).live == 1


def test_a_good_run_sends_and_writes_the_truth(tmp_path: Path, endpoint: str) -> None:
    truth = tmp_path / "truth.jsonl"
    argv = ["simulate", "--endpoint", endpoint, "--jobs", "3", "--days", "1", "--seed", "1"]
    regress = ["--regress", "team=feed component=eval factor=2 at=2026-01-01T00:00:00Z"]
    assert main([*argv, "--truth", str(truth), "--gzip", "--batch", "100", *regress]) == 0
    assert _Counter.posts > 3
    first, *lines = truth.read_text().splitlines()
    assert json.loads(first)["record"] == "regression"
    assert len(lines) >= 3 and all('"wall_s"' in line for line in lines)


def test_an_unreachable_database_is_one_line_without_its_password(capsys) -> None:
    from tests.support.ports import free_port

    url = f"postgresql+psycopg://me:s3cret@127.0.0.1:{free_port()}/fleet"
    assert main(["simulate", "--jobs", "2", "--days", "1", "--db", url]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("ett simulate: cannot open database 'postgresql+psycopg://me:***@")
    assert "s3cret" not in err and "sqlalche.me" not in err and "\n" not in err, err


def test_profile_errors_are_profile_errors() -> None:
    with pytest.raises(ProfileError, match="teams"):
        load_profile(overrides={"fleet": {"teams": []}})
    with pytest.raises(ProfileError, match="give exactly one of model= or team="):
        parse_regression("model=a team=b component=eval factor=2 at=2026-01-01")


def test_encoding_reads_back_with_the_official_messages_and_the_collector() -> None:
    rank = RankSpans("job-1", 2, 3, 4, "m", "t", bytes(range(1, 17)), 41)
    rank.add(
        sc.SPAN_CHECKPOINT_SAVE,
        1_790_000_000_123,
        1_790_000_001_456,
        ((sc.CHECKPOINT_STEP, 300), (sc.CHECKPOINT_MODE, "async")),
    )
    rank.add(
        sc.SPAN_PUBLISH,
        1_790_000_002_000,
        1_790_000_003_000,
        ((sc.PUBLISH_STANDALONE, True), ("x.ratio", 0.5)),
    )
    bodies = list(Encoder().requests([rank], batch_spans=1))
    assert [n for _, n in bodies] == [1, 1]
    request = ExportTraceServiceRequest.FromString(bodies[0][0] + bodies[1][0])
    spans = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    resource = {kv.key: kv.value for kv in request.resource_spans[0].resource.attributes}
    assert resource[sc.JOB_ID].string_value == "job-1"
    assert resource[sc.ATTEMPT].int_value == 2 and resource[sc.RANK].int_value == 3
    assert spans[0].name == sc.SPAN_CHECKPOINT_SAVE
    assert spans[0].start_time_unix_nano == 1_790_000_000_123_000_000
    assert spans[0].end_time_unix_nano == 1_790_000_001_456_000_000
    assert spans[0].trace_id == bytes(range(1, 17))
    assert int.from_bytes(spans[0].span_id, "little") == 41
    assert int.from_bytes(spans[1].span_id, "little") == 42
    attrs = {kv.key: kv.value for kv in spans[1].attributes}
    assert attrs[sc.PUBLISH_STANDALONE].bool_value is True
    assert attrs["x.ratio"].double_value == 0.5
    records = decode_traces(bodies[0][0], PROTOBUF_CONTENT_TYPE, None, 1 << 20).records
    assert len(records) == 1 and records[0].job_id == "job-1" and records[0].attempt == 2
    assert records[0].attributes[sc.CHECKPOINT_STEP] == 300
    assert records[0].start == pytest.approx(1_790_000_000.123)


def test_a_second_fleet_of_the_same_seed_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Two runs of the same command into one database wrote the second week into the first's
    jobs (their ids are the seed's), shifted by the time between the runs: a negative time to
    recover, ETT changed, no word. The second is refused; a replay (the same --start) and
    another seed are not."""
    from ett_collector.storage import Store

    db = f"sqlite:///{tmp_path / 'fleet.db'}"
    argv = ["simulate", "--jobs", "6", "--days", "1", "--db", db]
    assert main(argv) == 0
    store = Store(db)
    before = store.job_ids()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "sim0-00000 and the other jobs of --seed 0 are there already" in err
    assert "--seed 1" in err and "Traceback" not in err
    assert store.job_ids() == before  # nothing written
    assert main([*argv, "--seed", "1"]) == 0
    start = ["--start", "2026-01-01T00:00:00Z"]
    assert main([*argv, "--seed", "2", *start]) == 0
    assert main([*argv, "--seed", "2", *start]) == 0  # the same history again changes nothing
    assert len(store.job_ids()) > len(before)
    store.close()


def test_the_sender_takes_a_full_traces_url_and_names_an_html_answer() -> None:
    """``--endpoint http://host:4318/v1/traces`` was sent to ``/v1/traces/v1/traces`` (a 404
    naming the URL typed, not the one posted to), and a web server's HTML error page was
    printed whole as the error."""
    from ett_simulator.sinks import EndpointSink, SendError
    from tests.support.otlp_receiver import OtlpReceiver

    with OtlpReceiver(status=200) as rx:
        sink = EndpointSink(rx.url + "/v1/traces")
        assert sink.send(b"", 3) == 3
        assert [r.path for r in rx.requests] == ["/v1/traces"]
        assert sink.delivered == 3
        sink.close()

    page = b"<!DOCTYPE html>\n<html><body>\n<h1>Error 501</h1>\n</body></html>\n"
    with (
        OtlpReceiver(status=501, body=page, content_type="text/html") as html,
        pytest.raises(SendError) as caught,
    ):
        EndpointSink(html.url).send(b"", 1)
    assert "\n" not in str(caught.value) and "an HTML page" in str(caught.value)
