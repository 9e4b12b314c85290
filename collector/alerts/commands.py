"""``ett alerts``: list the evaluator's alerts, backtest rules over stored history, export the
rules for Prometheus. Also adds the alert options to ``ett serve`` (registered after the
collector's part, see ``cli/_parts.py``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ett_cli import CliError, console

from ..commands._target import add_db_option as _db_arg
from ..schemas import MAX_LIST

_STATES = ("pending", "firing", "resolved")
_SERVE_ENV = {
    "alert_rules": "ETT_ALERT_RULES",
    "alert_interval": "ETT_ALERT_INTERVAL_S",
    "alertmanager": "ETT_ALERTMANAGER_URL",
    "dashboard_url": "ETT_DASHBOARD_URL",
}


def _rules_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--rules",
        default=None,
        metavar="FILE",
        help="rules file overriding the defaults (default: $ETT_ALERT_RULES, else the defaults)",
    )


def register(sub: Any) -> None:
    """Add ``alerts`` (with ``backtest`` and ``export-prometheus``) and the alert options of
    ``serve``."""
    serve = sub.choices.get("serve")
    if serve is not None:
        _extend_serve(serve)
    alerts = sub.add_parser(
        "alerts",
        help="ETT regression alerts: list, backtest, export for Prometheus",
        description="List the alerts of the collector's evaluator (pending, firing, resolved), "
        "newest first, from its database (--db): that is what `ett alerts` without an ACTION "
        "does. The ACTIONs replay rules over history and export them for Prometheus.",
    )
    _db_arg(alerts)
    alerts.add_argument("--state", choices=_STATES, help="only alerts in this state")
    alerts.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    alerts.add_argument("--json", action="store_true", help="print the read API's JSON list")
    alerts.add_argument("--api", help=argparse.SUPPRESS)  # a dashboard habit: said, not taken
    alerts.set_defaults(func=_list)
    asub = alerts.add_subparsers(dest="alerts_command", metavar="ACTION")
    alerts.usage = (  # argparse writes an optional ACTION as if it were required
        "%(prog)s [-h] [--db URL] [--state {pending,firing,resolved}] [--limit LIMIT] [--json]"
        "\n       %(prog)s {backtest,export-prometheus} ..."
    )
    bt = asub.add_parser(
        "backtest",
        help="replay the rules over stored history: what would have fired, and when",
        description="Replay the rules over the jobs stored in the database and list the alerts "
        "that would have fired, with when they fired and resolved. The replay begins the rules' "
        "reach (7 days) before --since, as the live evaluator has walked it: an alert that fired "
        "before --since and still fired then is listed with its own firing time, marked (before "
        "the window). Tune thresholds with --rules before turning them on. presumed_dead is "
        "live-only and not replayed.",
    )
    bt.add_argument(
        "--since",
        default="30d",
        help="start: 30d, 12h, ISO 8601 (without a zone: UTC), unix seconds (default 30d)",
    )
    bt.add_argument("--until", default=None, help="end, same forms as --since (default: now)")
    bt.add_argument(
        "--step",
        default=None,
        metavar="DURATION",
        help="also evaluate on a regular grid of this step, e.g. 30s (default: none; the replay "
        "evaluates at every instant where a condition can change, which is exact)",
    )
    _rules_arg(bt)
    _db_arg(bt)
    bt.add_argument(
        "--json",
        action="store_true",
        help="print the firings as a JSON list; with --truth, an object "
        '{"firings": [...], "quality": {...}}',
    )
    bt.add_argument(
        "--truth",
        metavar="FILE",
        help="score the regression firings against the regressions planted in FILE "
        "(`ett simulate --truth FILE`): precision, recall, detection delay, false firings/day",
    )
    bt.set_defaults(func=_backtest)
    ex = asub.add_parser(
        "export-prometheus",
        help="write the rules as a Prometheus rules file over the fleet metrics",
        description="Write the rules as a Prometheus alerting rules file over the ett_fleet_* "
        "series of /metrics (check it with `promtool check rules`).",
    )
    _rules_arg(ex)
    ex.add_argument("-o", "--output", default="-", metavar="FILE", help="file (default stdout)")
    ex.set_defaults(func=_export)


def _extend_serve(serve: argparse.ArgumentParser) -> None:
    group = serve.add_argument_group("alerts")
    group.add_argument(
        "--alert-rules", metavar="FILE", help="rules overriding the defaults (ETT_ALERT_RULES)"
    )
    group.add_argument(
        "--alert-interval",
        metavar="DURATION",
        help="time between evaluations: 30s, 1m (default 30s; ETT_ALERT_INTERVAL_S)",
    )
    group.add_argument(
        "--alertmanager",
        metavar="URL",
        help="send alerts to this Alertmanager (POST /api/v2/alerts; ETT_ALERTMANAGER_URL)",
    )
    group.add_argument(
        "--dashboard-url",
        metavar="URL",
        help="dashboard base URL for the job links in alerts (ETT_DASHBOARD_URL)",
    )
    serve.set_defaults(func=_serve_with_alerts(serve.get_default("func")))


def _serve_with_alerts(
    serve: Callable[[argparse.Namespace], int],
) -> Callable[[argparse.Namespace], int]:
    """``serve``, once the alert options laid over the environment make settings whose rules
    load cleanly: a bad rules file stops the service before it starts, with the rule and field
    named. The settings travel on as ``args.alert_settings`` (into the collector's
    ``Settings.alerts``: ``ett_collector.commands._serve_security.apply``)."""

    def run(args: argparse.Namespace) -> int:
        from .rules import RulesError
        from .settings import AlertConfigError, AlertSettings

        given = _serve_options(args)
        try:
            settings = AlertSettings.from_env({**os.environ, **given})
            _say_if_empty(settings.load(), settings.rules_path)
        except RulesError as exc:
            raise CliError(f"alert rules: {exc}", exit_code=2) from None
        except AlertConfigError as exc:
            raise CliError(f"alerts: {_in_flag_words(str(exc), args, given)}") from None
        args.alert_settings = settings
        return serve(args)

    return run


def _in_flag_words(message: str, args: argparse.Namespace, given: dict[str, str]) -> str:
    """``message`` of a bad alert setting with each variable that a flag set named as that
    flag, and its value as typed (``--alert-interval 0s``, not ``ETT_ALERT_INTERVAL_S='0.0'``)."""
    for attr, env in _SERVE_ENV.items():
        if env in given and env in message:
            typed = getattr(args, attr)
            message = message.replace(
                f"{env}={given[env]!r}", f"--{attr.replace('_', '-')} {typed}"
            )
            message = message.replace(repr(given[env]), repr(typed))
            message = message.replace(env, f"--{attr.replace('_', '-')}")
    return message


def _serve_options(args: argparse.Namespace) -> dict[str, str]:
    """The alert options given to ``ett serve``, keyed by the variable each stands for."""
    from .rules import parse_duration

    given: dict[str, str] = {}
    for attr, env in _SERVE_ENV.items():
        value = getattr(args, attr, None)
        if value is None:
            continue
        if attr == "alert_interval":
            try:
                value = str(parse_duration(value))
            except ValueError as exc:
                raise CliError(f"--alert-interval {exc}", exit_code=2) from None
        given[env] = value
    return given


def _store(db: str | None) -> Any:
    """The collector's existing database (never created here).

    See ``ett_collector.commands._target``.
    """
    from ett_collector.commands._target import TargetError, open_for_reading, resolve

    try:
        return open_for_reading(resolve(db))
    except TargetError as exc:
        raise CliError(exc.message, exc.exit_code) from None


def _rules(path: str | None) -> Any:
    """The rules of ``--rules`` (else ``$ETT_ALERT_RULES``, else the defaults); a bad file is
    a ``CliError`` (exit 2) naming the option, the file and what is wrong."""
    from .rules import RulesError, load_rules

    given = path or os.environ.get("ETT_ALERT_RULES") or None
    try:
        rules = load_rules(given)
    except RulesError as exc:
        if given is None:
            raise CliError(str(exc), exit_code=2) from None
        option = "--rules" if path else "ETT_ALERT_RULES"
        raise CliError(f"{option} {exc}", exit_code=2) from None
    _say_if_empty(rules, given)
    return rules


def _say_if_empty(rules: Any, path: str | None) -> None:
    """A note on stderr when the rules file ``path`` gave no rule: an empty or truncated file
    left the defaults in force without a word (the export said "wrote 3 rule(s)")."""
    if path is not None and rules.defaults_only:
        print(
            f"note: {path} holds no rules: the default rules are in force "
            "(`rules: []` with `include_defaults: false` turns them all off)",
            file=sys.stderr,
        )


def _when(t: float | None) -> str:
    if t is None:
        return "-"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _group(labels: dict[str, str]) -> str:
    for key in ("model", "team"):
        if key in labels:
            return f"{key}={labels[key]}"
    return "-"


def _list(args: argparse.Namespace) -> int:
    from ._store import AlertStore

    if args.api:
        url = args.api.rstrip("/")
        raise CliError(
            f"--api: ett alerts reads the collector's database (--db URL); over HTTP the same "
            f"list is GET {url}/api/v1/alerts, and the dashboard's Alerts page",
            exit_code=2,
        )
    if not 1 <= args.limit <= MAX_LIST:
        raise CliError(f"--limit must be between 1 and {MAX_LIST:,}", exit_code=2)
    alerts = AlertStore(_store(args.db).engine).alerts(args.state, args.limit)
    if args.json:
        print(json.dumps([a.to_dict() for a in alerts], indent=2))
        return 0
    if not alerts:
        print("no alerts" + (f" in state {args.state}" if args.state else ""))
        return 0
    from rich.table import Table

    # two columns, so that an 80-column terminal keeps every rule name whole: the alert (its
    # state unless --state says it, rule, group, component, times) and what it says
    rows = []
    for a in alerts:
        lines = [a.rule, f"{_group(a.labels)} · {a.labels.get('component', '-')}"]
        if not args.state:
            lines.insert(0, a.state.value)
        lines.append(f"fired {_when(a.fired_at)}")
        if a.resolved_at is not None:
            lines.append(f"resolved {_when(a.resolved_at)}")
        rows.append(("\n".join(lines), a.annotations.get("description", "")))
    out = console()
    table = Table(show_lines=True)
    # the rule names (and states and times) whole; a group's line, a model's name, say, folds
    # past half the width: a 105-character model took the whole width and hid the "what"
    groups = {f"{_group(a.labels)} · {a.labels.get('component', '-')}" for a in alerts}
    lines = [line for alert, _ in rows for line in alert.splitlines()]
    whole = max([len(line) for line in lines if line not in groups] + [1])
    cap = max(whole, min(max(len(line) for line in lines), out.width // 2))
    table.add_column("alert", no_wrap=True, min_width=whole, max_width=cap)
    table.add_column("what", overflow="fold", min_width=min(20, out.width // 4))

    def folded(line: str) -> str:  # a group's line over the width, cut into lines of it
        if line not in groups or len(line) <= cap:
            return line
        return "\n".join(line[i : i + cap] for i in range(0, len(line), cap))

    for alert, what in rows:
        table.add_row("\n".join(map(folded, alert.splitlines())), what)
    out.print(table)
    return 0


def _backtest(args: argparse.Namespace) -> int:
    from ett_collector.read.query import QueryError, parse_instant
    from ett_collector.write.pipeline import Pipeline

    from ._backtest import backtest
    from .rules import parse_duration

    now = time.time()
    try:
        since = parse_instant(args.since, now)
        until = parse_instant(args.until, now) or now
    except QueryError as exc:
        raise CliError(str(exc), exit_code=2) from None
    if since is None or until <= since:
        raise CliError("--since must be before --until (e.g. --since 30d)", exit_code=2)
    try:
        step = parse_duration(args.step) if args.step is not None else None
    except ValueError as exc:
        raise CliError(f"--step {exc}", exit_code=2) from None
    if step is not None and step <= 0:
        raise CliError(f"--step must be a positive duration such as 30s, got {args.step!r}")
    rules = _rules(args.rules)
    store = _store(args.db)
    pipeline = Pipeline(store)
    while pipeline.recompute_dirty(limit=10_000):
        pass
    planted, truth_jobs = _planted(args.truth) if args.truth else (None, set())
    firings = backtest(store.engine, rules, since, until, step)
    quality = None
    if planted is not None:
        from ._quality import score
        from ._reads import load_facts
        from .rules import REGRESSION_KINDS

        jobs = load_facts(store.engine, None)
        _check_truth(args.truth, planted, truth_jobs, jobs)
        scored = {r.name for r in rules.rules if r.kind in REGRESSION_KINDS}
        regressions = [f for f in firings if f.rule in scored]
        quality = score(regressions, planted, since, until, jobs)
    if args.json:
        out: Any = [f.to_dict() for f in firings]
        if quality is not None:
            out = {"firings": out, "quality": quality.to_dict()}
        print(json.dumps(out, indent=2))
        return 0
    skipped = [r.name for r in rules.enabled() if not r.replayable]
    window = f"between {_when(since)} and {_when(until)}"
    not_replayed = f" (not replayed: {', '.join(skipped)})" if skipped else ""
    earlier = sum(f.before_window for f in firings)
    if earlier:  # found by the walk before the window, still firing at its start
        said = f"would have been firing {window} ({earlier} of them fired before it)"
    else:
        said = f"would have fired {window}"
    print(f"{len(firings)} alert(s) {said}{not_replayed}")
    from ett_collector.commands._render import visible

    for f in firings:
        labels = ", ".join(f"{k}={v}" for k, v in sorted(f.labels.items()) if k != "rule")
        ended = _when(f.resolved_at) if f.resolved_at else "firing"
        fired = _when(f.fired_at) + (" (before the window)" if f.before_window else "")
        print(visible(f"  {fired} .. {ended}  {f.rule}  {labels}"))
        print(visible(f"      {f.description}"))
    if quality is not None:
        _print_quality(quality, args.truth, since, until)
    return 0


def _check_truth(path: str, planted: list[Any], truth_jobs: set[str], jobs: list[Any]) -> None:
    """Refuse a truth file of another fleet (its jobs' lines name none of the database's jobs)
    and say on stderr which planted models or teams have no job in the database: scored as
    they are, their regressions are all MISSED and say nothing of the rules."""
    stored = {j.job_id for j in jobs}
    if truth_jobs and not truth_jobs & stored:
        raise CliError(
            f"--truth {path}: none of its {len(truth_jobs)} job(s) is in the database "
            f"(e.g. {sorted(truth_jobs)[0]!r}): the truth file of another fleet? Pass the file "
            "that `ett simulate --truth` wrote for this database"
        )
    groups = {("model", j.model) for j in jobs} | {("team", j.team) for j in jobs}
    for label, value in sorted({p.group for p in planted} - groups):
        print(
            f"note: {path} plants a regression of {label} {value!r}, which has no job in the "
            "database: it can only be MISSED",
            file=sys.stderr,
        )


def _planted(path: str) -> tuple[list[Any], set[str]]:
    """The planted regressions of a truth file (one JSON object a line; blank lines skipped)
    and the ids of its jobs.
    ``CliError`` naming the file (and the line) for one that is not UTF-8, a line that is not a
    JSON object, and a file without a line; a file of jobs alone (``ett simulate --truth``
    without ``--regress``) is scored, with a note on stderr."""
    from ._quality import planted_from
    from .rules import utf8_text

    try:
        with open(path, "rb") as f:
            text = utf8_text(f.read(), "a truth file is JSON lines")
    except OSError as exc:
        raise CliError(f"--truth: cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise CliError(f"--truth {path}: {exc}") from None
    records, planted = [], []
    jobs: set[str] = set()
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CliError(f"--truth {path}:{n}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise CliError(f"--truth {path}:{n}: not a JSON object, got {line.strip()[:40]}")
        try:
            planted += planted_from([record])
        except ValueError as exc:
            raise CliError(f"--truth {path}:{n}: {exc}") from None
        records.append(record)
        if "record" not in record and isinstance(record.get("job_id"), str):
            jobs.add(record["job_id"])
    if not records:
        raise CliError(
            f"--truth {path} holds no planted regressions (it is empty): write them with "
            "`ett simulate --truth FILE --regress SPEC`"
        )
    if not planted:
        print(
            f"note: {path} plants no regression: every regression firing counts as false",
            file=sys.stderr,
        )
    return planted, jobs


def _print_quality(q: Any, path: str, since: float, until: float) -> None:
    from ._backtest import replay_from

    def num(v: float | None, fmt: str = ".2f") -> str:
        return "-" if v is None else format(v, fmt)

    def unscored(p: Any) -> str:
        at = p.at
        if not p.regression:
            return f"factor {p.factor:g}: no slowdown to find"
        if at < since:
            return "onset before the backtest"
        if at > until:
            return "onset after the backtest"
        return "onset less than a day before the backtest's end"

    print(f"\nagainst the regressions planted in {path}:")
    print(
        f"  regression firings {q.firings}: {q.true_firings} name a planted regression, "
        f"{q.false_firings} do not ({num(q.false_per_day, '.3f')} false firings per day "
        f"over {q.days:.1f} days)"
    )
    print(f"  precision {num(q.precision)}   recall {num(q.recall)}")
    if q.by_rule:
        print("  by rule:")
        width = max(len(r.rule) for r in q.by_rule) + 1
        for r in q.by_rule:
            print(
                f"    {r.rule + ':':<{width}} {r.firings} firing(s), {r.true_firings} true, "
                f"{r.false_firings} false"
            )
    for d in q.detections:
        p = d.planted
        who = f"model={p.model}" if p.model is not None else f"team={p.team}"
        share = "" if d.share_pct is None else f", {d.share_pct:.1f}% of its lost time before"
        found = f"found after {d.delay_s / 3600:.1f} h" if d.found else "MISSED"
        if d.found and p.at + (d.delay_s or 0.0) < since:
            found += f" (firing since {_when(p.at + (d.delay_s or 0.0))}, before the window)"
        if d.scored:
            state = found
        else:  # the walk before the window covers the rules' reach: an onset before that
            # has a delay measured from where the walk began
            named = "; named by a firing" if p.at < replay_from(since) else f"; {found}"
            state = f"not scored ({unscored(p)})" + (named if d.found else "")
        print(f"  {who} {p.component} x{p.factor:g} at {_when(p.at)}: {state}{share}")


def _export(args: argparse.Namespace) -> int:
    from .prometheus import has_promql, rules_file

    rules = _rules(args.rules)
    text = rules_file(rules)
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    try:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}", exit_code=1) from None
    enabled = rules.enabled()
    written = [r for r in enabled if has_promql(r)]
    left = sorted(r.name for r in enabled if not has_promql(r))
    note = f" (left out, no PromQL: {', '.join(left)})" if left else ""
    print(f"wrote {len(written)} rule(s) to {args.output}{note}")
    return 0
