"""``ett dashboard``'s file options: each is listed in ``--help`` with its environment variable,
and an unreadable file is a one-line error before anything starts."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ett_dashboard.commands import FILE_OPTIONS, register

ETT = str(Path(sys.executable).with_name("ett"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_help_lists_each_file_option_with_its_variable() -> None:
    sub = argparse.ArgumentParser(prog="ett").add_subparsers()
    register(sub)
    helps = {a.option_strings[0]: a.help for a in sub.choices["dashboard"]._actions}
    assert {f.flag: helps[f.flag] for f in FILE_OPTIONS} == {
        "--token-file": "file holding the read token (or ETT_READ_TOKEN_FILE)",
        "--ca-bundle": "CA bundle (PEM) that signed an https collector's certificate "
        "(or ETT_API_CA_BUNDLE)",
        "--client-cert": "client certificate for a collector that asks for one "
        "(or ETT_API_CLIENT_CERT)",
        "--client-key": "the client certificate's key (or ETT_API_CLIENT_KEY)",
    }


def test_help_names_the_url_and_every_variable_the_app_reads() -> None:
    """``--api API`` read as a name; ETT_DASHBOARD_CACHE_S was in no help or page."""
    import re

    from ett_dashboard import settings

    sub = argparse.ArgumentParser(prog="ett").add_subparsers()
    register(sub)
    text = sub.choices["dashboard"].format_help()
    assert "--api URL" in text and "--api API" not in text
    source = Path(settings.__file__).read_text(encoding="utf-8")
    names = set(re.findall(r'"(ETT_[A-Z_]+)"', source))  # every variable its code reads
    assert {"ETT_API_URL", "ETT_DASHBOARD_CACHE_S", "ETT_DASHBOARD_REFRESH_S"} <= names
    flat = " ".join(text.split())
    assert all(name in flat for name in names), sorted(n for n in names if n not in flat)


def test_an_unreadable_file_is_one_line(tmp_path: Path) -> None:
    pytest.importorskip("streamlit", reason="the dashboard extra: pip install -e '.[dashboard]'")
    flag = FILE_OPTIONS[-1].flag  # the last is checked after the others were found unset
    missing = tmp_path / "missing.pem"
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("ETT_DEBUG", None)
    done = subprocess.run(
        [ETT, "dashboard", "--port", str(_free_port()), flag, str(missing)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == f"ett dashboard: {flag} {missing}: cannot read that file"
    assert done.stdout == ""
