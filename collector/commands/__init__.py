"""The collector's ``ett`` subcommands: the service, its database, and the questions users ask.

Every read command goes through the same query layer as the HTTP API and the dashboards. Each
module registers its own: ``serve_commands`` (``serve``), ``db_commands`` (``db``,
``recompute``), ``job_commands`` (``report``, ``jobs``, ``lost-time``), ``overview_commands``
(``fleet``, ``checkpoint-advice``); this module, the only one that imports ``ett_cli``, hands
them the error guard, the subcommand maker and the console (:class:`_runner.Kit`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from ett_cli import CliError, console

from ..settings import ConfigError
from ..storage._migrate import ForeignSchema
from . import db_commands, job_commands, overview_commands, serve_commands
from ._runner import CommandError, Kit, Run
from ._target import add_db_option as _db_arg


def register(sub: Any) -> None:
    """Add ``serve``, ``db``, ``recompute``, ``report``, ``jobs``, ``lost-time``, ``fleet`` and
    ``checkpoint-advice`` to ``ett``, in that order."""
    kit = Kit(command=_command, guard=_guard, console=console)
    for part in (serve_commands, db_commands, job_commands, overview_commands):
        part.register(sub, kit)


def _command(sub: Any, name: str, fn: Run, **texts: Any) -> Any:
    """The subcommand ``name`` (``texts``: its help, description...): it takes ``--db`` and runs
    ``fn`` through :func:`_guard`."""
    parser = sub.add_parser(name, **texts)
    _db_arg(parser)
    parser.set_defaults(func=_guard(fn))
    return parser


def _guard(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Run ``fn`` on the database ``--db`` names; configuration and database errors become one
    line (``CliError``): exit 2 for what the user wrote, 1 for a database that fails at run time."""

    def run(args: argparse.Namespace) -> int:
        from . import _target

        try:
            if hasattr(args, "db"):
                args.target = _target.resolve(args.db)
            return fn(args)
        except CommandError as exc:
            raise CliError(exc.message, exc.exit_code) from exc.__cause__
        except ConfigError as exc:
            raise CliError(f"configuration error: {exc}") from exc
        except _target.TargetError as exc:
            raise CliError(exc.message, exc.exit_code) from None
        except ForeignSchema as exc:
            where = f"database {args.target.shown}" if hasattr(args, "target") else "the database"
            raise CliError(f"{where}: {exc}", exit_code=1) from None
        except Exception as exc:
            from sqlalchemy.exc import DBAPIError

            if isinstance(exc, DBAPIError) and hasattr(args, "target"):
                error = _target.connection_error(args.target, exc)
                raise CliError(error.message, error.exit_code) from None
            raise

    return run
