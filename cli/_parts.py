"""The parts that contribute subcommands to ``ett``, in the order ``ett --help`` lists them.

Each name is a module with ``register(sub)``: it adds its subparsers to ``sub`` and sets
``func`` (``args -> exit code``) on each. Importing it must stay cheap (no torch, no SQLAlchemy):
heavy imports belong inside the command functions.
"""

from __future__ import annotations

PARTS: tuple[str, ...] = (
    "collector.commands",
    "collector.alerts.commands",
    "trainer.commands",
    "simulator.commands",
    "grafana.commands",
    "dashboard.commands",
)
