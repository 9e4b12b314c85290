"""The trainer's ``ett`` subcommands: ``ett train`` and ``ett publish``.

Both hand their arguments to the trainer's own parsers; torch is imported only when they run.
"""

from __future__ import annotations

import argparse
from typing import Any

from ett_cli import CliError


def register(sub: Any) -> None:
    """Add ``train`` and ``publish`` (their options: ``ett train -h``, ``ett publish -h``)."""
    for name, helptext in (
        ("train", "run the instrumented TorchRec trainer (see `ett train -h`)"),
        ("publish", "standalone model publishing job (see `ett publish -h`)"),
    ):
        p = sub.add_parser(name, help=helptext, add_help=False)
        p.set_defaults(func=_run, passthrough=True)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "train":
            from .train import main as run
        else:
            from .publish import main as run
    except ImportError as exc:
        raise CliError(
            f"the trainer needs torch and torchrec ({exc}); run `make demo` or `make test`, "
            "which install them into .venv"
        ) from exc
    result: int = run(list(args.rest))
    return result
