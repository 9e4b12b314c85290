"""The import layers of DESIGN.md, checked on the source (every import, lazy ones included).

- the domain imports nothing of ours but ``instrument.semconv``; ``collector.schemas`` only the
  domain;
- storage and otlp import the domain (never the pipeline, the query layer or the API);
- nothing in the collector imports the API but its commands; the collector never imports the
  trainer, the views or the simulator;
- the views (``dashboard``, ``grafana``) import only their own code, the pure read vocabulary
  (``collector.schemas``, ``collector.domain``) and ``instrument.semconv``;
- ``cli`` imports only itself and the parts' commands modules (which alone import ``cli``);
- the simulator imports ``instrument.semconv`` and the collector's ingest entry;
- ``instrument`` imports no collector, trainer or view code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli._parts import PARTS

ROOT = Path(__file__).resolve().parents[2]
OURS = ("cli", "collector", "instrument", "trainer", "dashboard", "grafana", "simulator")
VOCABULARY = ("collector.schemas", "collector.domain", "instrument.semconv")


@dataclass(frozen=True)
class Rule:
    """Modules under ``importer`` may import ours only under ``allowed``, never ``forbidden``."""

    importer: str
    allowed: tuple[str, ...]
    forbidden: tuple[str, ...] = ()


RULES = (  # the most specific importer wins
    Rule("instrument", ("instrument",)),
    Rule("collector", ("collector", "instrument.semconv"), ("collector.api", "collector.commands")),
    Rule("collector.commands", ("collector", "instrument.semconv")),
    Rule("collector.api", ("collector", "instrument.semconv"), ("collector.commands",)),
    Rule("collector.domain", ("collector.domain", "instrument.semconv")),
    Rule("collector.schemas", ("collector.domain.model",)),
    Rule("collector.otlp", ("collector.otlp", "collector.domain", "instrument.semconv")),
    Rule("collector.storage", ("collector.storage", *VOCABULARY)),
    Rule("dashboard", ("dashboard", *VOCABULARY)),
    # the alert rule model and its PromQL are pure (no SQL, no HTTP): Grafana's alert rules are
    # generated from the same definitions as the collector's own
    Rule(
        "grafana", ("grafana", *VOCABULARY, "collector.alerts.rules", "collector.alerts.prometheus")
    ),
    Rule("collector.alerts.rules", ("collector.alerts.rules", "instrument.semconv")),
    Rule("collector.alerts.prometheus", ("collector.alerts", "instrument.semconv")),
    Rule("cli", ("cli", *PARTS)),
    Rule("trainer", ("trainer", "instrument")),
    Rule(
        "simulator",
        (
            "simulator",
            "instrument.semconv",
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


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
    for package in OURS:
        files += sorted((ROOT / package).rglob("*.py"))
    return files


def _allowed(rule: Rule, name: str) -> bool:
    if any(_under(name, f) for f in rule.forbidden):
        return False
    return any(_under(name, a) for a in rule.allowed)


def test_every_package_keeps_its_layer() -> None:
    broken: list[str] = []
    for path in _sources():
        module = _module_name(path)
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
        ("instrument._x", "import trainer.train\n", "instrument"),
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
