"""The rich console every part prints its tables through."""

from __future__ import annotations

from typing import Any


def console() -> Any:
    """A ``rich`` console whose closed pipe (``ett report JOB | head -1``) raises
    ``BrokenPipeError``, which the dispatcher turns into a quiet exit 0 as for plain output
    (rich's own reaction is ``SystemExit(1)``: a failed pipeline under ``set -o pipefail``)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return _Console()
