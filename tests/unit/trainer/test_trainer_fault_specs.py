"""Fault specs and the watchdog."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from trainer.faults import WATCHDOG_EXIT_CODE, FaultSpec, InjectedFault, inject


def test_parse_short_form() -> None:
    assert FaultSpec.parse("sigkill@120") == FaultSpec("sigkill", 120)
    assert FaultSpec.parse("hang@5:rank=1:attempt=-1") == FaultSpec("hang", 5, rank=1, attempt=-1)


@pytest.mark.parametrize("text", ["sigkill", "boom@3", "exception@x", "exception@3:node=1"])
def test_parse_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        FaultSpec.parse(text)


def test_fires_only_on_its_step_rank_and_attempt() -> None:
    spec = FaultSpec("exception", step=10, rank=1, attempt=0)
    assert spec.fires(10, 1, 0)
    assert not spec.fires(10, 0, 0)
    assert not spec.fires(11, 1, 0)
    assert not spec.fires(10, 1, 1)  # the restarted attempt gets past it


def test_attempt_minus_one_fires_in_every_attempt() -> None:
    spec = FaultSpec("exception", step=3, attempt=-1)
    assert all(spec.fires(3, 0, a) for a in range(4))


def test_bad_specs_are_rejected() -> None:
    with pytest.raises(ValueError):
        FaultSpec("segfault", 1)
    with pytest.raises(ValueError):
        FaultSpec("exception", -1)


def test_exception_fault_raises() -> None:
    with pytest.raises(InjectedFault, match="step 4"):
        inject(FaultSpec("exception", 4), step=4)


def test_watchdog_ends_a_hung_process() -> None:
    code = textwrap.dedent(
        """
        import time
        from trainer.faults import Watchdog
        Watchdog(0.3, lambda idle: print(f"timeout after {idle:.1f}s", flush=True)).start()
        time.sleep(30)
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert proc.returncode == WATCHDOG_EXIT_CODE
    assert "timeout after" in proc.stdout


def test_watchdog_spares_a_process_that_beats() -> None:
    code = textwrap.dedent(
        """
        import time
        from trainer.faults import Watchdog
        dog = Watchdog(0.5, lambda idle: None).start()
        for _ in range(10):
            time.sleep(0.1)
            dog.beat()
        dog.stop()
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 0, proc.stderr
