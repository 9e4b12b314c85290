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
