"""The ETT span vocabulary (semantic conventions v1; docs/metrics.md, "The spans it reads").

This module is the only place in the project that spells an ``ett.`` wire string. The collector,
the trainer, the dashboards and the tests import these names. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final

SCHEMA_VERSION: Final = "1"
"""Version of these semantic conventions."""

NAMESPACE: Final = "ett."
"""Prefix of every ETT span name and attribute key."""

# --- resource attributes (may be repeated as span attributes; span attributes win) ----------

JOB_ID: Final = "ett.job.id"
"""str, required. One logical training run; it lives across restarts."""

ATTEMPT: Final = "ett.attempt"
"""int, required. The incarnation of the job: 0 first, +1 per restart. Also a span name."""

RANK: Final = "ett.rank"
"""int, required. The trainer process of the attempt."""

WORLD_SIZE: Final = "ett.world_size"
"""int. Number of ranks of the attempt."""

MODEL: Final = "ett.model"
"""str. The model family, used for regression baselines."""

TEAM: Final = "ett.team"
"""str. The owning team."""

SERVICE_NAME: Final = "service.name"
"""str. OpenTelemetry's service name of the emitting process."""

HOST_NAME: Final = "host.name"
"""str. OpenTelemetry's host name of the emitting process."""

REQUIRED_IDENTITY: Final = (JOB_ID, ATTEMPT, RANK)
"""Attributes every span needs (as resource or span attribute) to be accepted."""

# --- span names --------------------------------------------------------------------------------

SPAN_ATTEMPT: Final = "ett.attempt"
"""The whole attempt on one rank, from allocation (``ETT_ALLOCATED_AT``) to exit."""

SPAN_STARTUP_PREFIX: Final = "ett.startup."
"""Prefix of start-up phase spans: ``ett.startup.<phase>``."""

SPAN_FIRST_BATCH: Final = "ett.first_batch"
"""The rank consumed its first batch; the span ends at that instant."""

SPAN_TRAIN_WINDOW: Final = "ett.train.window"
"""Training progress, one span per window and one at exit; also the liveness heartbeat."""

SPAN_CHECKPOINT_SAVE: Final = "ett.checkpoint.save"
"""The part of a checkpoint save that blocks the training loop."""

SPAN_CHECKPOINT_PERSIST: Final = "ett.checkpoint.persist"
"""Background part of an async save; ends when the checkpoint is durable (committed)."""

SPAN_COMPILE: Final = "ett.compile"
"""PT2 compilation, in start-up or mid-training (recompile)."""

SPAN_EVAL: Final = "ett.eval"
"""Evaluation inside the training loop."""

SPAN_PUBLISH: Final = "ett.publish"
"""Model publishing; blocks training on the trainer, not in a standalone job."""

SPAN_FAILURE: Final = "ett.failure"
"""Zero-length span at the moment a failure is seen."""

SPAN_DATA_WAIT: Final = "ett.data.wait"
"""Extension. The training loop waited for its next batch (a data stall); the library emits it
only for waits above a small threshold. Cut out of training as idle, component ``data`` (or its
``ett.component``)."""

SPAN_BLOCKING: Final = "ett.blocking"
"""Extension. A user-named event that blocks the training loop (``ett.blocking.name``, e.g.
``sdc_check``); cut out of training as idle, charged to its ``ett.component`` (an unknown one:
``other``)."""

SPAN_SHUTDOWN_PREFIX: Final = "ett.shutdown."
"""Extension. Prefix of shutdown step spans: ``ett.shutdown.<step>``, what a completed attempt
waited for on its way out (:class:`ShutdownStepValues`), charged to its ``ett.component``."""


def startup_span_name(phase: str) -> str:
    """The span name of start-up phase ``phase`` (``ett.startup.<phase>``)."""
    return SPAN_STARTUP_PREFIX + phase


def shutdown_span_name(step: str) -> str:
    """The span name of shutdown step ``step`` (``ett.shutdown.<step>``)."""
    return SPAN_SHUTDOWN_PREFIX + step


def shutdown_step(span_name: str) -> str | None:
    """The step of a shutdown span name, or None when the name is not a shutdown span."""
    if span_name.startswith(SPAN_SHUTDOWN_PREFIX) and len(span_name) > len(SPAN_SHUTDOWN_PREFIX):
        return span_name[len(SPAN_SHUTDOWN_PREFIX) :]
    return None


def startup_phase(span_name: str) -> str | None:
    """The phase of a start-up span name, or None when the name is not a start-up span."""
    if span_name.startswith(SPAN_STARTUP_PREFIX) and len(span_name) > len(SPAN_STARTUP_PREFIX):
        return span_name[len(SPAN_STARTUP_PREFIX) :]
    return None


