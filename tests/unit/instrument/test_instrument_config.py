"""Identity and endpoint from arguments and the environment."""

from __future__ import annotations

import os
import socket
import time

import pytest

from ett import _errors, semconv
from ett._config import (
    DEFAULT_EXIT_TIMEOUT_S,
    DEFAULT_FLUSH_TIMEOUT_S,
    DEFAULT_SPOOL_MAX_MB,
    ddp_waits_enabled,
    endpoint_usable,
    env_disabled,
    process_start_time,
    resolve_endpoint,
    resolve_exit_timeout,
    resolve_flush_timeout,
    resolve_identity,
    resolve_spool,
)
from ett._persist import DEFAULT_PERSIST_WAIT_S, resolve_persist_wait


def test_identity_from_environment() -> None:
    env = {
        "ETT_JOB_ID": "job-7",
        "ETT_MODEL": "dlrm",
        "ETT_TEAM": "ads",
        "TORCHELASTIC_RESTART_COUNT": "0",
        "RANK": "5",
        "WORLD_SIZE": "16",
        "ETT_ALLOCATED_AT": "1700000000.5",
        "OTEL_SERVICE_NAME": "trainer-x",
    }
    ident = resolve_identity(env=env)
    assert ident.job_id == "job-7"
    assert ident.model == "dlrm"
    assert ident.team == "ads"
    assert ident.attempt == 0
    assert (ident.rank, ident.world_size) == (5, 16)
    assert ident.allocated_at == 1700000000.5
    assert ident.service_name == "trainer-x"
    assert ident.host_name == socket.gethostname()
    attrs = ident.attributes()
    assert attrs[semconv.JOB_ID] == "job-7"
    assert attrs[semconv.RANK] == 5


def test_arguments_win_over_environment() -> None:
    env = {"ETT_JOB_ID": "env-job", "RANK": "5", "ETT_ATTEMPT": "3"}
    ident = resolve_identity(job_id="arg-job", rank=1, attempt=0, allocated_at=5.0, env=env)
    assert (ident.job_id, ident.rank, ident.attempt, ident.allocated_at) == ("arg-job", 1, 0, 5.0)


def test_attempt_override_beats_torchelastic() -> None:
    env = {"ETT_JOB_ID": "j", "TORCHELASTIC_RESTART_COUNT": "2", "ETT_ATTEMPT": "9"}
    assert resolve_identity(env=env).attempt == 9
    assert resolve_identity(env={"ETT_JOB_ID": "j", "TORCHELASTIC_RESTART_COUNT": "2"}).attempt == 2
    assert resolve_identity(env={"ETT_JOB_ID": "j"}).attempt == 0


def test_elastic_restart_ignores_the_first_allocation_time() -> None:
    env = {"ETT_JOB_ID": "j", "TORCHELASTIC_RESTART_COUNT": "1", "ETT_ALLOCATED_AT": "100"}
    ident = resolve_identity(env=env)
    assert ident.allocated_at == pytest.approx(process_start_time(), abs=1.0)
    env["ETT_ATTEMPT"] = "1"  # a scheduler retry sets its own allocation time
    assert resolve_identity(env=env).allocated_at == 100.0


def test_defaults_and_bad_values() -> None:
    ident = resolve_identity(env={"RANK": "x", "WORLD_SIZE": "", "ETT_ALLOCATED_AT": "soon"})
    assert ident.job_id == f"{socket.gethostname()}-{os.getpid()}"
    assert (ident.rank, ident.world_size, ident.attempt) == (0, 1, 0)
    assert ident.allocated_at == pytest.approx(process_start_time(), abs=1.0)
    assert ident.model is None
    assert semconv.MODEL not in ident.attributes()


