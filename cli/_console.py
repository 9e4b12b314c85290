"""The rich console every part prints its tables through."""

from __future__ import annotations

from typing import Any


def console() -> Any:
    """A ``rich`` console whose closed pipe (``ett report JOB | head -1``) raises
    ``BrokenPipeError``, which the dispatcher turns into a quiet exit 0 as for plain output
    (rich's own reaction is ``SystemExit(1)``: a failed pipeline under ``set -o pipefail``).
    With ``NO_COLOR`` set (no-color.org) it writes no escape codes at all: rich drops only the
    colours, and kept bold and italic."""
    import os

    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    if os.environ.get("NO_COLOR"):
        return _Console(color_system=None)
    return _Console()
