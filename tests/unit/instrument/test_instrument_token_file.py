"""``ETT_TOKEN_FILE``: the trainers' write token from a file, never printed."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from ett import _errors
from ett._config import resolve_headers


def test_the_token_comes_from_its_file_when_ett_token_is_unset(tmp_path: Path) -> None:
    f = tmp_path / "write.token"
    f.write_text("w-0123456789abcdef\nignored second line\n")
    assert resolve_headers(env={"ETT_TOKEN_FILE": str(f)}) == {
        "authorization": "Bearer w-0123456789abcdef"
    }
    both = {"ETT_TOKEN": "from-env", "ETT_TOKEN_FILE": str(f)}
    assert resolve_headers(env=both) == {"authorization": "Bearer from-env"}


def test_an_unreadable_token_file_sends_no_token_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_errors, "_seen", set())
    caplog.set_level(logging.WARNING)
    missing = tmp_path / "nope"
    assert resolve_headers(env={"ETT_TOKEN_FILE": str(missing)}) == {}
    assert str(missing) in caplog.text and "no token sent" in caplog.text


@pytest.mark.parametrize(
    "text",
    [
        "# the trainers' write token\nw-0123456789abcdef\n",
        "\n\n   \nw-0123456789abcdef\n",
        "w-0123456789abcdef  \r\n",
        "  # rotated 2026-12-01\n\n  w-0123456789abcdef # the new one\nw-old-0123456789ab\n",
        "w-0123456789abcdef,w-old-0123456789ab\n",
    ],
)
def test_the_token_is_the_files_first_in_the_collectors_format(tmp_path: Path, text: str) -> None:
    """The first line was sent as is: a file starting with a comment or a blank line (valid in
    the collector's own token files) sent '# the trainers' write token', and got 401."""
    f = tmp_path / "write.tokens"
    f.write_text(text)
    assert resolve_headers(env={"ETT_TOKEN_FILE": str(f)}) == {
        "authorization": "Bearer w-0123456789abcdef"
    }


def test_a_token_file_of_comments_only_sends_no_token_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_errors, "_seen", set())
    caplog.set_level(logging.WARNING)
    f = tmp_path / "write.tokens"
    f.write_text("# nothing yet\n\n")
    assert resolve_headers(env={"ETT_TOKEN_FILE": str(f)}) == {}
    assert str(f) in caplog.text and "no token in it" in caplog.text


@pytest.mark.parametrize(
    "text", ["\ufeffw-0123456789abcdef\n", "\ufeff# write token\nw-0123456789abcdef"]
)
def test_a_byte_order_mark_is_not_part_of_the_token(tmp_path: Path, text: str) -> None:
    """A token file saved with a UTF-8 byte-order mark (a Windows editor) sent the mark as part
    of the token (or, before a comment, made the comment the token): the collector refused it."""
    from ett._config import read_token_file

    f = tmp_path / "write.token"
    f.write_bytes(text.encode("utf-8"))
    assert read_token_file(str(f)) == ("w-0123456789abcdef", "")
    assert resolve_headers(env={"ETT_TOKEN_FILE": str(f)}) == {
        "authorization": "Bearer w-0123456789abcdef"
    }
