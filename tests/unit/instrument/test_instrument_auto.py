"""Zero-code instrumentation's parts: which interpreter becomes a rank, the launcher's
environment, post-import hooks, the checkpoint step read from a state dict, and the
``sitecustomize`` chain (real interpreters started through ``python -m ett``)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from ett import _auto, semconv
from ett._auto_torch import ImportPhases, step_of
from ett._import_watch import ImportWatch

PY = "/usr/bin/python3"
TORCHRUN = "/venv/bin/torchrun"
ELASTIC = {"ETT_AUTO": "1", "TORCHELASTIC_RESTART_COUNT": "0", "LOCAL_RANK": "1", "RANK": "1"}


@pytest.mark.parametrize(
    ("argv", "launcher"),
    [
        ([PY, TORCHRUN, "--nproc-per-node=2", "train.py"], True),
        ([PY, "-u", "-m", "torch.distributed.run", "train.py"], True),
        ([PY, "-mtorch.distributed.launch", "train.py"], True),
        ([PY, "-u", "train.py", "--torchrun"], False),
        ([PY, "-m", "trainer.train"], False),
        ([PY, "-c", "import torchrun"], False),
        ([PY], False),
    ],
)
def test_torchrun_is_recognised_as_the_launcher(argv: list[str], launcher: bool) -> None:
    assert _auto.is_launcher(argv) is launcher


def test_role_of_each_interpreter() -> None:
    train = [PY, "train.py"]
    assert _auto.role({}, train, 10) == "off"
    assert _auto.role({"ETT_AUTO": "1"}, train, 10) == "rank"  # a plain `python train.py`
    assert _auto.role({"ETT_AUTO": "1"}, [PY, TORCHRUN, "train.py"], 10) == "launcher"
    assert _auto.role(ELASTIC, train, 10) == "rank"  # a torchrun worker
    # an interpreter a rank started (compile worker, DCP checkpoint process): not a rank
    assert _auto.role({**ELASTIC, _auto.ENV_OWNER: "9"}, train, 10) == "child"
    assert _auto.role({**ELASTIC, _auto.ENV_OWNER: "10"}, train, 10) == "rank"  # itself (exec)


def test_launch_env_puts_the_bootstrap_first() -> None:
    env = _auto.launch_env({"PYTHONPATH": "/a:/b", _auto.ENV_OWNER: "7", "X": "1"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(_auto.BOOTSTRAP_DIR), "/a", "/b"]
    assert (env["ETT_AUTO"], env["X"]) == ("1", "1") and _auto.ENV_OWNER not in env
    assert (_auto.BOOTSTRAP_DIR / "sitecustomize.py").is_file()
    assert _auto.launch_env({})["PYTHONPATH"] == str(_auto.BOOTSTRAP_DIR)


class _Scalar:
    """A one-element tensor's duck type."""

    def __init__(self, value: float, floating: bool) -> None:
        self.value, self.floating = value, floating

    def numel(self) -> int:
        return 1

    def is_floating_point(self) -> bool:
        return self.floating

    def item(self) -> float:
        return self.value


def test_step_of_a_state_dict() -> None:
    assert step_of({"model": {}, "step": 20}) == 20
    assert step_of({"global_step": _Scalar(7, floating=False)}) == 7
    assert step_of({"step": _Scalar(7.5, floating=True)}) is None  # a float is not a step
    assert step_of({"step": True, "iteration": 3}) == 3
    assert step_of({"model": {}}) is None
    assert step_of(["step"]) is None


def test_import_watch_calls_back_after_the_module_ran(tmp_path: Path) -> None:
    pkg = tmp_path / "zc_watch_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text("VALUE = 41\n")
    seen: list[int] = []

    def hook(module: types.ModuleType) -> None:
        seen.append(module.VALUE)
        module.VALUE += 1

    def broken(module: types.ModuleType) -> None:
        raise RuntimeError("a hook that fails")

    watch = ImportWatch({"zc_watch_pkg.mod": hook, "zc_watch_pkg": broken})
    sys.path.insert(0, str(tmp_path))
    try:
        watch.install()
        import zc_watch_pkg.mod as mod  # the failing hook does not break the import

        assert (seen, mod.VALUE) == ([41], 42)
        assert watch not in sys.meta_path  # every hook ran: the watch left
        assert mod.__spec__ is not None and type(mod.__spec__.loader).__name__ == "SourceFileLoader"
        importlib.reload(mod)  # the hook ran once: a reload does not patch again
        assert (seen, mod.VALUE) == ([41], 41)
        ImportWatch({"zc_watch_pkg.mod": hook}).install()  # already imported: called at once
        assert seen == [41, 41]
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("zc_watch_pkg.mod", "zc_watch_pkg"):
            sys.modules.pop(name, None)
        watch.uninstall()


