"""The import layers of docs/architecture.md, checked on the source (every import, lazy ones
included).

- the domain imports nothing of ours but ``ett.semconv``; ``ett_collector.schemas`` only the
  domain;
- storage and otlp import the domain (never the pipeline, the query layer or the API);
- nothing in the collector imports the API but its commands, nor the commands but the parts'
  own commands; the collector never imports the trainer, the views or the simulator;
- the views (``dashboard``, ``grafana``) import only their own code, the pure read vocabulary
  (``ett_collector.schemas``, ``ett_collector.domain``) and ``ett.semconv``;
- ``cli`` imports only itself and the parts' commands modules (which alone import ``cli``);
- the simulator imports ``ett.semconv`` and the collector's ingest entry;
- the alerts are a pure rule model and fleet facts (the alerts and the vocabulary only); the
  service adds its background loop, ``alerts._reads`` alone reads storage, and it (as
  ``read/overview``) only through the public names of ``ett_collector.storage``;
- ``ett`` (the library) imports no collector, trainer or view code.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from ett_cli._parts import PARTS
from tests.support.layout import ROOT, import_names, module_name

FOLDERS = ("cli", "collector", "instrument", "trainer", "dashboard", "grafana", "simulator")
OURS = tuple(import_names().get(folder, folder) for folder in FOLDERS)
VOCABULARY = ("ett_collector.schemas", "ett_collector.domain", "ett.semconv")


@dataclass(frozen=True)
class Rule:
    """Modules under ``importer`` may import ours only under ``allowed``, never ``forbidden``."""

    importer: str
    allowed: tuple[str, ...]
    forbidden: tuple[str, ...] = ()


RULES = (  # the most specific importer wins
    Rule("ett", ("ett",)),
    Rule(
        "ett_collector",
        ("ett_collector", "ett.semconv"),
        ("ett_collector.api", "ett_collector.commands"),
    ),
    Rule("ett_collector.commands", ("ett_collector", "ett.semconv")),
    # a part's commands may use the collector's command helpers (database target, tables)
    Rule(
        "ett_collector.alerts.commands",
        ("ett_collector", "ett.semconv"),
        ("ett_collector.api",),
    ),
    Rule("ett_collector.api", ("ett_collector", "ett.semconv"), ("ett_collector.commands",)),
    Rule("ett_collector.domain", ("ett_collector.domain", "ett.semconv")),
    Rule("ett_collector.schemas", ("ett_collector.domain.model",)),
    Rule("ett_collector.otlp", ("ett_collector.otlp", "ett_collector.domain", "ett.semconv")),
    Rule("ett_collector.storage", ("ett_collector.storage", *VOCABULARY)),
    Rule("ett_dashboard", ("ett_dashboard", *VOCABULARY)),
    # the alert rule model and its PromQL are pure (no SQL, no HTTP): Grafana's alert rules are
    # generated from the same definitions as the collector's own
    Rule(
        "ett_grafana",
        (
            "ett_grafana",
            *VOCABULARY,
            "ett_collector.alerts.rules",
            "ett_collector.alerts.prometheus",
        ),
    ),
    # alerting: a pure rule model and fleet facts; the service alone runs threads, and it
    # reads the stored figures only through the storage facade (``_reads``)
    Rule("ett_collector.alerts", ("ett_collector.alerts", *VOCABULARY)),
    Rule(
        "ett_collector.alerts._service",
        ("ett_collector.alerts", *VOCABULARY, "ett_collector.write.periodic"),
    ),
    Rule(
        "ett_collector.alerts._reads",
        ("ett_collector.alerts", *VOCABULARY, "ett_collector.storage"),
    ),
    Rule("ett_collector.alerts.rules", ("ett_collector.alerts.rules", "ett.semconv")),
    Rule("ett_collector.alerts.prometheus", ("ett_collector.alerts", "ett.semconv")),
    Rule("ett_cli", ("ett_cli", *PARTS)),
    Rule("trainer", ("trainer", "ett")),
    Rule(
        "ett_simulator",
        (
            "ett_simulator",
            "ett.semconv",
            "ett_collector.domain",
            "ett_collector.write.pipeline",
            "ett_collector.storage",
            "ett_collector.otlp",
            "ett_collector.settings",  # ETT_WINDOW_S, read as the collector reads it
            "ett_collector.commands._target",  # --db, read as every ett command reads it
        ),
    ),
)


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _rule(module: str) -> Rule:
    """The rule of ``module``; a part's ``commands`` module may also import ``cli``."""
    rule = max((r for r in RULES if _under(module, r.importer)), key=lambda r: len(r.importer))
    if module.rpartition(".")[2] == "commands":
        return Rule(rule.importer, (*rule.allowed, "ett_cli"), rule.forbidden)
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
        (
            "ett_collector.domain._x",
            "from ett_collector.storage import Store\n",
            "ett_collector.domain",
        ),
        ("ett_collector.storage._x", "from ..pipeline import Pipeline\n", "ett_collector.storage"),
        ("ett_collector.read.query", "from ett_collector.api import create_app\n", "ett_collector"),
        ("ett_dashboard._x", "from ett_collector.read.query import Query\n", "ett_dashboard"),
        ("ett._x", "import trainer.train\n", "ett"),
        ("ett_cli._x", "from ett_collector import pipeline\n", "ett_cli"),
        (
            "ett_collector.alerts._fleet",
            "from ett_collector.storage import Store\n",
            "ett_collector.alerts",
        ),
        (
            "ett_collector.alerts._x",
            "from ..write.periodic import Periodic\n",
            "ett_collector.alerts",
        ),
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


