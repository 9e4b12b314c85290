"""``ett serve``'s credential and TLS options (:mod:`.security` holds what they mean)."""

from __future__ import annotations

import argparse
import dataclasses
import ipaddress
import sys
from pathlib import Path
from typing import Any

from ..security import Scope, TlsSettings
from ..settings import Settings

SECURITY_ENVIRONMENT = """\
  ETT_WRITE_TOKENS[_FILE]  tokens that may only send spans (POST /v1/traces); _FILE: one per
                      line, re-read when it changes (rotation without restart), chmod 600
  ETT_READ_TOKENS[_FILE]   tokens that may only read (GET: read API, /metrics, alerts)
  ETT_ADMIN_TOKENS[_FILE]  tokens for any other method (no such route today)
  ETT_TOKEN           one token that may do everything (compatibility; prefer scoped ones)
  ETT_AUTH_MAX_FAILURES, ETT_AUTH_BAN_S  wrong tokens from one address within ETT_AUTH_BAN_S
                      (default 10 in 60 s) refuse its requests without a valid token
                      (429) for ETT_AUTH_BAN_S; valid tokens still pass
  ETT_TLS_CERT, ETT_TLS_KEY  PEM certificate (chain) and key: serve HTTPS only
  ETT_TLS_CLIENT_CA   CA bundle: clients must present a certificate it signed
"""


_FILE_OPTION: dict[str, Any] = {"type": Path, "default": None, "metavar": "FILE"}
"""What every file option of ``ett serve``'s credentials and TLS shares."""


def add_options(serve: Any) -> None:
    """``--write-tokens``, ``--read-tokens``, ``--admin-tokens`` (files), ``--tls-cert``,
    ``--tls-key``, ``--tls-client-ca``."""
    for scope in Scope:
        text = f"file of {scope.value} tokens, one per line (or ETT_{scope.name}_TOKENS_FILE)"
        serve.add_argument(f"--{scope.value}-tokens", **_FILE_OPTION, help=text)
    text = "PEM certificate chain: serve HTTPS (or ETT_TLS_CERT)"
    serve.add_argument("--tls-cert", **_FILE_OPTION, help=text)
    serve.add_argument(
        "--tls-key", **_FILE_OPTION, help="the certificate's PEM key (or ETT_TLS_KEY)"
    )
    text = "require client certificates signed by this CA bundle (or ETT_TLS_CLIENT_CA)"
    serve.add_argument("--tls-client-ca", **_FILE_OPTION, help=text)


def apply(args: argparse.Namespace, settings: Settings) -> Settings:
    """``settings`` with the options given on the command line (over the environment's): the
    credentials, TLS, and the alert settings the alerts part built from its options
    (``args.alert_settings``, ``ett_collector.alerts.commands``).

    Raises:
        ConfigError: a file that cannot be read, a key without its certificate..."""
    auth = settings.auth.with_files({s: getattr(args, f"{s.value}_tokens") for s in Scope})
    tls = TlsSettings(
        cert=args.tls_cert or settings.tls.cert,
        key=args.tls_key or settings.tls.key,
        client_ca=args.tls_client_ca or settings.tls.client_ca,
    )
    alerts = getattr(args, "alert_settings", None) or settings.alerts
    return dataclasses.replace(settings, auth=auth, tls=tls, alerts=alerts)


def worker_environment(settings: Settings) -> dict[str, str]:
    """The variables that give worker processes these credential, TLS and alert settings."""
    alerts = settings.alerts.environment() if settings.alerts is not None else {}
    return {**settings.auth.environment(), **settings.tls.environment(), **alerts}


def scheme(settings: Settings) -> str:
    """``https`` or ``http``."""
    return "https" if settings.tls.enabled else "http"


def warn_if_open(settings: Settings) -> None:
    """One line on stderr when a collector reachable from other hosts has no token or no TLS."""
    try:
        loopback = ipaddress.ip_address(settings.host).is_loopback
    except ValueError:
        loopback = settings.host == "localhost"
    if loopback:
        return
    has = {"tokens": bool(settings.token or settings.auth.enabled), "TLS": settings.tls.enabled}
    missing = [what for what, ok in has.items() if not ok]
    if missing:
        print(
            f"ett serve: warning: listening on {settings.host} without {' or '.join(missing)}: "
            "anyone who can reach it may send or read; README 'Running a fleet's collector "
            "safely'",
            file=sys.stderr,
        )
