"""``ett dashboard``: run the Streamlit app against a collector's read API."""

from __future__ import annotations

import argparse
import errno
import math
import os
import socket
import sys
from pathlib import Path
from typing import NamedTuple

from ett_cli import CliError

from .settings import DEFAULT_API_URL

APP = Path(__file__).resolve().parent / "app.py"


class FileOption(NamedTuple):
    """An option naming a file the app reads, handed to it as an absolute path in ``env``."""

    flag: str
    env: str
    holds: str


FILE_OPTIONS = (
    FileOption("--token-file", env="ETT_READ_TOKEN_FILE", holds="file holding the read token"),
    FileOption(
        "--ca-bundle",
        env="ETT_API_CA_BUNDLE",
        holds="CA bundle (PEM) that signed an https collector's certificate",
    ),
    FileOption(
        "--client-cert",
        env="ETT_API_CLIENT_CERT",
        holds="client certificate for a collector that asks for one",
    ),
    FileOption("--client-key", env="ETT_API_CLIENT_KEY", holds="the client certificate's key"),
)
"""The file options of ``ett dashboard``, in the order ``--help`` lists them."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ett dashboard``."""
    p = sub.add_parser(
        "dashboard",
        help="the live dashboard (Streamlit) over a collector's read API",
        description="Run the live dashboard: Fleet, Jobs, Job, Checkpoint advisor and Alerts "
        "pages, read only through the collector's HTTP API (never its database). "
        "Environment: ETT_API_URL, ETT_READ_TOKEN or ETT_READ_TOKEN_FILE (else ETT_TOKEN), "
        "ETT_API_CA_BUNDLE, ETT_API_CLIENT_CERT, ETT_API_CLIENT_KEY, "
        "ETT_DASHBOARD_REFRESH_S (default 5 s), ETT_DASHBOARD_CACHE_S (how long an API "
        "answer is reused; default 2 s).",
    )
    p.add_argument(
        "--api",
        default=os.environ.get("ETT_API_URL", DEFAULT_API_URL),
        metavar="URL",
        help="the collector's base URL (default: $ETT_API_URL or %(default)s)",
    )
    p.add_argument(
        "--token",
        default=None,
        help="a read token of the collector (default: $ETT_READ_TOKEN, else $ETT_TOKEN); "
        "--token-file keeps it off the command line",
    )
    for f in FILE_OPTIONS:
        p.add_argument(f.flag, default=None, metavar="FILE", help=f"{f.holds} (or {f.env})")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--refresh-s",
        type=float,
        default=None,
        help="seconds between automatic refreshes (default: $ETT_DASHBOARD_REFRESH_S, else 5)",
    )
    p.set_defaults(func=run)


def streamlit_command(port: int, host: str) -> list[str]:
    """The ``streamlit run`` command line of the app (through :mod:`ett_dashboard._serve`, which
    imports the pages' heavy modules first)."""
    return [
        sys.executable,
        "-m",
        "ett_dashboard._serve",
        "run",
        str(APP),
        "--server.port",
        str(port),
        "--server.address",
        host,
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--client.toolbarMode",
        "minimal",
        "--server.fileWatcherType",  # a served dashboard does not reload on source edits
        "none",
    ]


def run(args: argparse.Namespace) -> int:
    """Serve the dashboard until interrupted."""
    if not args.api.startswith(("http://", "https://")):
        raise CliError(f"--api must be an http(s) URL such as {DEFAULT_API_URL}; got {args.api!r}")
    if not 0 < args.port < 65536:
        raise CliError(f"--port must be between 1 and 65535; got {args.port}")
    try:
        import streamlit  # noqa: F401
    except ImportError as exc:
        raise CliError(
            "the dashboard needs its extra: pip install -e '.[dashboard]' (make setup does it)"
        ) from exc
    _check_free(args.host, args.port)  # Streamlit's own message on a busy port is a log line
    env = {**os.environ, "ETT_API_URL": args.api.rstrip("/")}
    if args.token:
        env["ETT_READ_TOKEN"] = args.token  # in the environment, not on the command line
    for f in FILE_OPTIONS:
        value = getattr(args, f.flag.removeprefix("--").replace("-", "_"))
        if value:
            if not os.access(value, os.R_OK):
                raise CliError(f"{f.flag} {value}: cannot read that file")
            env[f.env] = os.path.abspath(value)
    if args.refresh_s is not None:
        if not 0 < args.refresh_s < math.inf:  # nan fails both comparisons
            raise CliError(
                f"--refresh-s must be a positive number of seconds; got {args.refresh_s}"
            )
        env["ETT_DASHBOARD_REFRESH_S"] = str(args.refresh_s)
    print(
        f"dashboard on http://{host_for_url(args.host)}:{args.port} reading {args.api}", flush=True
    )
    # the process becomes Streamlit's (exec): a stop signal reaches the server itself, so no
    # orphaned Streamlit outlives a stopped `ett dashboard`
    cmd = streamlit_command(args.port, args.host)
    os.execve(cmd[0], cmd, env)


# kept alike: `ett serve`'s _bind (collector/commands/serve_commands.py) resolves and binds the
# same way; the dashboard may not import the collector's commands (test_import_layers.py).
def _check_free(host: str, port: int) -> None:
    """``CliError`` (exit 2) unless ``host:port`` can be listened on now."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise CliError(
            f"--host {host!r} is not an address: write an IP such as 127.0.0.1 or 0.0.0.0 ({exc})"
        ) from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds
        try:
            probe.bind(address)
            probe.listen(1)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise CliError(
                    f"port {port} is in use (another ett dashboard?): stop it or pass --port N"
                ) from exc
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise CliError(f"port {port} needs privileges: pass --port above 1023") from exc
            raise CliError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc


def host_for_url(host: str) -> str:
    """``127.0.0.1`` for a wildcard bind address (something a browser can open)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
