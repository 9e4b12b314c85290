"""A database password never reaches a message: URLs that do not parse, a password holding an
unencoded ``@``, a driver's own error; and a database driver this ett does not ship is refused in
one line (exit 2), naming the supported ones."""

from __future__ import annotations

import pytest

from ett_cli import main
from ett_collector.commands._target import Target, connection_error
from ett_collector.settings import ConfigError, Settings, redact_url, scrub_password
from tests.support.errors import one_line
from tests.support.ports import free_port

SECRET = "SECRETPW"


def _commands(url: str) -> list[tuple[list[str], dict[str, str]]]:
    """``url`` given to a read, to ``db upgrade`` and to ``serve``, by ``--db`` and by
    ``ETT_DB_URL``."""
    serve = ["serve", "--port", str(free_port())]
    return [
        (["jobs", "--db", url], {}),
        (["db", "upgrade", "--db", url], {}),
        ([*serve, "--db", url], {}),
        (["jobs"], {"ETT_DB_URL": url}),
        (serve, {"ETT_DB_URL": url}),
    ]


@pytest.mark.parametrize(
    ("url", "secrets", "said"),
    [
        (f"postgresql+psycopg://u:{SECRET}@127.0.0.1:notaport/x", [SECRET], "notaport"),
        (f"postgresql+psycopg://u:{SECRET}@[::1/x", [SECRET], "cannot read database URL"),
        ("postgresql+psycopg://u:SEC@RETPW@127.0.0.1:1/x", ["SEC", "RETPW"], "%40"),
        ("postgresql+psycopg://u:SEC@RE/TPW@127.0.0.1:1/x", ["SEC", "RE/", "TPW"], "%40"),
        ("postgresql://u:SE:C@RET:abc@127.0.0.1/x", ["SE:C", "RET"], "u:***@"),
    ],
    ids=["port", "ipv6", "at-sign", "at-and-slash", "colon-and-at"],
)
def test_an_unusable_url_is_said_without_its_password(
    url: str,
    secrets: list[str],
    said: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, env in _commands(url):
        monkeypatch.delenv("ETT_DB_URL", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert main(argv) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert said in line, line
        for secret in secrets:
            assert secret not in line, (argv, line)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg2://u:pw@127.0.0.1:1/x",
        "postgresql+nodriver://u:pw@127.0.0.1:1/x",
        "postgresql+asyncpg://u:pw@127.0.0.1:1/x",
        "sqlite+aiosqlite:///x.db",
    ],
)
def test_an_unsupported_driver_exits_2_naming_the_supported_ones(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ETT_DB_URL", raising=False)
    for argv, env in _commands(url):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert main(argv) == 2, argv
        line = one_line(capsys.readouterr().err)
        assert "driver" in line and "is not supported" in line, line
        assert "postgresql+psycopg://" in line and "sqlite:///" in line
        assert "Error" not in line  # no exception's class name: ModuleNotFoundError...
        monkeypatch.delenv("ETT_DB_URL", raising=False)


def test_a_drivers_error_is_scrubbed_of_the_password() -> None:
    url = "postgresql+psycopg://u:p4ss@w0rd@db:5432/x"
    target = Target(url, "--db")
    error = connection_error(target, RuntimeError('failed to resolve host "w0rd@db"'))
    assert "p4ss" not in error.message and "w0rd" not in error.message
    assert scrub_password("x p4ss@w0rd y", url) == "x *** y"


def test_settings_say_an_unsupported_url_without_its_password() -> None:
    with pytest.raises(ConfigError) as raised:
        Settings(db_url=f"mysql://u:{SECRET}@db/ett")
    assert SECRET not in str(raised.value) and "mysql://u:***@db/ett" in str(raised.value)


def test_libpqs_postgres_scheme_is_taken_as_postgresql(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``postgres://`` (libpq's spelling, and many providers') reached the database from a read
    command but `ett serve` refused it as an unsupported URL (an operator probe)."""
    url = f"postgres://u:{SECRET}@127.0.0.1:{free_port()}/x"
    assert Settings(db_url=url).db_url == url
    monkeypatch.delenv("ETT_DB_URL", raising=False)
    for argv, env in _commands(url):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert main(argv) != 0, argv
        line = one_line(capsys.readouterr().err)
        assert "connection failed" in line and "unsupported" not in line, (argv, line)
        assert SECRET not in line
        monkeypatch.delenv("ETT_DB_URL", raising=False)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h/x", "postgresql://u:***@h/x"),
        ("postgresql://u:a@b@h:1/x", "postgresql://u:***@h:1/x"),
        ("postgresql://u@h/x", "postgresql://u@h/x"),
        ("sqlite:////data/a@b.db", "sqlite:////data/a@b.db"),
        ("not a url", "not a url"),
        (
            "postgresql+psycopg://u@h/x?password=pw1&sslmode=require",
            "postgresql+psycopg://u@h/x?password=***&sslmode=require",
        ),
        (
            "postgresql://u@h/x?sslmode=require&PASSWORD=a%40b",
            "postgresql://u@h/x?sslmode=require&PASSWORD=***",
        ),
        ("host=h password='a b' dbname=x", "host=h password=*** dbname=x"),
        ("host=h password=kw", "host=h password=***"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+psycopg://u@127.0.0.1:{free_port()}/x?password={SECRET}",
        f"postgresql+psycopg://u@127.0.0.1:notaport/x?password={SECRET}",
        f"host=127.0.0.1 password={SECRET}",
    ],
    ids=["refused", "bad-port", "keywords"],
)
def test_a_password_in_the_query_or_keywords_is_never_said(
    url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A probe's ``?password=`` showed in clear in ``ett serve``'s start line and in every
    error, and a keyword string's refusal echoed it."""
    for argv, env in _commands(url):
        monkeypatch.delenv("ETT_DB_URL", raising=False)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        assert main(argv) in (1, 2), argv
        out = capsys.readouterr()
        assert SECRET not in out.err + out.out, (argv, out)
    assert scrub_password(f"x {SECRET} y", url) == "x *** y"
