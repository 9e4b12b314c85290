"""``ett serve``'s credentials as written: white space around ``ETT_TOKEN`` / ``--token`` is no
part of the token (the library strips it too), a token of only white space and a token file
with no token are refused at start in one line (exit 2), before anything is created."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from ett_collector.api import create_app
from ett_collector.api._auth import Keyring
from ett_collector.security import AuthSettings, Scope, ScopeTokens
from ett_collector.settings import ConfigError, Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from tests.support.errors import one_line
from tests.support.ports import free_port

TOKEN = secrets.token_hex(16)
ETT = str(Path(sys.executable).with_name("ett"))


def _status(app: object, token: str) -> int:
    async def go() -> int:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            headers = {"Authorization": f"Bearer {token}"}
            return (await client.get("/api/v1/jobs", headers=headers)).status_code

    return asyncio.run(go())


@pytest.mark.parametrize("around", [("", "\n"), ("  ", "\r\n"), ("\t", " ")])
def test_white_space_around_ett_token_is_no_part_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, around: tuple[str, str]
) -> None:
    written = around[0] + TOKEN + around[1]
    url = f"sqlite:///{tmp_path / 'c.db'}"
    store = Store(url)
    store.upgrade()
    monkeypatch.setenv("ETT_TOKEN", written)  # as ETT_TOKEN=$(cat token.txt) might
    settings = Settings(db_url=url)
    assert settings.token == TOKEN
    assert Settings(db_url=url, token=written).token == TOKEN  # --token
    app = create_app(settings, Pipeline(store))
    try:
        assert _status(app, TOKEN) == 200
    finally:
        store.close()


def _serve(tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    """``ett serve`` with ``args`` on a new database (in a child: a start that should have been
    refused would serve on; the timeout ends it): its exit code and stderr."""
    base = {k: v for k, v in os.environ.items() if k not in ("ETT_TOKEN", "ETT_DB_URL")}
    argv = ["serve", "--port", str(free_port()), "--db", str(tmp_path / "new" / "c.db")]
    done = subprocess.run(
        [ETT, *argv, *args],
        capture_output=True,
        text=True,
        env={**base, "ETT_HOME": str(tmp_path / "home"), **env},
        timeout=60,
        check=False,
    )
    return done.returncode, done.stderr


def test_a_token_of_only_white_space_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ETT_TOKEN", " \n")
    with pytest.raises(ConfigError, match="ETT_TOKEN"):
        Settings(db_url="sqlite:///x.db")
    for args, env in (((), {"ETT_TOKEN": " \n"}), (("--token", "  "), {})):
        code, err = _serve(tmp_path, *args, **env)
        assert code == 2
        assert "ETT_TOKEN (--token) is only white space" in one_line(err)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("text", ["", "\n\n", "# the trainers' tokens go here\n"])
def test_a_token_file_without_a_token_is_refused_naming_it(tmp_path: Path, text: str) -> None:
    tokens = tmp_path / "write.tokens"
    tokens.write_text(text)
    os.chmod(tokens, 0o600)
    code, err = _serve(tmp_path, "--write-tokens", str(tokens))
    assert code == 2
    assert f"the token file {tokens} holds no token" in one_line(err)
    assert not (tmp_path / "new").exists()


def test_a_token_file_emptied_while_serving_keeps_its_last_tokens(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An editor or `echo new > file` empties the file for a moment: not a revocation."""
    tokens = tmp_path / "write.tokens"
    tokens.write_text(f"{TOKEN}\n")
    os.chmod(tokens, 0o600)
    keyring = Keyring(None, AuthSettings({Scope.WRITE: ScopeTokens((), tokens)}), check_s=0.0)
    assert keyring.scopes(TOKEN) == {Scope.WRITE}
    tokens.write_text("")
    with caplog.at_level(logging.WARNING):
        assert keyring.scopes(TOKEN) == {Scope.WRITE}
    assert "holds no token" in caplog.text and "its last tokens stay valid" in caplog.text


def test_a_token_file_made_readable_by_chmod_alone_is_warned_about(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``chmod 644`` changes neither the content nor the modification time: the watcher sees it
    all the same, as after a ``touch``, and says it until the file is private again."""
    tokens = tmp_path / "read.tokens"
    tokens.write_text(f"{TOKEN}\n")
    os.chmod(tokens, 0o600)
    keyring = Keyring(None, AuthSettings({Scope.READ: ScopeTokens((), tokens)}), check_s=0.0)
    assert keyring.scopes(TOKEN) == {Scope.READ}
    before = tokens.stat()
    os.chmod(tokens, 0o644)
    assert (tokens.stat().st_mtime_ns, tokens.stat().st_size) == (
        before.st_mtime_ns,
        before.st_size,
    )
    with caplog.at_level(logging.WARNING, logger="ett_collector.auth"):
        assert keyring.scopes(TOKEN) == {Scope.READ}  # its last tokens stay valid
    assert f"the token file {tokens} is readable by other users: chmod 600 {tokens}" in caplog.text
    assert "its last tokens stay valid" in caplog.text
    caplog.clear()
    os.chmod(tokens, 0o600)
    with caplog.at_level(logging.WARNING, logger="ett_collector.auth"):
        assert keyring.scopes(TOKEN) == {Scope.READ}
    assert not caplog.records  # private again: nothing to say


def test_the_collector_docs_never_put_a_token_on_the_command_line() -> None:
    """A command line is visible to every user of the host (``ps``): the examples give the
    token through ETT_TOKEN or token files."""
    docs = Path(__file__).parents[3] / "docs" / "collector.md"
    text = docs.read_text()
    in_examples = "\n".join(
        block for n, block in enumerate(text.split("```")) if n % 2 == 1
    )  # the fenced blocks
    assert "ett serve" in in_examples
    for line in in_examples.splitlines():
        assert not ("ett serve" in line and "--token " in line), line


def test_a_byte_order_mark_is_no_part_of_a_token_file_s_first_token(tmp_path: Path) -> None:
    """A file saved with a UTF-8 BOM (Notepad, PowerShell): its first token still opens."""
    tokens = tmp_path / "read.tokens"
    tokens.write_bytes(b"\xef\xbb\xbf" + f"{TOKEN}\n# a comment\n{TOKEN[::-1]}\n".encode())
    os.chmod(tokens, 0o600)
    keyring = Keyring(None, AuthSettings({Scope.READ: ScopeTokens((), tokens)}), check_s=0.0)
    assert keyring.scopes(TOKEN) == {Scope.READ}
    assert keyring.scopes(TOKEN[::-1]) == {Scope.READ}
    assert keyring.scopes("\ufeff" + TOKEN) == set()
