"""The rich console every part prints its tables through."""

from __future__ import annotations

from typing import Any


def console() -> Any:
    """A ``rich`` console whose closed pipe (``ett report JOB | head -1``) raises
    ``BrokenPipeError``, which the dispatcher turns into a quiet exit 0 as for plain output
    (rich's own reaction is ``SystemExit(1)``: a failed pipeline under ``set -o pipefail``).
    With ``NO_COLOR`` set (no-color.org) it writes no escape codes at all: rich drops only the
    colours, and kept bold and italic. What it prints is shown as it is
    (``_render.VisibleConsole``): no markup, and the characters a terminal would act on
    (escape sequences in a job id) written as escapes."""
    import os

    from ett_collector.commands._render import VisibleConsole

    class _Console(VisibleConsole):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    if os.environ.get("NO_COLOR"):
        return _Console(color_system=None)
    return _Console()
