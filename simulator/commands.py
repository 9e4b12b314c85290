"""``ett simulate``: send a simulated fleet to a collector, or write it into its database."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ett_cli import CliError

if TYPE_CHECKING:
    from .fleet import FleetSpec
    from .simulation import SimulationResult
    from .sinks import Sink

EPILOG = """\
examples:
  ett simulate --jobs 300 --days 30                      # to $OTEL_EXPORTER_OTLP_ENDPOINT or :4318
  ett simulate --jobs 300 --days 30 --db sqlite:///fleet.db   # straight into a database (faster)
  ett simulate --jobs 50 --truth truth.jsonl --dry-run   # what would be sent, sending nothing
  ett simulate --live 3                                  # 3 jobs running in real time
  ett simulate --regress "model=dlrm-large component=checkpoint factor=3 at=2026-11-20T00:00:00Z"
  ett simulate --regress "model=dcn-v2 component=step factor=1.3 at=2026-11-20T00:00:00Z"
  ett simulate --straggler "model=dlrm-large rank=3 factor=1.5 at=2026-11-20T00:00:00Z"

Inside the loop: component=step stretches every rank's step time (a slow model: fewer samples per
second); --straggler makes one rank of every job of the model (with more ranks than R) compute F
times longer per step from the instant on, while the others wait for it in their collectives (all
ranks' step times stay equal, and grow by share x (F - 1)). Windows carry each rank's wait as
ett.window.wait_s (profile table [loop]).

The history is the window from --start to --start + --days; by default it ends now. No span of
it ends after the window: the --jobs training jobs arrive uniformly over the window, and one that
would still be running at its end (its restarts and its publish job included) is left out whole,
never cut short (so no job looks presumed dead). The command prints how many were left out: a
job lasts hours, so about 2 % of a week's jobs, 15 % of two days'. --live jobs are not history:
they start now and run on in real time.

--truth FILE (JSON lines): first one line per --regress, as given, also those planted after the
history's end, e.g.
  {"record": "regression", "model": "dlrm-small", "team": null, "component": "checkpoint",
   "factor": 6.0, "at": 1796061600.0, "at_iso": "2026-11-30T18:00:00Z"}
(model or team is null); then one line per --straggler, as given, e.g.
  {"record": "straggler", "model": "dlrm-large", "rank": 3, "factor": 1.5,
   "at": 1796061600.0, "at_iso": "2026-11-30T18:00:00Z"}
(a slow model is a regression line with "component": "step"); then one line per job sent
(history, publish and live jobs) with the read API's field names and no "record" key. A job
left out has no line. Read it in Python with ett_simulator.read_truth(FILE) -> (jobs,
regressions) and ett_simulator.read_stragglers(FILE).

The same arguments (with --start) give byte-identical spans. The default profile, with every key
documented, is simulator/default_profile.toml; --profile FILE is merged over it.
environment: OTEL_EXPORTER_OTLP_ENDPOINT, ETT_TOKEN, ETT_WINDOW_S (window length of --live jobs)
"""

DEFAULT_ENDPOINT = "http://127.0.0.1:4318"


def register(sub: Any) -> None:
    """Add ``simulate`` to ``ett``."""
    p = sub.add_parser(
        "simulate",
        help="send a simulated fleet of training jobs (OTLP spans) to a collector",
        description="Simulate a fleet of training jobs (start-up, checkpoints, evals, failures, "
        "restarts, publish jobs) over simulated wall-clock time and send its spans over "
        "OTLP/HTTP, or write them into a collector database. The history ends at --start + "
        "--days (default: now): jobs still running then are left out. --truth writes what was "
        "planted and sent: one JSON object per regression, then one per job with the read API's "
        "field names.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--endpoint",
        metavar="URL",
        help=f"collector base URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT, else {DEFAULT_ENDPOINT})",
    )
    p.add_argument(
        "--db",
        metavar="URL",
        help="write into this collector database instead "
        "(sqlite:///PATH, a plain path to a SQLite file, or postgresql+psycopg://USER@HOST:PORT/DB)",
    )
    _add_fleet_options(p)
    _add_plant_options(p)
    p.add_argument("--gzip", action="store_true", help="gzip request bodies")
    p.add_argument("--batch", type=int, default=2048, help="spans per request (default 2048)")
    p.add_argument("--token", default=None, help="bearer token (default: $ETT_TOKEN)")
    p.set_defaults(func=_simulate)


def _add_fleet_options(p: argparse.ArgumentParser) -> None:
    """The options that say which history to simulate."""
    p.add_argument("--jobs", type=int, default=20, help="training jobs of history (default 20)")
    p.add_argument(
        "--start",
        metavar="ISO",
        help="start of the history, not after now unless --live (default: now - days: it ends now)",
    )
    p.add_argument(
        "--days",
        type=float,
        default=7.0,
        help="length of the history (default 7); it ends at start + days, jobs still running "
        "then are left out",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--models", metavar="A,B", help="model names (default: the profile's)")
    p.add_argument("--teams", metavar="X,Y", help="team names (default: the profile's)")
    p.add_argument("--profile", metavar="FILE", help="TOML profile merged over the default")


def _add_plant_options(p: argparse.ArgumentParser) -> None:
    """The options of what is written (``--truth``, ``--dry-run``) and planted (``--live``,
    ``--regress``, ``--straggler``)."""
    p.add_argument(
        "--truth",
        metavar="FILE",
        help="write the planted regressions and each sent job's true figures (JSON lines)",
    )
    p.add_argument("--dry-run", action="store_true", help="generate (and --truth) only")
    p.add_argument(
        "--live",
        type=int,
        default=0,
        metavar="N",
        help="then run N jobs in real time, from now on (not history: they may run past the "
        "history's end; windows every ETT_WINDOW_S; default 0: none)",
    )
    p.add_argument(
        "--regress",
        action="append",
        default=[],
        metavar="SPEC",
        help='"model=M component=C factor=K at=ISO" (or team=T); repeatable',
    )
    p.add_argument(
        "--straggler",
        action="append",
        default=[],
        metavar="SPEC",
        help='"model=M rank=R factor=F at=ISO": rank R of the model\'s jobs computes F times '
        "longer per step from then on; repeatable",
    )


def _names(text: str | None, what: str) -> list[str] | None:
    if text is None:
        return None
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise CliError(f"{what} {text!r}: write names separated by commas, e.g. {what} a,b")
    return names


def _window_s() -> float:
    """The collector's train window length (``ETT_WINDOW_S``), read as the collector reads it."""
    from ett_collector.settings import ConfigError, window_s_from_env

    try:
        return window_s_from_env()
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def _simulate(args: argparse.Namespace) -> int:
    from .simulation import simulate
    from .sinks import EndpointSink, SendError

    if args.batch < 1:
        raise CliError(f"--batch must be at least 1, got {args.batch}")
    if args.db and args.endpoint:
        raise CliError("give --endpoint or --db, not both")
    fleet = _fleet(args)
    sink, where = _sink(args)
    if sink is not None:
        _refuse_a_second_fleet(sink, fleet, args)
        if isinstance(sink, EndpointSink):
            sink.on_retry = _say_retrying
    try:
        result = simulate(fleet, sink, args.truth, args.batch, progress=sys.stderr.isatty())
    except SendError as exc:
        sent = getattr(sink, "delivered", None)
        note = "" if sent is None else f" ({sent:,} spans were delivered before it)"
        raise CliError(f"sending failed: {exc}{note}", exit_code=1) from None
    except BrokenPipeError:
        raise  # --truth /dev/stdout read by `head`: the reader left; ett ends quietly
    except OSError as exc:
        raise CliError(f"{exc}", exit_code=1) from None
    _print_summary(result, fleet, where, args.truth)
    if sink is not None and result.accepted != result.spans:
        print(
            f"ett simulate: the collector accepted {result.accepted:,} of {result.spans:,} spans",
            file=sys.stderr,
        )
        return 1
    return 0


def _say_retrying(why: str, left_s: float) -> None:
    print(f"ett simulate: {why}; retrying for up to {left_s:.0f} s", file=sys.stderr, flush=True)


def _refuse_a_second_fleet(sink: Sink, fleet: FleetSpec, args: argparse.Namespace) -> None:
    """``CliError`` when the target already holds this seed's history jobs and the run would
    write them again elsewhere in time: the second fleet's spans were merged into the first's
    jobs (a negative time to recover, ETT and unsaved time changed, no word). The same run
    replayed (the same ``--start``) changes nothing and is let through."""
    from .fleet import history_job_id

    if args.start:
        return
    ids = [history_job_id(fleet.seed, i) for i in range(min(fleet.jobs, 20))]
    held = sink.existing(ids)
    if held:
        raise CliError(
            f"{held[0]} and the other jobs of --seed {fleet.seed} are there already, from an "
            f"earlier ett simulate: a second fleet of the same seed would be merged into them "
            f"and spoil their figures; pass another --seed (e.g. --seed {fleet.seed + 1}), a "
            "fresh --db, or the first run's --start to replay it"
        )


def _fleet(args: argparse.Namespace) -> FleetSpec:
    """The fleet the options ask for; ``CliError`` when they cannot be read, or when its
    history lies where OTLP cannot carry it (nothing is sent then)."""
    from .profile import ProfileError
    from .regression import format_instant, parse_instant
    from .simulation import fleet_spec

    now = time.time()
    try:
        start = parse_instant(args.start, "--start") if args.start else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if start is not None and start > now and not args.live:
        # the history is what happened up to the command's now (docs/simulator.md, "History
        # ends now"); a start after it would write a past that has not happened yet
        raise CliError(
            f"--start {args.start}: after now ({format_instant(round(now))}); the history lies "
            "before the command's now: give an earlier --start, or none (it then ends now)"
        )
    try:
        fleet = fleet_spec(
            profile=args.profile,
            models=_names(args.models, "--models"),
            teams=_names(args.teams, "--teams"),
            regress=args.regress,
            stragglers=args.straggler,
            jobs=args.jobs,
            days=args.days,
            seed=args.seed,
            start=start,
            live=args.live,
            live_window_s=_window_s(),
        )
        fleet.window(now)  # a window OTLP cannot carry: ValueError, nothing sent
    except (ProfileError, ValueError) as exc:
        raise CliError(str(exc)) from None
    return fleet


def _sink(args: argparse.Namespace) -> tuple[Sink | None, str]:
    """Where the spans go (None with ``--dry-run``) and how the summary names it."""
    from .sinks import DatabaseSink, EndpointSink

    if args.dry_run:
        return None, "nowhere (dry run)"
    if args.db is not None:
        from ett_collector.commands._target import TargetError, require_writable, resolve
        from ett_collector.storage import Store, db_reason  # the driver's line, not SQLAlchemy's

        if "://" not in args.db and args.db.strip():  # a plain path: a SQLite file to create
            args.db = f"sqlite:///{Path(args.db).expanduser().resolve()}"
        try:  # the readers' rules: an empty --db, or an in-memory SQLite one, is refused
            target = resolve(args.db)
        except TargetError as exc:
            raise CliError(str(exc), exit_code=exc.exit_code) from None
        args.db = target.url
        store = Store(args.db)
        try:  # a hot standby, read-only sessions or a file this user may not write: one line,
            # before anything is written (as `ett db prune` and `ett serve` refuse them)
            require_writable(target, store, "`ett simulate --db`")
        except TargetError as exc:
            store.engine.dispose()  # nothing written, nothing to tidy (close() may write)
            if exc.__cause__ is not None:  # it could not be asked: unreachable, say
                why = db_reason(exc.__cause__)
                raise CliError(
                    f"cannot open database {_shown(args.db)}: {why}", exit_code=1
                ) from None
            raise CliError(str(exc), exit_code=exc.exit_code) from None

        try:
            return DatabaseSink(args.db, window_s=_window_s(), store=store), "the database"
        except Exception as exc:
            raise CliError(
                f"cannot open database {_shown(args.db)}: {db_reason(exc)}", exit_code=1
            ) from None
    endpoint = args.endpoint or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    endpoint = endpoint or DEFAULT_ENDPOINT
    token = args.token or os.environ.get("ETT_TOKEN")
    try:
        sink = EndpointSink(endpoint, 6 if args.gzip else None, token)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    _check_listening(endpoint)
    return sink, endpoint


def _shown(url: str) -> str:
    """``url`` without its password (as the other commands show a database)."""
    from sqlalchemy.engine import make_url

    try:
        return repr(make_url(url).render_as_string(hide_password=True))
    except Exception:  # not a URL SQLAlchemy reads: shown as typed, it holds no parsed password
        return repr(url)


def _print_summary(
    result: SimulationResult, fleet: FleetSpec, where: str, truth: str | None
) -> None:
    """The two lines ``ett simulate`` ends with: what was sent where, and what the history's
    end left out."""
    from .regression import format_instant

    jobs = len(result.truths)
    failed = sum(1 for t in result.truths if t.state == "failed")
    print(
        f"simulated {jobs} job(s) ({failed} failed), {result.spans:,} spans in "
        f"{result.requests} request(s) to {where} in {result.seconds:.1f} s"
        + (f"; truth in {truth}" if truth else "")
    )
    print(
        f"history {format_instant(round(result.start))} to {format_instant(round(result.end))}: "
        f"{len(result.dropped)} of {fleet.jobs} training job(s) left out, "
        "as they would still be running at its end"
    )


def _check_listening(endpoint: str) -> None:
    """``CliError`` (exit 1) when nothing accepts a connection at ``endpoint`` now: the sink
    retries a lost collector for about a minute and a half, which is right during a run but
    only silence before the first request."""
    import socket
    import urllib.parse

    url = urllib.parse.urlsplit(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "", port), timeout=10):
            pass
    except OSError as exc:
        raise CliError(
            f"nothing answers at {endpoint} ({exc.strerror or exc}): start the collector "
            "(ett serve), or pass --endpoint URL, or --db URL to write into a database",
            exit_code=1,
        ) from None
