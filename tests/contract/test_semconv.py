"""Contract: the wire strings of the span vocabulary (docs/metrics.md, "The spans it reads") never
change by accident.

Every string constant and every enum of ``instrument/semconv.py`` is pinned here to its literal.
A new constant must be added here (and to docs/metrics.md unless it is an extension). The second
part checks that no other module of the project spells an ``ett.`` string: they import semconv.
"""

from __future__ import annotations

import ast
import inspect
from enum import StrEnum
from pathlib import Path

import pytest

from ett import semconv

ROOT = Path(__file__).resolve().parents[2]

PINNED_CONSTANTS = {
    "SCHEMA_VERSION": "1",
    "NAMESPACE": "ett.",
    # resource attributes
    "JOB_ID": "ett.job.id",
    "ATTEMPT": "ett.attempt",
    "RANK": "ett.rank",
    "WORLD_SIZE": "ett.world_size",
    "MODEL": "ett.model",
    "TEAM": "ett.team",
    "SERVICE_NAME": "service.name",
    "HOST_NAME": "host.name",
    # span names
    "SPAN_ATTEMPT": "ett.attempt",
    "SPAN_STARTUP_PREFIX": "ett.startup.",
    "SPAN_FIRST_BATCH": "ett.first_batch",
    "SPAN_TRAIN_WINDOW": "ett.train.window",
    "SPAN_CHECKPOINT_SAVE": "ett.checkpoint.save",
    "SPAN_CHECKPOINT_PERSIST": "ett.checkpoint.persist",
    "SPAN_COMPILE": "ett.compile",
    "SPAN_EVAL": "ett.eval",
    "SPAN_PUBLISH": "ett.publish",
    "SPAN_FAILURE": "ett.failure",
    # span attributes
    "ATTEMPT_END_REASON": "ett.attempt.end_reason",
    "FAILURE_CAUSE": "ett.failure.cause",
    "COMPONENT": "ett.component",
    "STEP": "ett.step",
    "STEP_FIRST": "ett.step.first",
    "STEP_LAST": "ett.step.last",
    "SAMPLES": "ett.samples",
    "CHECKPOINT_STEP": "ett.checkpoint.step",
    "CHECKPOINT_MODE": "ett.checkpoint.mode",
    "CHECKPOINT_BYTES": "ett.checkpoint.bytes",
    "COMPILE_CACHE": "ett.compile.cache",
    "COMPILE_FRAMES": "ett.compile.frames",
    "PUBLISH_STANDALONE": "ett.publish.standalone",
    "ERROR_TYPE": "error.type",
    # extensions (not in the contract's spans, docs/metrics.md; documented in semconv.py)
    "TELEMETRY_DROPPED_SPANS": "ett.telemetry.dropped_spans",
    "TELEMETRY_SPOOL_DROPPED_SPANS": "ett.telemetry.spool_dropped_spans",
    "FAILURE_PHASE": "ett.failure.phase",
    "CODE_STACKTRACE": "code.stacktrace",
    "COMPILE_TRIGGER": "ett.compile.trigger",
    "BARRIER": "ett.barrier",
    "SPAN_DATA_WAIT": "ett.data.wait",
    "SPAN_BLOCKING": "ett.blocking",
    "SPAN_SHUTDOWN_PREFIX": "ett.shutdown.",
    "BLOCKING_NAME": "ett.blocking.name",
    "STARTUP_PART": "ett.startup.part",
    "WINDOW_WAIT_S": "ett.window.wait_s",
}