# --- the heartbeat contract between emitter and collector -------------------------------------

DEFAULT_WINDOW_S: Final = 10.0
"""Seconds of one ``ett.train.window`` unless configured (docs/metrics.md): how often a
training rank emits its heartbeat, and the collector's unit of silence. Both sides default to it
(``ett.init(window_s=...)``, ``ett train --window-s``, the collector's ``ETT_WINDOW_S``);
a job emitting other windows needs a collector configured to match."""

PRESUMED_DEAD_WINDOWS: Final = 3
"""An attempt with no end reason and no span for more than this many windows is *presumed dead*
(docs/metrics.md): the collector shows it so until its next span arrives."""


# --- span attributes -----------------------------------------------------------------------------

ATTEMPT_END_REASON: Final = "ett.attempt.end_reason"
"""On ``ett.attempt``: one of :class:`EndReasonValues`."""

FAILURE_CAUSE: Final = "ett.failure.cause"
"""On ``ett.attempt`` (when not completed) and ``ett.failure``:
one of :class:`FailureCauseValues`."""

COMPONENT: Final = "ett.component"
"""On start-up phases: the owner charged for the phase (:class:`ComponentValues`)."""

BARRIER: Final = "ett.barrier"
"""bool, on a start-up phase span: the phase is a barrier (no rank leaves it before every rank
has entered it). ``rendezvous`` and ``pg_init`` are barriers without it (v1.1)."""

STEP: Final = "ett.step"
"""int. On ``ett.first_batch``: the global step resumed at; on ``ett.failure``: the failing step."""

STEP_FIRST: Final = "ett.step.first"
"""int. On ``ett.train.window``: first step of the window."""

STEP_LAST: Final = "ett.step.last"
"""int. On ``ett.train.window``: last step of the window."""

SAMPLES: Final = "ett.samples"
"""int. On ``ett.train.window``: samples consumed in the window."""

CHECKPOINT_STEP: Final = "ett.checkpoint.step"
"""int. On checkpoint save, persist and the ``checkpoint_load`` phase: the checkpoint's step."""

CHECKPOINT_MODE: Final = "ett.checkpoint.mode"
"""On ``ett.checkpoint.save``: one of :class:`CheckpointModeValues`."""

CHECKPOINT_BYTES: Final = "ett.checkpoint.bytes"
"""int. On ``ett.checkpoint.save``: size of the checkpoint."""

COMPILE_CACHE: Final = "ett.compile.cache"
"""On ``ett.compile``: one of :class:`CompileCacheValues`."""

COMPILE_FRAMES: Final = "ett.compile.frames"
"""int. On ``ett.compile``: frames compiled."""

PUBLISH_STANDALONE: Final = "ett.publish.standalone"
"""bool. On ``ett.publish``: true when publishing runs as its own job (does not block training)."""

ERROR_TYPE: Final = "error.type"
"""OpenTelemetry's error type, on ``ett.failure``."""

TELEMETRY_DROPPED_SPANS: Final = "ett.telemetry.dropped_spans"
"""int. Extension: on ``ett.train.window`` and ``ett.attempt``, spans the exporter queue dropped."""

TELEMETRY_SPOOL_DROPPED_SPANS: Final = "ett.telemetry.spool_dropped_spans"
"""int. Extension: on ``ett.attempt``, spans that earlier processes of the job on this host lost
(their spool was full, or the collector refused them for good), found when this process
delivered their spool files (``ett._backlog``)."""

COMPILE_TRIGGER: Final = "ett.compile.trigger"
"""Extension. On ``ett.compile``: what the span times (:class:`CompileTriggerValues`); absent when
the trainer timed the compilation itself."""

FAILURE_PHASE: Final = "ett.failure.phase"
"""Extension. On an ``ett.failure`` the exit watchdog recorded: the phase of the way out that hung
(named by the program, e.g. ``abort_process_groups``; ``exit`` when it named none)."""

BLOCKING_NAME: Final = "ett.blocking.name"
"""Extension. On ``ett.blocking``: the user's name for the blocking event (e.g. ``sdc_check``)."""

STARTUP_PART: Final = "ett.startup.part"
"""Extension. On an ``ett.startup.imports`` span that is one part of the phase: which part
(:class:`ImportsPartValues`). The parts tile the phase; the collector charges them as ``imports``
(component ``runtime``) and needs no change to read them."""

