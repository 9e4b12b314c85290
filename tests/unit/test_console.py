"""The console every command prints through."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.table import Table

from ett_cli import console, main
from tests.support.reports import computed_sqlite
from tests.support.worked_example import worked_example


@pytest.mark.parametrize(("no_color", "escapes"), [("1", False), ("", True)])
def test_no_color_means_no_escape_codes_at_all(
    monkeypatch: pytest.MonkeyPatch, no_color: str, escapes: bool
) -> None:
    """NO_COLOR=1 still wrote bold and italic codes (rich drops only the colours)."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # as on a terminal
    monkeypatch.setenv("NO_COLOR", no_color)
    c = console()
    table = Table(title="ETT", show_header=False)  # a title is italic, the column bold
    table.add_column(style="bold")
    table.add_row("92.5%")
    with c.capture() as out:
        c.print(table)
    assert ("\x1b[" in out.get()) is escapes
    assert "92.5%" in out.get()


HOSTILE = {
    "[red]markup[/red]": "[red]markup[/red]",
    "a[/]b": "a[/]b",  # stopped `ett jobs` on a terminal: MarkupError
    "\x1b[31mRED\x1b]0;title\x07": "\\x1b[31mRED\\x1b]0;title\\x07",
    "two\nlines": "two\\nlines",  # piped, a second row of `ett jobs`
    "rtl\u202eevil": "rtl\\u202eevil",
}
"""Job ids a sender may write, and how the commands show them."""


@pytest.fixture
def hostile_db(tmp_path: Path) -> str:
    spans = []
    for i, job_id in enumerate(HOSTILE):
        spans += worked_example(job_id, 1_790_000_000 + i * 1000, "m\x1b[2J", "[bold]t")
    return computed_sqlite(tmp_path, spans)


@pytest.mark.parametrize("terminal", [False, True])
def test_names_a_sender_wrote_are_shown_not_obeyed(
    hostile_db: str,
    terminal: bool,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Raw, a job id's escape sequences coloured the terminal, set its title or cleared it;
    a line feed forged a row of piped `ett jobs`; rich markup in one failed the listing."""
    if terminal:
        monkeypatch.setenv("FORCE_COLOR", "1")
        monkeypatch.setenv("COLUMNS", "200")
    assert main(["jobs", "--db", hostile_db]) == 0
    out = capsys.readouterr().out
    plain = out.replace("\x1b[1m", "").replace("\x1b[0m", "").replace("\x1b[3m", "")
    for raw, shown in HOSTILE.items():  # a line feed stays inside its cell on a terminal
        assert shown in plain or (terminal and "\n" in raw), shown
    assert "m\\x1b[2J" in plain and "[bold]t" in plain
    assert "\x07" not in out and "\u202e" not in out
    # on a terminal, the only escape sequences are the table's own styles
    assert re.sub(r"\x1b\[[0-9;]*m", "", out).count("\x1b") == 0
    if not terminal:
        assert "\x1b" not in out
        assert len(out.splitlines()) == 1 + len(HOSTILE)  # a header and one line per job
    assert main(["report", "a[/]b", "--db", hostile_db]) == 0
    assert "a[/]b" in capsys.readouterr().out