PINNED_ENUMS: dict[str, set[str]] = {
    "EndReasonValues": {"completed", "failed", "preempted"},
    "FailureCauseValues": {
        "exception",
        "oom",
        "nccl_timeout",
        "hardware",
        "preemption",
        "killed",
        "unknown",
    },
    "CheckpointModeValues": {"sync", "async"},
    "CompileCacheValues": {"hit", "miss", "partial", "off"},
    "ComponentValues": {
        "scheduler",
        "runtime",
        "comms",
        "model",
        "sharding",
        "checkpoint",
        "compile",
        "data",
        "eval",
        "publish",
        "failure",
        "other",
    },
    "StartupPhaseValues": {
        "scheduling",
        "imports",
        "cuda_init",
        "rendezvous",
        "pg_init",
        "model_init",
        "sharding_plan",
        "checkpoint_load",
        "compile",
        "dataloader_init",
    },
    # extension
    "CompileTriggerValues": {
        "dynamo",
        "lazy_backward",
        "triton_autotuning",
        "cudagraph_recording",
        "cache_load",
    },
    "ShutdownStepValues": {"persist_wait", "pg_teardown", "exporter_flush"},
    "LauncherPhaseValues": {"launcher", "worker_spawn"},
    "ImportsPartValues": {"interpreter", "packages"},
}

PINNED_PHASE_COMPONENTS = {
    "scheduling": "scheduler",
    "imports": "runtime",
    "cuda_init": "runtime",
    "rendezvous": "comms",
    "pg_init": "comms",
    "model_init": "model",
    "sharding_plan": "sharding",
    "checkpoint_load": "checkpoint",
    "compile": "compile",
    "dataloader_init": "data",
    # extension: torchrun's share before the rank's process started
    "launcher": "runtime",
    "worker_spawn": "runtime",
}

PINNED_SPAN_NAMES = {
    "ett.attempt",
    "ett.first_batch",
    "ett.train.window",
    "ett.checkpoint.save",
    "ett.checkpoint.persist",
    "ett.compile",
    "ett.eval",
    "ett.publish",
    "ett.failure",
    "ett.data.wait",
    "ett.blocking",
}


def _string_constants() -> dict[str, str]:
    return {
        name: value
        for name, value in vars(semconv).items()
        if name.isupper() and isinstance(value, str) and not isinstance(value, StrEnum)
    }


def _enums() -> dict[str, type[StrEnum]]:
    return {
        name: value
        for name, value in vars(semconv).items()
        if inspect.isclass(value) and issubclass(value, StrEnum) and value is not StrEnum
    }


@pytest.mark.parametrize(("name", "literal"), sorted(PINNED_CONSTANTS.items()))
def test_constant_equals_its_wire_string(name: str, literal: str) -> None:
    assert getattr(semconv, name) == literal


def test_every_string_constant_is_pinned() -> None:
    assert _string_constants() == PINNED_CONSTANTS


def test_heartbeat_contract() -> None:
    """The window and the silence that presumes an attempt dead are shared by the emitter (the
    library, the trainer) and the collector: one number each, here."""
    numbers = {
        name: value
        for name, value in vars(semconv).items()
        if name.isupper() and isinstance(value, int | float) and not isinstance(value, bool)
    }

    assert numbers == {"DEFAULT_WINDOW_S": 10.0, "PRESUMED_DEAD_WINDOWS": 3}
    assert isinstance(semconv.PRESUMED_DEAD_WINDOWS, int)


@pytest.mark.parametrize(("name", "values"), sorted(PINNED_ENUMS.items()))
def test_enum_has_exactly_its_values(name: str, values: set[str]) -> None:
    enum = getattr(semconv, name)

    assert {member.value for member in enum} == values
    assert all(member == member.value for member in enum)  # a StrEnum compares as its string


def test_every_enum_is_pinned() -> None:
    assert set(_enums()) == set(PINNED_ENUMS)


def test_phase_default_components() -> None:
    table = {str(k): str(v) for k, v in semconv.PHASE_DEFAULT_COMPONENT.items()}

    assert table == PINNED_PHASE_COMPONENTS
    for phase, component in PINNED_PHASE_COMPONENTS.items():
        assert semconv.default_component(phase) == component
    assert semconv.default_component("my_own_phase") == "other"


def test_startup_span_names() -> None:
    assert semconv.startup_span_name("pg_init") == "ett.startup.pg_init"
    assert semconv.startup_phase("ett.startup.checkpoint_load") == "checkpoint_load"
    assert semconv.startup_phase("ett.startup.") is None
    assert semconv.startup_phase("ett.eval") is None