@pytest.mark.parametrize("raw", ["1796548129621", "99999999999", "-5", "0"])
def test_an_allocation_time_that_is_not_unix_seconds_is_said_and_ignored(
    raw: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Milliseconds (``date +%s%3N``) overflowed the exporter's nanoseconds and stopped every
    export of the process; such a value is now ignored, in one warning."""
    from ett import _errors

    _errors._seen.discard("config.ETT_ALLOCATED_AT.range")  # said once per process
    ident = resolve_identity(env={"ETT_JOB_ID": "j", "ETT_ALLOCATED_AT": raw})
    assert ident.allocated_at == pytest.approx(process_start_time(), abs=1.0)
    assert f"ignoring ETT_ALLOCATED_AT={raw!r}: not unix seconds up to now" in caplog.text


def test_a_negative_attempt_or_rank_is_said_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """The collector rejects every span of a negative attempt or rank: the job vanished with no
    word on the training side. Such a value is now ignored, in one warning each."""
    env = {"ETT_JOB_ID": "j", "ETT_ATTEMPT": "-3", "RANK": "-1", "WORLD_SIZE": "0"}
    ident = resolve_identity(env=env)
    assert (ident.attempt, ident.rank, ident.world_size) == (0, 0, 1)
    assert "ignoring ETT_ATTEMPT='-3': it must be from 0 to 2147483647" in caplog.text
    assert "ignoring RANK='-1': it must be from 0 to 2147483647" in caplog.text
    assert "ignoring WORLD_SIZE='0': it must be from 1 to 2147483647" in caplog.text
    # past the collector's 2**31 - 1 every span was rejected, or failed to encode past int64
    _errors._seen.clear()  # each is said once per process
    huge = {"ETT_JOB_ID": "j", "ETT_ATTEMPT": "9" * 23, "RANK": str(2**31)}
    ident = resolve_identity(env=huge)
    assert (ident.attempt, ident.rank) == (0, 0)
    assert f"ignoring RANK='{2**31}'" in caplog.text
    env = {"ETT_JOB_ID": "j", "ETT_ATTEMPT": "2", "RANK": "3", "WORLD_SIZE": "4"}
    ident = resolve_identity(env=env)
    assert (ident.attempt, ident.rank, ident.world_size) == (2, 3, 4)
    # the same numbers passed to init() were sent as they were, and every span then rejected
    ident = resolve_identity(env=env, attempt=-1, rank=-2, world_size=0)
    assert (ident.attempt, ident.rank, ident.world_size) == (2, 3, 4)
    for said in ("init(attempt=-1)", "init(rank=-2)", "init(world_size=0)"):
        assert f"ignoring {said}" in caplog.text
    assert resolve_identity(env={}, attempt=1, rank=2, world_size=3).rank == 2


def test_job_id_fallbacks() -> None:
    assert resolve_identity(env={"TORCHELASTIC_RUN_ID": "rdzv-1"}).job_id == "rdzv-1"
    assert (
        resolve_identity(env={"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "42"}).job_id == "42"
    )
    ident = resolve_identity(env={"TORCHELASTIC_RESTART_COUNT": "0"})
    assert ident.job_id == f"{socket.gethostname()}-{os.getppid()}"


def test_process_start_time_is_in_the_past() -> None:
    start = process_start_time()
    assert time.time() - 3600 < start <= time.time()


@pytest.mark.parametrize(
    ("arg", "env", "expected"),
    [
        (None, {}, "http://127.0.0.1:4318/v1/traces"),
        ("http://c:4318", {}, "http://c:4318/v1/traces"),
        ("http://c:4318/", {}, "http://c:4318/v1/traces"),
        ("http://c:4318/v1/traces", {}, "http://c:4318/v1/traces"),
        (None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:1/"}, "http://b:1/v1/traces"),
        (
            None,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://b:1",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:2/x",
            },
            "http://t:2/x",
        ),
        (
            "http://a:3",
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:2/x"},
            "http://a:3/v1/traces",
        ),
    ],
)
def test_endpoint(arg: str | None, env: dict[str, str], expected: str) -> None:
    assert resolve_endpoint(arg, env=env) == expected


@pytest.mark.parametrize(
    "url",
    ["htp://c:4318", "c:4318", "grpc://c:4317", "http://:4318", "http://c:port", "http://c:0"],
)
def test_an_endpoint_that_cannot_be_a_collector_is_said_once(
    url: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``htp://`` was taken for a collector that is away: spans went to the spool with "no
    answer: collector unreachable?", which sends the user looking at the wrong thing."""
    monkeypatch.setattr(_errors, "_seen", set())
    assert not endpoint_usable(url)
    resolve_endpoint(None, env={"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    resolve_endpoint(url, env={})
    said = [r.getMessage() for r in caplog.records if "not an http://" in r.getMessage()]
    assert len(said) == 1 and repr(url) in said[0] and "OTEL_EXPORTER_OTLP_ENDPOINT" in said[0]


def test_a_collector_url_is_not_said(caplog: pytest.LogCaptureFixture) -> None:
    for url in ("http://c:4318", "https://c", "http://[::1]:4318/v1/traces", "http://10.0.0.2"):
        assert endpoint_usable(url)
        resolve_endpoint(url, env={})
    assert "not an http" not in caplog.text


def test_disabled_flag(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_errors, "_seen", set())
    for raw in ("1", "true", "YES", " on "):
        assert env_disabled({"ETT_DISABLED": raw})
    for raw in ("0", "false", "No", "off", ""):
        assert not env_disabled({"ETT_DISABLED": raw})
    assert not env_disabled({})
    assert caplog.text == ""
    # a value that is neither was taken as "on" silently: now it is said, and left unset
    assert not env_disabled({"ETT_DISABLED": "maybe"})
    assert "ignoring ETT_DISABLED='maybe'" in caplog.text
    assert not ddp_waits_enabled({"ETT_DDP_WAITS": "OFF"})
    assert ddp_waits_enabled({"ETT_DDP_WAITS": "sometimes"})
    assert "ignoring ETT_DDP_WAITS='sometimes'" in caplog.text


def test_token_header() -> None:
    from ett._config import resolve_headers

    assert resolve_headers(env={}) == {}
    assert resolve_headers(env={"ETT_TOKEN": "s3"}) == {"authorization": "Bearer s3"}
    assert resolve_headers("arg", env={"ETT_TOKEN": "s3"}) == {"authorization": "Bearer arg"}


@pytest.mark.parametrize("raw", ["inf", "-inf", "nan", "1e400"])
def test_a_number_that_is_not_finite_is_said_and_ignored(
    raw: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ETT_FLUSH_TIMEOUT_S=inf made end()'s flush raise (nothing flushed, the job left
    running), ETT_SPOOL_MAX_MB=inf failed init (nothing recorded), and nan turned the spool
    off without a word."""
    monkeypatch.setattr(_errors, "_seen", set())
    env = {"ETT_FLUSH_TIMEOUT_S": raw, "ETT_EXIT_TIMEOUT_S": raw, "ETT_SPOOL_MAX_MB": raw}
    assert resolve_flush_timeout(env=env) == DEFAULT_FLUSH_TIMEOUT_S
    assert resolve_exit_timeout(env=env) == DEFAULT_EXIT_TIMEOUT_S
    assert resolve_spool(env)[1] == DEFAULT_SPOOL_MAX_MB * (1 << 20)
    assert resolve_persist_wait(env={"ETT_PERSIST_WAIT_S": raw}) == DEFAULT_PERSIST_WAIT_S
    assert resolve_flush_timeout(float(raw), env={}) == DEFAULT_FLUSH_TIMEOUT_S
    for name in ("ETT_FLUSH_TIMEOUT_S", "ETT_SPOOL_MAX_MB", "ETT_PERSIST_WAIT_S"):
        assert f"ignoring {name}={raw!r}: not a finite number" in caplog.text
    assert "ignoring flush_timeout_s=" in caplog.text


def test_a_negative_spool_bound_is_said(caplog: pytest.LogCaptureFixture) -> None:
    assert resolve_spool({"ETT_SPOOL_MAX_MB": "-5"})[1] == DEFAULT_SPOOL_MAX_MB * (1 << 20)
    assert "ETT_SPOOL_MAX_MB='-5'" in caplog.text
    assert resolve_spool({"ETT_SPOOL_MAX_MB": "0"}) == ("", 0)  # 0 still turns it off


@pytest.mark.parametrize("raw", ["0", "-2.5"])
def test_a_flush_timeout_of_zero_or_less_is_said_and_the_default_used(
    raw: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ETT_FLUSH_TIMEOUT_S=0 (a negative value was clamped to it) shut the exporter down at the
    exit without waiting: the attempt's end was lost with a healthy collector ("Exporter
    already shutdown, ignoring batch") and the log blamed the collector."""
    monkeypatch.setattr(_errors, "_seen", set())
    assert resolve_flush_timeout(env={"ETT_FLUSH_TIMEOUT_S": raw}) == DEFAULT_FLUSH_TIMEOUT_S
    assert resolve_flush_timeout(float(raw), env={}) == DEFAULT_FLUSH_TIMEOUT_S
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"ignoring ETT_FLUSH_TIMEOUT_S={raw!r}: the end of an attempt needs time to send its "
        "last spans: it must be above 0; using the default, 5 s",
        f"ignoring init(flush_timeout_s={float(raw)!r}): the end of an attempt needs time to "
        "send its last spans: it must be above 0; using the default, 5 s",
    ]
    assert resolve_flush_timeout(env={"ETT_FLUSH_TIMEOUT_S": "0.2"}) == 0.2


def test_a_negative_exit_timeout_is_said_and_the_default_used(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ETT_EXIT_TIMEOUT_S=-5 turned the exit watchdog off without a word; 0 still does."""
    monkeypatch.setattr(_errors, "_seen", set())
    assert resolve_exit_timeout(env={"ETT_EXIT_TIMEOUT_S": "-5"}) == DEFAULT_EXIT_TIMEOUT_S
    assert "ignoring ETT_EXIT_TIMEOUT_S='-5': a time cannot be negative" in caplog.text
    assert resolve_exit_timeout(env={"ETT_EXIT_TIMEOUT_S": "0"}) == 0.0


def test_a_session_told_to_flush_for_zero_seconds_still_delivers_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The end of the job through the library's own pipeline, ETT_FLUSH_TIMEOUT_S=0: the
    attempt span reaches the exporter."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    import ett

    monkeypatch.setenv("ETT_FLUSH_TIMEOUT_S", "0")
    exporter = InMemorySpanExporter()
    sess = ett.init(job_id="j", exporter=exporter, install_handlers=False)
    sess.step()
    sess.end()
    names = [s.name for s in exporter.get_finished_spans()]
    assert semconv.SPAN_ATTEMPT in names, names
