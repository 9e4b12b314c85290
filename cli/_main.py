"""Build the parser from the registered parts, run the chosen command, turn errors into lines."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Sequence
from typing import Any

from ._errors import CliError
from ._parts import OPTIONAL, PARTS

EPILOG = """\
examples:
  ett serve                                  # collector on 127.0.0.1:4318, SQLite in $ETT_HOME
  ett report my-job                          # one job's ETT, losses and checkpoint advice
  ett lost-time --by component --since 7d    # where the fleet's GPU hours went
run `ett COMMAND -h` for a command's options and environment variables.
"""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ett-server")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    """The ``ett`` parser with every part's subcommands."""
    parser = argparse.ArgumentParser(
        prog="ett",
        description="Effective Training Time (ETT%) observability: where a training job's "
        "wall-clock time goes.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ett {_version()}")
    parser.add_argument(
        "--debug",
        action="store_true",
        help="print a traceback on unexpected errors (or ETT_DEBUG=1)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in PARTS:
        try:
            part = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if name not in OPTIONAL or exc.name != name.partition(".")[0]:
                raise
            _register_absent(sub, *OPTIONAL[name])
            continue
        part.register(sub)
    return parser


def _register_absent(
    sub: argparse._SubParsersAction[Any], commands: Sequence[str], why: str
) -> None:
    """List an absent part's commands; running one prints ``why`` and exits 2."""

    def refuse(_args: argparse.Namespace) -> int:
        raise CliError(why, exit_code=2)

    for command in commands:
        p = sub.add_parser(command, help=f"(not installed here) {why}", add_help=False)
        p.set_defaults(func=refuse, passthrough=True)


def _name(args: argparse.Namespace) -> str:
    """The command as typed, for the start of an error line: ``db prune``, ``serve``."""
    action = getattr(args, f"{args.command}_command", None)
    return f"{args.command} {action}" if isinstance(action, str) else str(args.command)


_TIME_OPTIONS = ("--since", "--until")
"""Options whose value may start with a dash (``--since -3d``, a duration before now)."""


def _join_dashed_values(argv: list[str]) -> list[str]:
    """``--since -3d`` as ``--since=-3d``: argparse would take ``-3d`` for an option of its
    own and stop with "expected one argument"."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return out + argv[i:]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if word in _TIME_OPTIONS and nxt[:1] == "-" and nxt[1:2].isdigit():
            out.append(f"{word}={nxt}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ett`` console script."""
    argv = _join_dashed_values(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not getattr(args, "passthrough", False):
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if getattr(args, "passthrough", False):
        args.rest = rest
    debug = args.debug or os.environ.get("ETT_DEBUG") == "1"
    try:
        code: int = args.func(args)
        if sys.stdout is not None:  # None when started with stdout closed (`ett ... >&-`)
            sys.stdout.flush()
        return code
    except CliError as exc:
        print(f"ett {_name(args)}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C: one line, where it exited 130 without a word
        print(f"ett {_name(args)}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `ett jobs --json | head`: the reader left; exit quietly, as Unix tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:
        if debug:
            traceback.print_exc()
        else:
            print(
                f"ett {_name(args)}: {type(exc).__name__}: {exc} (for details run it again "
                f"as `ett --debug {_name(args)} ...`)",
                file=sys.stderr,
            )
        return 1