def test_shutdown_span_names_and_components() -> None:
    assert semconv.shutdown_span_name("pg_teardown") == "ett.shutdown.pg_teardown"
    assert semconv.shutdown_step("ett.shutdown.persist_wait") == "persist_wait"
    assert semconv.shutdown_step("ett.shutdown.") is None
    assert semconv.shutdown_step("ett.startup.pg_init") is None
    table = {str(k): str(v) for k, v in semconv.SHUTDOWN_DEFAULT_COMPONENT.items()}
    assert table == {
        "persist_wait": "checkpoint",
        "pg_teardown": "comms",
        "exporter_flush": "runtime",
    }
    assert semconv.shutdown_component("my_own_step") == "other"


def test_known_span_names_and_attributes() -> None:
    assert semconv.KNOWN_SPAN_NAMES == PINNED_SPAN_NAMES
    attribute_names = set(PINNED_CONSTANTS) - {"SCHEMA_VERSION", "NAMESPACE"}
    attribute_names -= {n for n in PINNED_CONSTANTS if n.startswith("SPAN_")}
    assert {PINNED_CONSTANTS[n] for n in attribute_names} == semconv.KNOWN_ATTRIBUTES
    assert semconv.REQUIRED_IDENTITY == ("ett.job.id", "ett.attempt", "ett.rank")
    assert semconv.is_known_span_name("ett.startup.anything")
    assert semconv.is_known_span_name("ett.shutdown.anything")
    assert not semconv.is_known_span_name("ett.unknown")
    assert not semconv.is_known_span_name("http.request")


# --- no other module spells an "ett." string ---------------------------------------------------

SCANNED_PACKAGES = ("instrument", "collector", "trainer", "dashboard", "grafana")
VOCABULARY_FILE = ROOT / "instrument" / "semconv.py"


def _docstring_nodes(tree: ast.AST) -> set[int]:
    """ids of the docstring constants (module, class, function): prose, not wire strings."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def ett_literals(source: str, filename: str = "<string>") -> list[tuple[int, str]]:
    """(line, value) of every string literal (f-string parts included) starting with ``ett.``."""
    tree = ast.parse(source, filename)
    docstrings = _docstring_nodes(tree)
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith(semconv.NAMESPACE)
        and id(node) not in docstrings
    ]


def _project_modules() -> list[Path]:
    files: list[Path] = []
    for package in SCANNED_PACKAGES:
        folder = ROOT / package
        if folder.is_dir():
            files.extend(p for p in sorted(folder.rglob("*.py")) if ".venv" not in p.parts)
    return [
        p for p in files if p.resolve() != VOCABULARY_FILE.resolve() and MIGRATIONS not in p.parents
    ]


# A migration freezes the wire strings it was written with (it must not change meaning when the
# code moves on), so it may spell them; the test below holds them to semconv's values.
MIGRATIONS = ROOT / "collector" / "storage" / "migrations" / "versions"


def test_migrations_freeze_only_strings_that_semconv_still_defines() -> None:
    known = {
        value
        for name in dir(semconv)
        if not name.startswith("_") and isinstance(value := getattr(semconv, name), str)
    }
    frozen = [
        (path.name, value)
        for path in sorted(MIGRATIONS.glob("*.py"))
        for _, value in ett_literals(path.read_text(encoding="utf-8"), str(path))
    ]

    assert frozen, "the scan sees the migrations' frozen strings"
    assert [f for f in frozen if f[1] not in known] == []


def test_the_scanner_finds_ett_literals() -> None:
    source = 'X = "ett.job.id"\ndef f(p):\n    """ett. prose is fine."""\n    return f"ett.{p}"\n'

    assert ett_literals(source) == [(1, "ett.job.id"), (4, "ett.")]
    assert ett_literals('Y = "sett.x" + "ETT.x"') == []


def test_no_module_but_semconv_spells_an_ett_string() -> None:
    modules = _project_modules()
    assert any(p.parts[-2:] == ("otlp", "_decode.py") for p in modules)  # the scan sees files

    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {value!r}"
        for path in modules
        for line, value in ett_literals(path.read_text(encoding="utf-8"), str(path))
    ]

    assert offenders == [], "import the name from ett.semconv instead:\n" + "\n".join(offenders)
