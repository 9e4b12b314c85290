"""The library's shape: one Session with an explicit signature, modules that import each other
in one direction only, span scopes that know a protocol and not the session."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import ett
from ett import _session, _spans

PACKAGE = Path(ett.__file__).resolve().parent


def _own_imports(path: Path) -> set[str]:
    """The ``instrument`` modules that ``path`` imports (relative imports, anywhere in it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module)
            else:
                names.update(alias.name for alias in node.names)
    return names


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    return {p.stem: _own_imports(p) & modules for p in PACKAGE.glob("*.py") if p.stem != "__init__"}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (as a path), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_imports_without_cycles() -> None:
    graph = _graph()
    assert {"_session", "_spans", "_emitter"} <= set(graph)  # the scan sees the modules

    assert _cycle(graph) is None


def test_span_scopes_do_not_know_the_session() -> None:
    graph = _graph()

    for module in ("_spans", "_emitter", "_persist", "_compile", "_windows"):
        assert "_session" not in graph[module], module
        assert "_setup" not in graph[module], module


def test_session_has_an_explicit_signature() -> None:
    parameters = inspect.signature(ett.Session).parameters.values()
    kinds = {p.kind for p in parameters}

    assert inspect.Parameter.VAR_POSITIONAL not in kinds
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert [p.name for p in parameters][:2] == ["identity", "tracer"]
    assert ett.Session.__mro__[1] is object  # one class, not a core and a subclass


def test_the_emitter_satisfies_the_scope_protocols() -> None:
    sink = _session.span_sink(ett.current())
    block = _spans.SpanBlock(sink, "x", {})

    with block:  # a disabled session's sink: starts and ends invalid spans, raises nothing
        pass
    assert callable(sink.start) and callable(sink.end)
