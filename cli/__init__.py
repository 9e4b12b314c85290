"""The ``ett`` command: a thin dispatcher over the parts' own subcommands.

Each part (collector, trainer, simulator, dashboard, grafana, alerts) owns a ``commands`` module
with ``register(sub)``; :data:`ett_cli._parts.PARTS` lists them, so a new part arrives without
touching another part's code.
"""

from ._console import console
from ._errors import CliError
from ._main import main

__all__ = ["CliError", "console", "main"]