FACADE_USERS = ("ett_collector.alerts", "ett_collector.read.overview")
"""Modules that reach storage only through its public names (``ett_collector.storage``)."""


def _storage_internal(alternatives: list[str]) -> bool:
    """Whether an import reaches into storage: a ``storage._x`` module or a ``_name`` of it."""
    head, names = alternatives[0], alternatives[1:]
    if not _under(head, "ett_collector.storage"):
        return False
    return head != "ett_collector.storage" or any(n.rpartition(".")[2][:1] == "_" for n in names)


def test_the_alerts_and_the_overview_use_only_the_storage_facade() -> None:
    crossing: list[str] = []
    for path in _sources():
        module = module_name(path)
        if any(_under(module, m) for m in FACADE_USERS):
            crossing += [
                f"{path.relative_to(ROOT)}:{line} imports {alternatives[0]}"
                for line, alternatives in _imports(path, module)
                if _storage_internal(alternatives)
            ]
    assert crossing == [], "storage internals used:\n" + "\n".join(crossing)


def test_the_facade_check_catches_an_internal(tmp_path: Path) -> None:
    fake = tmp_path / "x.py"
    fake.write_text("from ett_collector.storage import _advice\nfrom ..storage._tables import t\n")
    found = [alts for _, alts in _imports(fake, "ett_collector.read.overview")]
    assert [_storage_internal(alts) for alts in found] == [True, True]
    assert not _storage_internal(["ett_collector.storage", "ett_collector.storage.Store"])


def test_the_pure_alert_rules_load_no_storage_sql_or_http() -> None:
    """What Grafana's alert builder imports (the rules and their PromQL) loads none of the
    evaluator's storage, SQL or HTTP code, the alerts package's other names included."""
    probe = (
        "import sys, ett_collector.alerts.rules, ett_collector.alerts.prometheus\n"
        "heavy = ('ett_collector.storage', 'ett_collector.write', 'sqlalchemy', 'starlette')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_vocabulary_import_passes() -> None:
    rule = _rule("ett_dashboard.client")
    assert _allowed(rule, "ett_collector.schemas") and not _allowed(rule, "ett_collector.storage")


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
