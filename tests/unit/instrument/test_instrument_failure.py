"""Failure causes from exceptions."""

from __future__ import annotations

import pytest

from instrument import classify_failure
from instrument._failure import error_type


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
