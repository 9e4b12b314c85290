"""The parts that contribute subcommands to ``ett``, in the order ``ett --help`` lists them.

Each name is a module with ``register(sub)``: it adds its subparsers to ``sub`` and sets
``func`` (``args -> exit code``) on each. Importing it must stay cheap (no torch, no SQLAlchemy):
heavy imports belong inside the command functions.

A part in :data:`OPTIONAL` may be absent: the reference trainer ships with the repository, not
with the ``ett-server`` distribution. Where it cannot be imported, its commands are still listed
and answer with :data:`OPTIONAL`'s line instead of running.
"""

from __future__ import annotations

PARTS: tuple[str, ...] = (
    "ett_collector.commands",
    "ett_collector.alerts.commands",
    "trainer.commands",
    "ett_simulator.commands",
    "ett_grafana.commands",
    "ett_dashboard.commands",
)

OPTIONAL: dict[str, tuple[tuple[str, ...], str]] = {
    "trainer.commands": (
        ("train", "publish"),
        "the reference trainer is part of the ETT repository, not of the ett-server "
        "distribution: run it from a checkout (`make demo` installs it into .venv)",
    ),
}
"""Parts that may be missing: ``{module: (its commands, what to tell a user who runs one)}``."""
