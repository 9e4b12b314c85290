"""The option blocks the collector's read commands share, one function per block, so that
``ett jobs``, ``lost-time``, ``fleet`` and ``checkpoint-advice`` spell them alike."""

from __future__ import annotations

from typing import Any

from ..domain.model import JobState


def add_json(parser: Any, what: str) -> None:
    """``--json``: print ``what`` (the read API's answer) instead of the table."""
    parser.add_argument("--json", action="store_true", help=f"print {what}")


def add_state(parser: Any, *, every: bool = True) -> None:
    """``--state``: only jobs in this state, the job's state now: a job that failed and then
    recovered is ``completed`` (``every``: the help names the default)."""
    default = "; default: every state" if every else ""
    parser.add_argument(
        "--state",
        choices=[s.value for s in JobState],
        help="only jobs in this state: the job's state now, so a job that failed and recovered "
        f"is completed{default}",
    )


def add_filters(parser: Any, *, attributes: bool = False) -> None:
    """``--model`` and ``--team``: only jobs of this model family and team (``attributes``: the
    help names the span attributes they match, ``ett.model`` and ``ett.team``)."""
    model, team = (", ett.model", ", ett.team") if attributes else ("", "")
    parser.add_argument("--model", help=f"only this model family{model} (default: every model)")
    parser.add_argument("--team", help=f"only this team{team} (default: every team)")


WHEN = "now-7d, ISO 8601 (without a zone: UTC), unix seconds"
"""The absolute forms every ``--since`` takes, beside a duration before now (``7d``, ``12h``)."""


def add_window(parser: Any, since: str | None = None) -> None:
    """``--since`` and ``--until``: the window a read covers (``since``: its default start)."""
    start = f"default {since}" if since else "default: all"
    parser.add_argument("--since", default=since, help=f"window start: 7d, 12h, {WHEN} ({start})")
    parser.add_argument(
        "--until", default=None, help="window end, same forms as --since (default: now)"
    )