def test_import_watch_times_the_outermost_imports_of_the_main_thread(tmp_path: Path) -> None:
    pkg = tmp_path / "zc_timed_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "inner.py").write_text("import time\ntime.sleep(0.05)\n")
    (pkg / "outer.py").write_text("from . import inner\n")
    timed: list[tuple[int, int]] = []
    watch = ImportWatch({}, timer=lambda start, end: timed.append((start, end)))
    sys.path.insert(0, str(tmp_path))
    try:
        watch.install()
        import zc_timed_pkg.outer  # noqa: F401

        # the package, then outer (with inner inside it: not reported on its own)
        assert len(timed) == 2 and all(start <= end for start, end in timed)
        assert timed[1][1] - timed[1][0] >= 50_000_000
        watch.stop_timing()
        assert watch not in sys.meta_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("zc_timed_pkg.outer", "zc_timed_pkg.inner", "zc_timed_pkg"):
            sys.modules.pop(name, None)
        watch.uninstall()


class _Sink:
    """A span sink that keeps (name, attributes, start, end)."""

    def __init__(self) -> None:
        self.spans: list[list[object]] = []

    def start(
        self, name: str, attributes: dict[str, object], start_ns: int | None = None
    ) -> object:
        self.spans.append([name, attributes, start_ns, None])
        return len(self.spans) - 1

    def end(self, span: object, exc: object = None, end_ns: int | None = None) -> None:
        self.spans[int(span)][3] = end_ns  # type: ignore[call-overload]


def test_import_phases_join_close_imports_from_the_session_start() -> None:
    sink = _Sink()
    ms = 1_000_000
    phases = ImportPhases(sink, start_ns=0)  # type: ignore[arg-type]
    now = phases._pending[1]  # type: ignore[index]
    phases.add(now + 5 * ms, now + 100 * ms)  # 5 ms after the interpreter's start-up: joined
    phases.add(now + 110 * ms, now + 300 * ms)  # 10 ms later: joined
    phases.add(now + 1300 * ms, now + 1400 * ms)  # a second later: a span of its own
    assert len(sink.spans) == 1
    phases.flush()
    phases.flush()
    assert [(s[2], s[3]) for s in sink.spans] == [
        (0, now + 300 * ms),
        (now + 1300 * ms, now + 1400 * ms),
    ]
    assert {s[0] for s in sink.spans} == {semconv.startup_span_name("imports")}
    packages = {semconv.COMPONENT: "runtime", semconv.STARTUP_PART: "packages"}
    assert all(s[1] == packages for s in sink.spans)


def _run_instrumented(tmp_path: Path, code: str, env: dict[str, str]) -> str:
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(code))
    cmd = [sys.executable, "-m", "ett", sys.executable, str(script)]
    root = str(Path(__file__).resolve().parents[3])
    full = {
        **os.environ,
        "ETT_DISABLED": "1",  # a session that records nothing: no collector needed
        "ETT_EXIT_TIMEOUT_S": "0",
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [env.get("PYTHONPATH"), root])),
    }
    full.pop(_auto.ENV_OWNER, None)
    proc = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_a_plain_python_process_becomes_the_rank_and_its_children_do_not(
    tmp_path: Path,
) -> None:
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import os\nos.environ['HIDDEN_RAN'] = '1'\n")
    out = _run_instrumented(
        tmp_path,
        """
        import os, subprocess, sys
        import ett
        print("rank", os.environ.get("ETT_AUTO_PID") == str(os.getpid()))
        print("session", ett.current() is ett._setup._current)
        print("hidden", os.environ.get("HIDDEN_RAN"))
        print("hooks", any(type(f).__name__ == "ImportWatch" for f in sys.meta_path))
        child = "import os, ett; print(ett._setup._current is None)"
        print("child-idle", subprocess.run([sys.executable, "-c", child],
              capture_output=True, text=True).stdout.strip())
        """,
        {"PYTHONPATH": str(hidden)},
    )
    assert out.split("\n")[:5] == [
        "rank True",
        "session True",
        "hidden 1",
        "hooks False",  # ETT_DISABLED: a session that records nothing, and no torch hooks
        "child-idle True",
    ]


def test_the_launcher_reports_a_missing_command() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ett", "no-such-command-zc"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 127
    assert proc.stderr.strip() == "ett-instrument: no-such-command-zc: command not found"
    usage = subprocess.run(
        [sys.executable, "-m", "ett"], capture_output=True, text=True, timeout=60
    )
    assert usage.returncode == 2 and usage.stderr.startswith("usage: ett-instrument")


def test_the_launcher_says_its_version() -> None:
    from importlib import metadata

    proc = subprocess.run(
        [sys.executable, "-m", "ett", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"ett-instrument {metadata.version('ett-instrument')}\n"
    import ett

    assert ett.__version__ == metadata.version("ett-instrument")


def test_span_ids_do_not_use_or_move_the_programs_random_state() -> None:
    import random

    from ett._ids import PrivateIdGenerator

    ids = PrivateIdGenerator()
    random.seed(7)
    state = random.getstate()
    first = ids.generate_span_id()
    assert random.getstate() == state  # the program's sequence is untouched
    random.setstate(state)  # what torch.compile does around a compilation
    assert ids.generate_span_id() != first
    assert ids.generate_trace_id() != 0 and ids.generate_span_id() != 0
