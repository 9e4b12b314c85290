"""A schema upgrade run by a command (``ett db upgrade``, ``ett serve``, ``ett db
grant-readonly``), and what it did in words: ``ett serve`` migrated a database at an older
schema and said only "listening"; ``ett db grant-readonly`` migrated 0010 to 0011 silently.
"""

from __future__ import annotations

from typing import Any


def run_upgrade(store: Any) -> tuple[str | None, list[str]]:
    """Upgrade ``store`` to the newest schema: the revision it was at (None: none) and the
    revisions applied, oldest first."""
    before = store.revision()
    return before, store.upgrade()


def describe(before: str | None, applied: list[str]) -> str | None:
    """What an upgrade did, in words (None: nothing, the schema was the newest)."""
    if not applied:
        return None
    if before is None:
        return f"created the collector's schema (migrations {applied[0]} to {applied[-1]})"
    return f"applied migration(s) {', '.join(applied)}: the schema is now {applied[-1]}"
