"""``ett grafana build [--check]`` and ``ett grafana push``: dashboards, data sources and alert
rules as code (generated into grafana/provisioning/, uploaded through grafana-client)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from ett_cli import CliError

EPILOG = """\
environment:
  GRAFANA_URL, GRAFANA_TOKEN  defaults of --url and --token (a service account token)
  ETT_GRAFANA_PG_URL          default of --pg-url
  ETT_GRAFANA_PROMETHEUS_URL  default of --prometheus-url
examples:
  ett grafana build                     # regenerate grafana/provisioning/
  ett grafana build --check             # fail when the committed files are stale
  ett grafana build --rules my-rules.yml --out /etc/grafana/provisioning
                                        # provisioning with your alert rules (SLO burn on)
  ett grafana push --url https://grafana.example.com --token "$GRAFANA_TOKEN" \\
      --pg-url postgresql://ett_grafana:PASSWORD@db:5432/ett --prometheus-url http://prom:9090
"""


def register(sub: Any) -> None:
    """Add ``grafana build`` and ``grafana push`` to ``ett``."""
    g = sub.add_parser(
        "grafana",
        help="Grafana dashboards, data sources and alert rules as code",
        description="Dashboards, data sources and alert rules for Grafana 11, generated from "
        "code into grafana/provisioning/ and pushed through Grafana's HTTP API.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    gsub = g.add_subparsers(dest="grafana_command", metavar="ACTION")
    gsub.required = True
    _add_build(gsub)
    _add_push(gsub)


def _wrapped(text: str) -> str:
    """``text`` in lines of 79 columns (a raw formatter, which keeps the epilog's layout,
    prints a description as it is given)."""
    import textwrap

    return textwrap.fill(text, 79)


def _add_build(gsub: Any) -> None:
    """``grafana build [--check] [--out DIR] [--rules FILE]``."""
    build = gsub.add_parser(
        "build",
        help="regenerate the provisioning files",
        description=_wrapped(
            "Write the dashboards, data sources and alert rules, generated from grafana/*.py, "
            "as sorted JSON and YAML files under grafana/provisioning/ (or --out DIR), for "
            "Grafana to load at start; --check changes nothing and fails when the committed "
            "files are stale."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    build.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 when a file is stale"
    )
    build.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder to write (default: grafana/provisioning in the source tree)",
    )
    build.add_argument(
        "--rules",
        default=None,
        metavar="FILE",
        help="alert rules file (as `ett serve` reads it) for the alerting file, e.g. one that "
        "enables the SLO burn rules (default: the built-in rules, as committed)",
    )
    build.set_defaults(func=_build)


def _add_push(gsub: Any) -> None:
    """``grafana push --url URL --token TOKEN [--pg-url URL] [--prometheus-url URL] ...``."""
    push = gsub.add_parser(
        "push",
        help="upload folder, data sources, dashboards and alert rules to a Grafana server",
        description=_wrapped(
            "Upsert, through Grafana's HTTP API, the folder ETT, the PostgreSQL and Prometheus "
            "data sources (those given: --pg-url, --prometheus-url), the dashboards and the "
            "alert rule group, each by uid, so pushing twice is safe. The first refusal stops "
            "it, naming what was already written."
        ),
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    push.add_argument(
        "--url",
        default=os.environ.get("GRAFANA_URL"),
        metavar="URL",
        help="Grafana base URL, e.g. https://grafana.example.com (default: $GRAFANA_URL; "
        "one of them is needed)",
    )
    push.add_argument(
        "--token",
        default=os.environ.get("GRAFANA_TOKEN"),
        help="a service account token (default: $GRAFANA_TOKEN; one of them is needed)",
    )
    push.add_argument(
        "--pg-url",
        default=os.environ.get("ETT_GRAFANA_PG_URL"),
        metavar="URL",
        help="postgresql://ROLE:PASSWORD@HOST:PORT/DB for the PostgreSQL data source "
        "(the read-only role of `ett db grant-readonly`; default: $ETT_GRAFANA_PG_URL); "
        "neither given: the data source is left as it is",
    )
    push.add_argument(
        "--prometheus-url",
        default=os.environ.get("ETT_GRAFANA_PROMETHEUS_URL"),
        metavar="URL",
        help="URL of the Prometheus scraping the collectors (default: "
        "$ETT_GRAFANA_PROMETHEUS_URL); neither given: the data source is left as it is",
    )
    push.add_argument(
        "--rules",
        default=os.environ.get("ETT_ALERT_RULES"),
        metavar="FILE",
        help="alert rules file (as `ett serve` reads it; default: $ETT_ALERT_RULES, else "
        "the built-in rules)",
    )
    push.add_argument(
        "--timeout", type=float, default=10.0, help="seconds per request (default 10)"
    )
    push.set_defaults(func=_push)


def _build(args: argparse.Namespace) -> int:
    from . import _provisioning

    root = args.out or _provisioning.ROOT
    if root.exists() and not root.is_dir():
        raise CliError(f"--out {root}: a file is there, not a folder: name a folder")
    if args.rules:
        from ett_collector.alerts.rules import RulesError

        try:
            _alerting_check(args.rules)
        except RulesError as exc:
            raise CliError(str(exc)) from exc
    if args.check:
        stale = _provisioning.stale(root, args.rules)
        if stale:
            for line in stale:
                print(f"  {line}")
            again = "ett grafana build" + (f" --out {args.out}" if args.out else "")
            again += f" --rules {args.rules}" if args.rules else ""
            raise CliError(
                f"{len(stale)} generated file(s) under {root} are stale: run `{again}`"
                + ("" if args.out else " and commit them"),
                exit_code=1,
            )
        print(f"grafana provisioning files under {root} are up to date")
        return 0
    try:
        changed = _provisioning.write(root, args.rules)
    except OSError as exc:  # a folder that cannot be made or written
        where = exc.filename or root
        raise CliError(f"--out {root}: cannot write {where}: {exc.strerror}", exit_code=1) from None
    for what, rel in changed:
        print(f"  {what} {rel}")
    print(f"{len(changed)} file(s) changed under {root}")
    return 0


def _push(args: argparse.Namespace) -> int:
    from . import _push as push

    if not args.url:
        raise CliError("no Grafana URL: pass --url https://grafana.example.com (or GRAFANA_URL)")
    if not args.url.startswith(("http://", "https://")):
        raise CliError(f"--url must start with http:// or https://, got {args.url!r}")
    if not args.token:
        raise CliError(
            "no token: pass --token with a Grafana service account token (or set GRAFANA_TOKEN)"
        )
    plan = push.Plan(prometheus_url=args.prometheus_url, rules_path=args.rules)
    if args.pg_url:
        try:
            plan.pg = push.pg_settings(args.pg_url)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    url = args.url.rstrip("/")
    if args.rules:
        from ett_collector.alerts.rules import RulesError

        try:
            _alerting_check(args.rules)
        except RulesError as exc:
            raise CliError(str(exc)) from exc
    try:
        written = push.push(
            url,
            args.token,
            plan,
            timeout=args.timeout,
            progress=lambda step: print(f"  wrote {step}"),
        )
    except push.PushError as exc:
        raise CliError(exc.message, exit_code=exc.exit_code) from exc
    if args.pg_url is None and args.prometheus_url is None:
        print("data sources left as they are (no --pg-url or --prometheus-url)")
    print(f"pushed {len(written)} item(s) to {url}")
    return 0


def _alerting_check(path: str) -> None:
    from ett_collector.alerts.rules import load_rules

    load_rules(path)
