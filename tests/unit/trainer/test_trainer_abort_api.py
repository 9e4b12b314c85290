"""The failure teardown's torch API (``trainer.distributed.abort_groups``) must exist: the public
``ProcessGroup.abort()``, and the private fallback it would use otherwise. If torch drops either,
this fails loudly instead of a failed rank hanging on its way out (issue 18)."""

from __future__ import annotations

import inspect

import pytest

dist = pytest.importorskip("torch.distributed")


def test_process_group_abort_is_public() -> None:
    assert callable(getattr(dist.ProcessGroup, "abort", None))


def test_private_fallback_still_exists() -> None:
    from torch.distributed import distributed_c10d

    fallback = distributed_c10d._abort_process_group
    assert list(inspect.signature(fallback).parameters) == ["group"]


def test_teardown_without_process_groups_is_a_no_op() -> None:
    from trainer.distributed import shutdown

    assert not dist.is_initialized()
    shutdown(None, failed=True)
    shutdown(None, failed=False)
