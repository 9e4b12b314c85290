"""init's arguments: one public signature, and the two typed records that carry it inward."""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

import pytest

import ett
from ett import _errors, semconv
from ett._assembly import InitOptions
from ett._config import IdentityArgs

if TYPE_CHECKING:
    from conftest import Recorder

POSITIONAL = [
    "job_id",
    "model",
    "team",
    "attempt",
    "rank",
    "world_size",
    "allocated_at",
    "endpoint",
    "window_s",
    "install_handlers",
]
KEYWORD_ONLY = [
    "tracer_provider",
    "exporter",
    "enabled",
    "service_name",
    "flush_timeout_s",
    "max_queue_size",
    "token",
    "exit_timeout_s",
    "raise_on_sigterm",
]


def test_init_signature_is_the_public_one() -> None:
    parameters = inspect.signature(ett.init).parameters.values()

    assert [p.name for p in parameters] == POSITIONAL + KEYWORD_ONLY
    kinds = {p.name: p.kind for p in parameters}
    assert {kinds[n] for n in POSITIONAL} == {inspect.Parameter.POSITIONAL_OR_KEYWORD}
    assert {kinds[n] for n in KEYWORD_ONLY} == {inspect.Parameter.KEYWORD_ONLY}
    defaults = {p.name: p.default for p in parameters}
    assert defaults["window_s"] == semconv.DEFAULT_WINDOW_S
    assert (defaults["install_handlers"], defaults["raise_on_sigterm"]) == (True, False)
    assert defaults["max_queue_size"] == 2048


def test_the_records_name_every_argument_once_with_init_defaults() -> None:
    init_defaults = {p.name: p.default for p in inspect.signature(ett.init).parameters.values()}
    identity = [f.name for f in dataclasses.fields(IdentityArgs)]
    rest = [f.name for f in dataclasses.fields(InitOptions) if f.name != "identity"]

    assert sorted(identity + rest) == sorted(init_defaults)
    for field in dataclasses.fields(IdentityArgs):  # None: from the environment, both ways
        assert field.default is None and init_defaults[field.name] is None, field.name


def test_options_of_splits_identity_from_the_rest() -> None:
    args = {name: None for name in POSITIONAL + KEYWORD_ONLY}
    args.update(job_id="j", rank=3, service_name="svc", endpoint="http://x:1", max_queue_size=7)

    options = InitOptions.of(args)

    assert options.identity == IdentityArgs(job_id="j", rank=3, service_name="svc")
    assert (options.endpoint, options.max_queue_size) == ("http://x:1", 7)
    assert options.own_pipeline
    assert not dataclasses.replace(options, exporter=object()).own_pipeline


def test_identity_args_resolve_like_the_keyword_form() -> None:
    env = {"ETT_JOB_ID": "env-job", "RANK": "2", "WORLD_SIZE": "4", "ETT_ALLOCATED_AT": "9.5"}

    resolved = IdentityArgs(rank=1, model="m").resolve(env)

    assert (resolved.job_id, resolved.rank, resolved.world_size) == ("env-job", 1, 4)
    assert (resolved.model, resolved.allocated_at) == ("m", 9.5)
    assert ett._config.resolve_identity(rank=1, model="m", env=env) == resolved


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"window_s": "ten"}, "ignoring init(window_s='ten'): a window is a positive number"),
        ({"window_s": None}, "ignoring init(window_s=None): a window is a positive number"),
        ({"window_s": 0}, "ignoring init(window_s=0): a window is a positive number"),
        ({"window_s": -1.0}, "ignoring init(window_s=-1.0): a window is a positive number"),
        ({"attempt": "abc"}, "ignoring init(attempt='abc'): not an integer"),
        ({"rank": 1.5}, "ignoring init(rank=1.5): not an integer"),
        ({"world_size": "2"}, "ignoring init(world_size='2'): not an integer"),
        ({"allocated_at": "soon"}, "ignoring allocated_at='soon': not a finite number"),
    ],
)
def test_a_bad_init_argument_is_one_line_and_the_session_records(
    kwargs: dict[str, Any],
    said: str,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A string or None where a number goes failed init (a traceback, nothing recorded for
    the run); rank=1.5 was sent and every span rejected by the collector; window_s=0 emitted
    a window at every poll. Each is now one line, and the default (or the environment) used."""
    monkeypatch.setattr(_errors, "_seen", set())
    sess = recorder.start(**kwargs)
    assert sess.enabled
    assert (sess.identity.attempt, sess.identity.rank, sess.identity.world_size) == (0, 0, 1)
    assert sess._clock._window_ns == int(semconv.DEFAULT_WINDOW_S * 1e9)
    sess.step()
    sess.end()
    assert recorder.one(semconv.SPAN_ATTEMPT)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and lines[0].startswith(said), lines
    assert "Traceback" not in caplog.text


def test_an_integral_float_rank_is_taken_as_an_integer(recorder: Recorder) -> None:
    sess = recorder.start(rank=2.0, world_size=4.0)
    assert (sess.identity.rank, sess.identity.world_size) == (2, 4)
    assert isinstance(sess.identity.rank, int)
