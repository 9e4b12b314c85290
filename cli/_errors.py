"""The one error a command raises to stop with a message instead of a traceback."""

from __future__ import annotations


class CliError(Exception):
    """A user-facing failure: the dispatcher prints ``ett: <message>`` and exits.

    ``exit_code`` is 2 for usage and configuration errors (the default), 1 for runtime failures.
    """

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
