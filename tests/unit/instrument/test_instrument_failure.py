"""Failure causes from exceptions."""

from __future__ import annotations

import pytest

from ett import classify_failure, is_peer_loss
from ett._failure import error_type


class OutOfMemoryError(RuntimeError):
    """Named like ``torch.OutOfMemoryError``."""


class DistBackendError(RuntimeError):
    """Named like ``torch.distributed.DistBackendError``."""


@pytest.mark.parametrize(
    ("exc", "cause"),
    [
        (OutOfMemoryError("CUDA out of memory"), "oom"),
        (MemoryError(), "oom"),
        (RuntimeError("CUDA error: out of memory"), "oom"),
        (
            RuntimeError("[Rank 0] Watchdog caught collective operation timeout: NCCL ..."),
            "nccl_timeout",
        ),
        (RuntimeError("NCCL communicator was aborted: timed out after 600000 ms"), "nccl_timeout"),
        (DistBackendError("wait timeout after 30000ms"), "nccl_timeout"),
        (DistBackendError("NCCL error: unhandled system error"), "exception"),
        (RuntimeError("uncorrectable ECC error encountered"), "hardware"),
        (RuntimeError("GPU has fallen off the bus"), "hardware"),
        (RuntimeError("maxid was too large"), "exception"),
        (ValueError("bad"), "exception"),
        (RuntimeError("[../gloo/transport/tcp/pair.cc:534] Connection closed by peer"), "unknown"),
        (
            DistBackendError("NCCL error: remote process exited or there was a network error"),
            "unknown",
        ),
        (BrokenPipeError(32, "Broken pipe"), "unknown"),
        (KeyboardInterrupt(), "exception"),
    ],
)
def test_classify(exc: BaseException, cause: str) -> None:
    assert classify_failure(exc) == cause


def test_classify_follows_the_chain() -> None:
    try:
        try:
            raise OutOfMemoryError("CUDA out of memory")
        except OutOfMemoryError as inner:
            raise RuntimeError("step failed") from inner
    except RuntimeError as outer:
        assert classify_failure(outer) == "oom"


def test_error_type() -> None:
    assert error_type(ValueError("x")) == "ValueError"
    assert error_type(OutOfMemoryError) == f"{__name__}.OutOfMemoryError"


def test_peer_loss_is_found_in_the_chain_and_yields_to_a_specific_cause() -> None:
    try:
        try:
            raise RuntimeError("Connection reset by peer")
        except RuntimeError as inner:
            raise ValueError("allreduce failed") from inner
    except ValueError as outer:
        assert is_peer_loss(outer)
        assert classify_failure(outer) == "unknown"
    lost_and_timed_out = RuntimeError("NCCL communicator was aborted: timed out after 600000 ms")
    assert is_peer_loss(lost_and_timed_out)
    assert classify_failure(lost_and_timed_out) == "nccl_timeout"  # the specific cause wins
    assert not is_peer_loss(ValueError("bad"))
