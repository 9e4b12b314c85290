"""The console every command prints through."""

from __future__ import annotations

import pytest

from ett_cli import console


@pytest.mark.parametrize(("no_color", "escapes"), [("1", False), ("", True)])
def test_no_color_means_no_escape_codes_at_all(
    monkeypatch: pytest.MonkeyPatch, no_color: str, escapes: bool
) -> None:
    """NO_COLOR=1 still wrote bold and italic codes (rich drops only the colours)."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # as on a terminal
    monkeypatch.setenv("NO_COLOR", no_color)
    c = console()
    with c.capture() as out:
        c.print("[bold]ETT[/] [italic]92.5%[/] [red]failed[/]")
    assert ("\x1b[" in out.get()) is escapes
    assert "ETT 92.5% failed" in out.get() or escapes
