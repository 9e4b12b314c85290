"""Zero-code instrumentation: ``ett-instrument COMMAND [ARGS...]`` (or ``python -m ett``).

Like ``opentelemetry-instrument``: the launcher runs ``COMMAND`` (``exec``: same process) with
``ETT_AUTO=1`` and this package's ``_bootstrap`` directory first on ``PYTHONPATH``, so every
Python interpreter the command starts imports our ``sitecustomize`` at start-up and calls
:func:`bootstrap`. Each interpreter then decides what it is (:func:`role`):

- ``rank``: a torchelastic worker (``TORCHELASTIC_RESTART_COUNT`` and ``LOCAL_RANK`` set), or
  any other interpreter that is not a launcher: it starts a session (:func:`ett.init`,
  identity and endpoint from the environment, exception/SIGTERM/exit hooks) and the torch hooks
  of :mod:`ett._auto_torch`, and marks the environment (``ETT_AUTO_PID``) so that the
  interpreters *it* starts (compile workers, a DCP checkpoint process, spawned data workers)
  do not become ranks too;
- ``launcher``: ``torchrun`` / ``python -m torch.distributed.run`` (or ``.launch``) itself,
  which is not a rank: it does nothing;
- ``child``: started by a rank (``ETT_AUTO_PID`` names another process): it does nothing.

A ``sitecustomize`` that was on the path before ours still runs (ours imports it after).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV_AUTO = "ETT_AUTO"
"""``1`` in the environment of a command run by ``ett-instrument``."""
ENV_OWNER = "ETT_AUTO_PID"
"""The process id of the rank whose session the environment belongs to."""
BOOTSTRAP_DIR = Path(__file__).resolve().with_name("_bootstrap")
"""The directory holding our ``sitecustomize.py``, put first on ``PYTHONPATH``."""

LAUNCHER_MODULES = frozenset({"torch.distributed.run", "torch.distributed.launch"})
LAUNCHER_SCRIPTS = frozenset({"torchrun"})

USAGE = """\
usage: ett-instrument COMMAND [ARGS...]
       python -m ett COMMAND [ARGS...]
       ett-instrument flush [--spool-dir DIR] [--job JOB] [--endpoint URL] [--timeout S]
       ett-instrument --version

Run COMMAND with ETT instrumentation in every Python process it starts, without changing
the program: each rank (a torchrun worker, or a plain `python train.py`) starts its ETT
session at interpreter start; process-group init, torch.distributed.checkpoint save,
async_save and load, torch.compile and optimizer steps are timed; failures and SIGTERM end
the attempt. Configure it with the usual variables (ETT_JOB_ID, ETT_MODEL, ETT_TEAM,
OTEL_EXPORTER_OTLP_ENDPOINT, ETT_DISABLED, ...; see docs/instrument.md).

`ett-instrument flush` delivers the spans that trainers on this host kept in their spool
(ETT_SPOOL_DIR) while the collector was away; `ett-instrument flush --help` says more
(`ett-instrument -- flush ...` runs a program named flush instead).

example: ETT_JOB_ID=run-42 ett-instrument torchrun --nproc-per-node 8 train.py
"""


def launch_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for the instrumented command: ``ETT_AUTO=1``, our bootstrap directory first on
    ``PYTHONPATH``, and no rank owning it yet."""
    out = dict(env)
    old = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p]
    out["PYTHONPATH"] = os.pathsep.join([str(BOOTSTRAP_DIR), *old])
    out[ENV_AUTO] = "1"
    out.pop(ENV_OWNER, None)
    return out


def is_launcher(argv: Sequence[str]) -> bool:
    """True when an interpreter's full command line (``sys.orig_argv``) runs torchrun."""
    args = list(argv[1:])
    for i, arg in enumerate(args):
        if arg == "-m":
            return i + 1 < len(args) and args[i + 1] in LAUNCHER_MODULES
        if arg.startswith("-m") and len(arg) > 2:
            return arg[2:] in LAUNCHER_MODULES
        if arg == "-c":
            return False
        if not arg.startswith("-"):
            return Path(arg).name in LAUNCHER_SCRIPTS
    return False


def role(env: Mapping[str, str], argv: Sequence[str], pid: int) -> str:
    """What this interpreter is to zero-code instrumentation: ``off`` (not under
    ``ett-instrument``), ``child`` (started by a rank), ``rank`` or ``launcher``."""
    if env.get(ENV_AUTO, "").strip() != "1":
        return "off"
    owner = env.get(ENV_OWNER, "").strip()
    if owner and owner != str(pid):
        return "child"
    if "TORCHELASTIC_RESTART_COUNT" in env and "LOCAL_RANK" in env:
        return "rank"
    return "launcher" if is_launcher(argv) else "rank"


def bootstrap() -> None:
    """Called by our ``sitecustomize`` at interpreter start: start a session when this
    interpreter is a rank (see :func:`role`). Never raises."""
    try:
        if role(os.environ, getattr(sys, "orig_argv", sys.argv), os.getpid()) != "rank":
            return
        os.environ[ENV_OWNER] = str(os.getpid())
        from ._auto_torch import AutoTorch
        from ._setup import init

        session = init()
        if session.enabled:  # ETT_DISABLED: no hooks either (an "instrumentation off" run)
            AutoTorch(session).install()
    except Exception as exc:  # telemetry never stops the program
        print(f"ett-instrument: instrumentation not started: {exc!r}", file=sys.stderr)


def version() -> str:
    """The installed distribution's version, or ``unknown`` when run from a source tree that
    was never installed."""
    from importlib import metadata

    try:
        return metadata.version("ett-instrument")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    """``ett-instrument COMMAND [ARGS...]``: run COMMAND (replacing this process) instrumented;
    ``ett-instrument flush ...``: deliver the spool (``ett._flush``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    if args[0] == "--version":
        print(f"ett-instrument {version()}")
        return 0
    if args[0] == "flush":
        from ._flush import flush_main

        return flush_main(args[1:])
    if args[0] == "--":
        args = args[1:]
    try:
        os.execvpe(args[0], args, launch_env(os.environ))
    except FileNotFoundError:
        print(f"ett-instrument: {args[0]}: command not found", file=sys.stderr)
        return 127
    except OSError as exc:
        print(f"ett-instrument: cannot run {args[0]}: {exc.strerror}", file=sys.stderr)
        return 126
    return 0  # not reached: exec replaced the process
