"""What a user-facing command printed on stderr when it refused: one line, no traceback."""

from __future__ import annotations


def one_line(err: str) -> str:
    """The one non-blank line of ``err`` (stderr of a refused command); fails on a traceback or
    on more lines."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    return lines[0]
