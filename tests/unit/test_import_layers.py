"""The import layers of DESIGN.md, checked on the source (every import, lazy ones included).

- the domain imports nothing of ours but ``ett.semconv``; ``collector.schemas`` only the
  domain;
- storage and otlp import the domain (never the pipeline, the query layer or the API);
- nothing in the collector imports the API but its commands; the collector never imports the
  trainer, the views or the simulator;
- the views (``dashboard``, ``grafana``) import only their own code, the pure read vocabulary
  (``collector.schemas``, ``collector.domain``) and ``ett.semconv``;
- ``cli`` imports only itself and the parts' commands modules (which alone import ``cli``);
- the simulator imports ``ett.semconv`` and the collector's ingest entry;
- ``ett`` (the library) imports no collector, trainer or view code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli._parts import PARTS
from tests.support.layout import ROOT, import_names, module_name

FOLDERS = ("cli", "collector", "instrument", "trainer", "dashboard", "grafana", "simulator")
OURS = tuple(import_names().get(folder, folder) for folder in FOLDERS)
VOCABULARY = ("collector.schemas", "collector.domain", "ett.semconv")


@dataclass(frozen=True)
class Rule:
    """Modules under ``importer`` may import ours only under ``allowed``, never ``forbidden``."""

    importer: str
    allowed: tuple[str, ...]
    forbidden: tuple[str, ...] = ()


RULES = (  # the most specific importer wins
    Rule("ett", ("ett",)),
    Rule("collector", ("collector", "ett.semconv"), ("collector.api", "collector.commands")),
    Rule("collector.commands", ("collector", "ett.semconv")),
    Rule("collector.api", ("collector", "ett.semconv"), ("collector.commands",)),
    Rule("collector.domain", ("collector.domain", "ett.semconv")),
    Rule("collector.schemas", ("collector.domain.model",)),
    Rule("collector.otlp", ("collector.otlp", "collector.domain", "ett.semconv")),
    Rule("collector.storage", ("collector.storage", *VOCABULARY)),
    Rule("dashboard", ("dashboard", *VOCABULARY)),
    # the alert rule model and its PromQL are pure (no SQL, no HTTP): Grafana's alert rules are
    # generated from the same definitions as the collector's own
    Rule(
        "grafana", ("grafana", *VOCABULARY, "collector.alerts.rules", "collector.alerts.prometheus")
    ),
    Rule("collector.alerts.rules", ("collector.alerts.rules", "ett.semconv")),
    Rule("collector.alerts.prometheus", ("collector.alerts", "ett.semconv")),
    Rule("cli", ("cli", *PARTS)),
    Rule("trainer", ("trainer", "ett")),
    Rule(
        "simulator",
        (
            "simulator",
            "ett.semconv",
            "collector.domain",
            "collector.pipeline",
            "collector.storage",
            "collector.otlp",
            "collector.replay",
        ),
    ),
)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _rule(module: str) -> Rule:
    """The rule of ``module``; a part's ``commands`` module may also import ``cli``."""
    rule = max((r for r in RULES if _under(module, r.importer)), key=lambda r: len(r.importer))
    if module.rpartition(".")[2] == "commands":
        return Rule(rule.importer, (*rule.allowed, "cli"), rule.forbidden)
    return rule


def _imports(path: Path, module: str) -> list[tuple[int, list[str]]]:
    """``(line, alternatives)`` per import of ours: it passes when any alternative is allowed
    (``from a import b`` names ``a`` and ``a.b``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, [a.name]) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            out.append((node.lineno, [base, *(f"{base}.{a.name}" for a in node.names)]))
    return [(line, alts) for line, alts in out if alts[0].split(".")[0] in OURS]


def _sources() -> list[Path]:
    files: list[Path] = []
    for folder in FOLDERS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def _allowed(rule: Rule, name: str) -> bool:
    if any(_under(name, f) for f in rule.forbidden):
        return False
    return any(_under(name, a) for a in rule.allowed)


def test_every_package_keeps_its_layer() -> None:
    broken: list[str] = []
    for path in _sources():
        module = module_name(path)
        rule = _rule(module)
        for line, alternatives in _imports(path, module):
            if not any(_allowed(rule, name) for name in alternatives):
                where = path.relative_to(ROOT)
                broken.append(f"{where}:{line} imports {alternatives[0]} (layer {rule.importer})")
    assert broken == [], "imports across layers:\n" + "\n".join(broken)


@pytest.mark.parametrize(
    ("module", "source", "rule_of"),
    [
        ("collector.domain._x", "from collector.storage import Store\n", "collector.domain"),
        ("collector.storage._x", "from ..pipeline import Pipeline\n", "collector.storage"),
        ("collector.query", "from collector.api import create_app\n", "collector"),
        ("dashboard._x", "from collector.query import Query\n", "dashboard"),
        ("ett._x", "import trainer.train\n", "ett"),
        ("cli._x", "from collector import pipeline\n", "cli"),
    ],
)
def test_the_check_catches_a_crossing(
    tmp_path: Path, module: str, source: str, rule_of: str
) -> None:
    fake = tmp_path / "x.py"
    fake.write_text(source)
    rule = _rule(module)
    [(_, alternatives)] = _imports(fake, module)
    assert rule.importer == rule_of
    assert not any(_allowed(rule, name) for name in alternatives)


def test_the_vocabulary_import_passes() -> None:
    rule = _rule("dashboard.client")
    assert _allowed(rule, "collector.schemas") and not _allowed(rule, "collector.storage")


def test_no_import_spells_a_folder_name() -> None:
    """A package folder is imported by its import name (``ett``, not ``instrument``): the folder
    name would import a second copy of the module from the checkout, and not at all once
    installed from the wheels."""
    renamed = {f for f, name in import_names().items() if f != name}
    found: list[str] = []
    scanned = [*_sources(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    for path in scanned:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] in renamed
            ]
    assert found == []
