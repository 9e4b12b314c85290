"""``ett-instrument flush``: deliver what trainers on this host left in the spool.

An operator runs it after a collector outage, or a job's epilogue runs it after the last rank
exited. It takes every spool file (``ett._spool``) that no live process holds, oldest first,
sends its records to the collector, removes each file once delivered, and says what it did in
one line (plus one line per damaged file). The token comes from the environment (``ETT_TOKEN``,
``ETT_TOKEN_FILE`` or the OTLP headers), never from the spool, which holds none.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ._answers import refusal
from ._config import endpoint_usable, resolve_endpoint, resolve_spool
from ._credentials import Credentials
from ._spool import default_root, spool_files
from ._spool_send import Drained, Sender, drain_file

PROG = "ett-instrument flush"
EPILOG = """\
exit status: 0 when nothing is left to deliver (files a running trainer holds are its own),
1 when the collector did not take everything (what is left stays for the next flush),
2 on a usage error.

example (a job epilogue): ETT_TOKEN=... ett-instrument flush --job "$SLURM_JOB_ID"
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Deliver the spans that trainers on this host kept in the spool "
        "(ETT_SPOOL_DIR) because the collector did not take them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--spool-dir",
        help="the spool directory (default: $ETT_SPOOL_DIR, else $XDG_STATE_HOME/ett/spool, "
        "else ~/.local/state/ett/spool)",
    )
    parser.add_argument("--job", help="deliver only this job's files (default: every job's)")
    parser.add_argument(
        "--endpoint",
        help="collector base URL or full .../v1/traces URL (default: OTEL_EXPORTER_OTLP_"
        "(TRACES_)ENDPOINT, else http://127.0.0.1:4318)",
    )
    parser.add_argument(
        "--timeout", type=float, default=300.0, help="give up after this many seconds (default 300)"
    )
    return parser


def _root(given: str | None) -> Path:
    if given:
        return Path(given).expanduser()
    setting, _ = resolve_spool()
    return Path(setting).expanduser() if setting else default_root()


def flush(root: Path, job: str | None, sender: Sender, timeout_s: float) -> Drained:
    """Drain every spool file under ``root`` (of ``job`` only, when given) within
    ``timeout_s``, stopping at the first record the collector does not take."""
    out = Drained()
    deadline = time.monotonic() + timeout_s
    for path in spool_files(root, job):
        drain_file(path, sender, out, deadline)
        if not out.complete:
            break
        if time.monotonic() > deadline:
            out.timed_out = True
            break
    return out


def _count(n: int, noun: str, plural: str = "s") -> str:
    """``1 file``, ``2 files``: ``n`` and ``noun``, plural unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}{plural}"


def _report(out: Drained, root: Path, sender: Sender) -> int:
    for problem in out.problems:
        print(f"{PROG}: warning: {problem}; the bytes after it are lost", file=sys.stderr)
    line = (
        f"{PROG}: delivered {_count(out.spans, 'span')} ({_count(out.records, 'batch', 'es')}) "
        f"from {_count(out.files, 'file')}"
    )
    if out.skipped_live:
        line += f"; {_count(out.skipped_live, 'file')} held by running trainers left to them"
    lost = out.dropped_full + out.dropped_refused
    if lost:
        line += f"; {_count(lost, 'span')} had been lost (spool full, or refused by the collector)"
    print(line)
    if out.complete:
        return 0
    endpoint = sender.endpoint
    left = len(spool_files(root)) - out.skipped_live
    if out.stopped == -1:
        why = "the time given (--timeout) ran out"
    elif out.stopped is None and sender.problem:
        why = f"collector {endpoint}: {sender.problem}"
    elif out.stopped is None:
        why = f"collector {endpoint} did not answer"
    elif out.stopped in (401, 403, 404):
        said = refusal(
            endpoint, out.stopped, origin=sender.credentials.origin, reason=sender.reason
        )
        why = said.replace(". Spans are dropped, not retried", "")
    else:
        why = f"collector {endpoint} answered HTTP {out.stopped}"
        why += f": {sender.reason}" if sender.reason else ""
    print(
        f"{PROG}: {why}; {_count(left, 'file')} left in {root}: run it again later", file=sys.stderr
    )
    return 1


def flush_main(argv: Sequence[str]) -> int:
    """``ett-instrument flush [options]``: see :func:`_parser`."""
    args = _parser().parse_args(list(argv))
    if args.timeout <= 0:
        print(f"{PROG}: --timeout must be positive", file=sys.stderr)
        return 2
    root = _root(args.spool_dir)
    if not root.is_dir():
        print(f"{PROG}: nothing to deliver: no spool at {root}")
        return 0
    endpoint = resolve_endpoint(args.endpoint, warn=False)
    if not endpoint_usable(endpoint):
        print(
            f"{PROG}: cannot send to {endpoint!r}: not an http:// or https:// URL with a host "
            "and a port number (--endpoint, else OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT); "
            "nothing was sent",
            file=sys.stderr,
        )
        return 2
    sender = Sender(endpoint, Credentials.resolve(), timeout_s=min(10.0, args.timeout))
    try:
        out = flush(root, args.job, sender, args.timeout)
    except OSError as exc:  # the folder itself unreadable: one line, no traceback
        print(f"{PROG}: cannot read the spool {root}: {exc.strerror}", file=sys.stderr)
        return 1
    return _report(out, root, sender)
