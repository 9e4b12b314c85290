"""The two distributions build from a clean checkout and install apart (issues 17 and 23).

- ``ett-instrument`` (``instrument/``) goes into a fresh virtual environment (no system
  site-packages) that already holds another OpenTelemetry 1.x: it installs exactly one import
  name, ``ett``, brings no SQLAlchemy, Starlette, Streamlit or torch, keeps the application's
  OpenTelemetry, and an instrumented loop there reaches a collector installed from the other
  wheel.
- ``ett-server`` (the repository's root) goes into a second fresh environment with the library
  wheel beside it: every import name it installs starts with ``ett``, no ``trainer`` and no test
  support among them, and its ``ett serve`` is that collector.

Slow (pip: 30-90 s). It fetches the dependencies from the package index; without one it skips,
except under CI, where it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.collector_process import start_collector
from tests.support.layout import ROOT

pytestmark = pytest.mark.e2e

OTHER_OTEL = "1.20.0"
"""The library's lower bound, older than this repository's pinned 1.45.2."""
SERVER_NAMES = {"ett_cli", "ett_collector", "ett_dashboard", "ett_grafana", "ett_simulator"}
ABSENT_FROM_TRAINING = ("sqlalchemy", "starlette", "streamlit", "torch", "ett_collector")

LOOP = """
import importlib.metadata as md
import ett
print(json.dumps({"file": ett.__file__, "otel": md.version("opentelemetry-sdk")}))
sess = ett.init(job_id="wheel-job", model="m", team="t", install_handlers=False)
with sess.startup("model_init"):
    weights = [0.0] * 1000
with sess.checkpoint_load() as load:
    load.set_step(0)
sess.first_batch(step=0)
for step in range(1, 201):
    weights[step % 1000] += 1.0
    sess.step(samples=32)
    if step % 100 == 0:
        with sess.checkpoint_save(step):
            saved = list(weights)
with sess.eval():
    pass
sess.end()
print(json.dumps({"dropped": sess.dropped_spans}))
"""
"""The user's 20-line instrumented loop, run in the library's environment."""


def run(cmd: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload,no-any-return]


def clean_checkout(tmp: Path) -> Path:
    """The repository's files as a clone has them (tracked and new files, no build output, no
    ``.venv``, no egg-info), links kept as links."""
    listed = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    out = tmp / "checkout"
    for name in filter(None, listed.stdout.split("\0")):
        source, target = ROOT / name, out / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the work tree, not yet in the index
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return out


def build_wheel(project: Path, dist: Path, name: str) -> Path:
    """``pip wheel --no-deps PROJECT -w dist/`` with this environment's build backend."""
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", project, "-w", dist])
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob(f"{name}-*.whl")
    return wheel


def fresh_venv(path: Path) -> tuple[str, list[str]]:
    """A venv without pip or system site-packages; its python and the pip that installs there."""
    made = run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    assert made.returncode == 0, made.stderr
    python = str(path / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install"]
    return python, [*pip, "--disable-pip-version-check", "--no-compile", "-q"]


def install(pip: list[str], *args: str) -> None:
    done = run([*pip, *args])
    if done.returncode != 0:
        message = f"cannot install {' '.join(args)}"
        if os.environ.get("CI") == "true" or "No matching distribution" not in done.stderr:
            pytest.fail(f"{message}:\n{done.stderr}")
        pytest.skip(f"{message} (needs pip access to a package index)")


def top_level_names(python: str, distribution: str) -> set[str]:
    """The import names a distribution put into its environment (from its installed RECORD)."""
    code = textwrap.dedent(
        """
        import importlib.metadata as md, json, sys
        tops = set()
        for f in md.distribution(sys.argv[1]).files:
            top = f.parts[0]
            if top == ".." or top.endswith((".dist-info", ".pth")) or top == "__pycache__":
                continue
            tops.add(top.removesuffix(".py"))
        print(json.dumps(sorted(tops)))
        """
    )
    listed = run([python, "-c", code, distribution])
    assert listed.returncode == 0, listed.stderr
    return set(json.loads(listed.stdout))


def clean_env(**extra: str) -> dict[str, str]:
    drop = ("OTEL_", "ETT_", "PYTHON", "VIRTUAL_ENV")
    return {**{k: v for k, v in os.environ.items() if not k.startswith(drop)}, **extra}


def test_both_wheels_install_apart_and_the_library_reaches_the_server(tmp_path: Path) -> None:
    checkout = clean_checkout(tmp_path)
    dist = tmp_path / "dist"
    library = build_wheel(checkout / "instrument", dist, "ett_instrument")
    server = build_wheel(checkout, dist, "ett_server")

    server_python, server_pip = fresh_venv(tmp_path / "server-venv")
    install(server_pip, "--find-links", str(dist), str(server))
    server_names = top_level_names(server_python, "ett-server")
    assert server_names == SERVER_NAMES
    assert top_level_names(server_python, "ett-instrument") == {"ett"}

    user_python, user_pip = fresh_venv(tmp_path / "user-venv")
    otel = ("api", "sdk", "exporter-otlp-proto-http")
    install(user_pip, *(f"opentelemetry-{name}=={OTHER_OTEL}" for name in otel))
    install(user_pip, str(library))
    assert top_level_names(user_python, "ett-instrument") == {"ett"}
    probe = "import importlib.util as u, sys; print([m for m in sys.argv[1:] if u.find_spec(m)])"
    present = run([user_python, "-c", probe, *ABSENT_FROM_TRAINING], env=clean_env())
    assert present.returncode == 0, present.stderr
    assert present.stdout.strip() == "[]"  # none of the server's or the trainer's stack

    collector = start_collector(tmp_path / "home", python=server_python)
    try:
        script = tmp_path / "loop.py"
        script.write_text("import json\n" + LOOP)
        used = run(
            [user_python, str(script)],
            cwd=tmp_path,
            env=clean_env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url),
        )
        assert used.returncode == 0, used.stderr
        first, last = (json.loads(line) for line in used.stdout.splitlines())
        assert first["file"].startswith(str(tmp_path / "user-venv"))  # not this checkout
        assert first["otel"] == OTHER_OTEL  # the user's OpenTelemetry was kept
        assert last["dropped"] == 0
        job = collector.wait_for_job("wheel-job", lambda j: j["state"] == "completed")
        assert (job["model"], job["team"]) == ("m", "t")
        assert [a["end_reason"] for a in job["attempts"]] == ["completed"]
        assert job["checkpoint_blocking_s"] > 0  # the two saves arrived as checkpoint spans
        assert 0 < job["ett_pct"] <= 100
    finally:
        collector.stop()

    # the server without the repository's trainer: the command says so, no traceback
    ett = str(tmp_path / "server-venv" / "bin" / "ett")
    train = run([ett, "train", "--steps", "1"], env=clean_env(), cwd=tmp_path)
    assert train.returncode == 2, train.stdout + train.stderr
    assert "reference trainer" in train.stderr and "Traceback" not in train.stderr
    assert run([ett, "--help"], env=clean_env(), cwd=tmp_path).returncode == 0
