"""A real small disk for the tests that fill one: a tmpfs mounted for a test's length."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def mounted_tmpfs(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``4m``, ``16m``) at ``where`` (made here), unmounted afterwards;
    skips the test where it cannot be mounted (not root, no CAP_SYS_ADMIN)."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'}): run the "
            "test as root (or with CAP_SYS_ADMIN) to fill a real disk"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
