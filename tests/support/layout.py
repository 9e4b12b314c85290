"""Where each import name's code lives in this repository: ``src/`` holds one link per package
folder (``src/ett -> ../instrument``), the build maps the same folders to the same names."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def import_names() -> dict[str, str]:
    """``{folder: import name}`` of every package folder linked from ``src/``."""
    return {link.resolve().name: link.name for link in sorted((ROOT / "src").iterdir())}


def module_name(path: Path) -> str:
    """The import name of the module in ``path`` (a file under a package folder)."""
    folder, *rest = path.resolve().relative_to(ROOT).with_suffix("").parts
    parts = [import_names().get(folder, folder), *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)