WINDOW_WAIT_S: Final = "ett.window.wait_s"
"""float. Extension. On ``ett.train.window``: seconds the rank's steps of the window spent waiting
for their gradient collectives (from its last gradient bucket ready to the bucket's all-reduce
done, per step: :func:`ett.torch_hooks.time_ddp_waits`); the window's duration less this is its
*compute time*. Absent when nothing measures the waits (docs/metrics.md, "Inside the loop")."""

CODE_STACKTRACE: Final = "code.stacktrace"
"""OpenTelemetry's stack trace attribute; on the exit watchdog's ``ett.failure``: the main
thread's innermost frames when it hung."""


# --- enumerated values ---------------------------------------------------------------------------


class EndReasonValues(StrEnum):
    """Values of ``ett.attempt.end_reason``."""

    COMPLETED = "completed"
    FAILED = "failed"
    PREEMPTED = "preempted"


class FailureCauseValues(StrEnum):
    """Values of ``ett.failure.cause``. ``killed`` is inferred by the collector."""

    EXCEPTION = "exception"
    OOM = "oom"
    NCCL_TIMEOUT = "nccl_timeout"
    HARDWARE = "hardware"
    PREEMPTION = "preemption"
    KILLED = "killed"
    UNKNOWN = "unknown"


class CheckpointModeValues(StrEnum):
    """Values of ``ett.checkpoint.mode``."""

    SYNC = "sync"
    ASYNC = "async"


class CompileCacheValues(StrEnum):
    """Values of ``ett.compile.cache``."""

    HIT = "hit"
    MISS = "miss"
    PARTIAL = "partial"
    OFF = "off"


class CompileTriggerValues(StrEnum):
    """Values of ``ett.compile.trigger`` (extension): dynamo's compile-callback triggers, plus the
    load of compile-cache artifacts (``torch.compiler.load_cache_artifacts``)."""

    DYNAMO = "dynamo"
    LAZY_BACKWARD = "lazy_backward"
    TRITON_AUTOTUNING = "triton_autotuning"
    CUDAGRAPH_RECORDING = "cudagraph_recording"
    CACHE_LOAD = "cache_load"


class ComponentValues(StrEnum):
    """The owners a lost second is charged to."""

    SCHEDULER = "scheduler"
    RUNTIME = "runtime"
    COMMS = "comms"
    MODEL = "model"
    SHARDING = "sharding"
    CHECKPOINT = "checkpoint"
    COMPILE = "compile"
    DATA = "data"
    EVAL = "eval"
    PUBLISH = "publish"
    FAILURE = "failure"
    OTHER = "other"


class StartupPhaseValues(StrEnum):
    """The named start-up phases. Other phase names are allowed (component ``other``)."""

    SCHEDULING = "scheduling"
    IMPORTS = "imports"
    CUDA_INIT = "cuda_init"
    RENDEZVOUS = "rendezvous"
    PG_INIT = "pg_init"
    MODEL_INIT = "model_init"
    SHARDING_PLAN = "sharding_plan"
    CHECKPOINT_LOAD = "checkpoint_load"
    COMPILE = "compile"
    DATALOADER_INIT = "dataloader_init"


class LauncherPhaseValues(StrEnum):
    """Extension. Start-up phases of a launcher (torchrun) before the rank's process started,
    measured by the rank (``ett._torchrun``); its rendezvous is the phase ``rendezvous``."""

    LAUNCHER = "launcher"
    """The launcher's own start: its interpreter and imports, up to its rendezvous."""
    WORKER_SPAWN = "worker_spawn"
    """The launcher starting this rank's process, after its rendezvous."""


class ImportsPartValues(StrEnum):
    """Extension. The parts of the ``imports`` phase (attribute :data:`STARTUP_PART`)."""

    INTERPRETER = "interpreter"
    """Process start to the first instant the library sees the interpreter running user code
    with no heavy package (torch, numpy, ...) imported yet."""
    PACKAGES = "packages"
    """That instant to ``ett.init()``: the program's imports (torch, TorchRec, ...)."""


PHASE_DEFAULT_COMPONENT: Final[dict[str, ComponentValues]] = {
    StartupPhaseValues.SCHEDULING: ComponentValues.SCHEDULER,
    StartupPhaseValues.IMPORTS: ComponentValues.RUNTIME,
    StartupPhaseValues.CUDA_INIT: ComponentValues.RUNTIME,
    StartupPhaseValues.RENDEZVOUS: ComponentValues.COMMS,
    StartupPhaseValues.PG_INIT: ComponentValues.COMMS,
    StartupPhaseValues.MODEL_INIT: ComponentValues.MODEL,
    StartupPhaseValues.SHARDING_PLAN: ComponentValues.SHARDING,
    StartupPhaseValues.CHECKPOINT_LOAD: ComponentValues.CHECKPOINT,
    StartupPhaseValues.COMPILE: ComponentValues.COMPILE,
    StartupPhaseValues.DATALOADER_INIT: ComponentValues.DATA,
    LauncherPhaseValues.LAUNCHER: ComponentValues.RUNTIME,
    LauncherPhaseValues.WORKER_SPAWN: ComponentValues.RUNTIME,
}
"""Default component of each named start-up phase."""


