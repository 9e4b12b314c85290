"""A SIGTERM that arrives while a failed attempt's end is being flushed must not cut the flush
short. Under torchrun this is the common case: when one rank dies, the survivor's collective
fails (it records its own failure and flushes) while torchrun sends it SIGTERM at the same
instant. Raising ``Preempted`` (or dying by the signal) inside the flush lost every span the
survivor had not exported yet; in a short attempt, all of the attempt's spans (the e2e test
``test_signal_fault_restarts[sigkill]`` then saw no attempt 0 at all: ``failures == 0``).

Real subprocesses (as ``test_instrument_hooks.py``): the child's exporter sends the SIGTERM
itself when the flush of the attempt span starts, and answers only a while later, as a busy
collector would."""

from __future__ import annotations

import signal
import textwrap
from pathlib import Path

import pytest

from ett import semconv
from tests.unit.instrument.test_instrument_hooks import attempt_attrs, named, run_child

SLOW_EXPORTER = textwrap.dedent(
    """
    class SignalledExporter(JsonLines):
        # the export of the attempt span: SIGTERM arrives, the answer comes 0.5 s later
        def export(self, spans):
            if any(s.name == "ett.attempt" for s in spans):
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.5)
            return super().export(spans)

    JsonLines = SignalledExporter
    """
)

FAILS = textwrap.dedent(
    """
    try:
        raise RuntimeError("Connection closed by peer")
    except RuntimeError as exc:
        sess.fail(exc)
        print("fail returned", flush=True)
    print("after", flush=True)
    """
)


@pytest.mark.parametrize("raise_on_sigterm", [True, False])
def test_sigterm_during_a_failed_ends_flush_waits_for_it(
    tmp_path: Path, raise_on_sigterm: bool
) -> None:
    setup = SLOW_EXPORTER + f"INIT_KWARGS = {{'raise_on_sigterm': {raise_on_sigterm}}}\n"
    done, spans = run_child(tmp_path, FAILS, setup=setup)
    # the signal's action is taken once the end returned: Preempted out of fail(), or death
    # by the signal, as before; only later than the flush
    assert "fail returned" not in done.stdout and "after" not in done.stdout, done.stdout
    assert done.returncode == (143 if raise_on_sigterm else -signal.SIGTERM), done.stderr
    attempt = attempt_attrs(spans)  # delivered: the old code lost it with the process
    assert attempt[semconv.ATTEMPT_END_REASON] == "failed"
    assert attempt[semconv.FAILURE_CAUSE] == "unknown"
    [failure] = named(spans, semconv.SPAN_FAILURE)  # the rank's own, no preemption after it
    assert failure["attributes"][semconv.ERROR_TYPE] == "RuntimeError"
    assert named(spans, semconv.SPAN_TRAIN_WINDOW)  # its last window too


def test_sigterm_outside_an_end_still_ends_preempted_at_once(tmp_path: Path) -> None:
    """Nothing held when no end runs: the preemption is recorded and Preempted raised."""
    body = 'print("ready", flush=True)\ntime.sleep(30)\nprint("not reached")\n'
    setup = "INIT_KWARGS = {'raise_on_sigterm': True}"
    done, spans = run_child(tmp_path, body, setup=setup, sigterm_when_ready=True)
    assert done.returncode == 143 and "not reached" not in done.stdout
    assert attempt_attrs(spans)[semconv.ATTEMPT_END_REASON] == "preempted"