class ShutdownStepValues(StrEnum):
    """Extension. The named shutdown steps (``ett.shutdown.<step>``); other names are allowed
    (component ``other`` unless the span sets ``ett.component``)."""

    PERSIST_WAIT = "persist_wait"
    PG_TEARDOWN = "pg_teardown"
    EXPORTER_FLUSH = "exporter_flush"


SHUTDOWN_DEFAULT_COMPONENT: Final[dict[str, ComponentValues]] = {
    ShutdownStepValues.PERSIST_WAIT: ComponentValues.CHECKPOINT,
    ShutdownStepValues.PG_TEARDOWN: ComponentValues.COMMS,
    ShutdownStepValues.EXPORTER_FLUSH: ComponentValues.RUNTIME,
}
"""Default component of each named shutdown step: waiting for the final checkpoint to persist
→ checkpoint, process-group teardown → comms, the span exporter's final flush → runtime."""


def shutdown_component(step: str) -> str:
    """The component a shutdown step is charged to when its span names none."""
    return SHUTDOWN_DEFAULT_COMPONENT.get(step, ComponentValues.OTHER).value


BARRIER_PHASES: Final = frozenset({StartupPhaseValues.RENDEZVOUS, StartupPhaseValues.PG_INIT})
"""Start-up phases that are barriers whatever their attributes (docs/metrics.md): no rank leaves
them before every rank has entered them. Any other phase is one when its span has
``ett.barrier`` = true."""


def default_component(phase: str) -> str:
    """The component a start-up phase is charged to when its span names none."""
    return PHASE_DEFAULT_COMPONENT.get(phase, ComponentValues.OTHER).value


KNOWN_SPAN_NAMES: Final = frozenset(
    {
        SPAN_ATTEMPT,
        SPAN_FIRST_BATCH,
        SPAN_TRAIN_WINDOW,
        SPAN_CHECKPOINT_SAVE,
        SPAN_CHECKPOINT_PERSIST,
        SPAN_COMPILE,
        SPAN_EVAL,
        SPAN_PUBLISH,
        SPAN_FAILURE,
        SPAN_DATA_WAIT,
        SPAN_BLOCKING,
    }
)
"""Every fixed span name (start-up and shutdown spans are recognised by :func:`startup_phase`
and :func:`shutdown_step`)."""

ATTRIBUTE_TYPES: Final[Mapping[str, type]] = MappingProxyType(
    {
        JOB_ID: str,
        ATTEMPT: int,
        RANK: int,
        WORLD_SIZE: int,
        MODEL: str,
        TEAM: str,
        SERVICE_NAME: str,
        HOST_NAME: str,
        ATTEMPT_END_REASON: str,
        FAILURE_CAUSE: str,
        COMPONENT: str,
        BARRIER: bool,
        STEP: int,
        STEP_FIRST: int,
        STEP_LAST: int,
        SAMPLES: int,
        CHECKPOINT_STEP: int,
        CHECKPOINT_MODE: str,
        CHECKPOINT_BYTES: int,
        COMPILE_CACHE: str,
        COMPILE_FRAMES: int,
        PUBLISH_STANDALONE: bool,
        ERROR_TYPE: str,
        TELEMETRY_DROPPED_SPANS: int,
        TELEMETRY_SPOOL_DROPPED_SPANS: int,
        COMPILE_TRIGGER: str,
        FAILURE_PHASE: str,
        CODE_STACKTRACE: str,
        BLOCKING_NAME: str,
        STARTUP_PART: str,
        WINDOW_WAIT_S: float,
    }
)
"""Every attribute key of the vocabulary and the type of its one value (as each constant's
docstring says). The collector refuses a span whose vocabulary attribute is an array, a
key-value list or bytes."""

KNOWN_ATTRIBUTES: Final = frozenset(ATTRIBUTE_TYPES)
"""Every attribute key of the vocabulary; others under ``ett.`` are kept and counted as unknown."""


def is_known_span_name(name: str) -> bool:
    """True for a span name of the vocabulary (including any ``ett.startup.<phase>`` and
    ``ett.shutdown.<step>``)."""
    return (
        name in KNOWN_SPAN_NAMES
        or startup_phase(name) is not None
        or shutdown_step(name) is not None
    )
