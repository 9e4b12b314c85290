"""The library installs into a user's own environment (issue 17): a wheel built from this
repository, installed with its ``instrument`` extra into a fresh virtual environment (no system
site-packages) that already holds another OpenTelemetry 1.x, emits spans to a real collector.

Slow (pip: 20-40 s). It fetches OpenTelemetry from the package index; without one it skips,
except under CI, where it fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.collector_process import start_collector

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
OTHER_OTEL = "1.20.0"
"""The instrument extra's lower bound, older than this repository's pinned 1.45.2."""


def run(cmd: list[str | Path], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)  # type: ignore[call-overload,no-any-return]


def build_wheel(tmp: Path) -> Path:
    """The documented build (``pip wheel --no-deps instrument/ -w dist/``) on a copy of the
    sources, with the build backend of this environment (no download)."""
    src = tmp / "src"
    shutil.copytree(ROOT / "instrument", src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    dist = tmp / "dist"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    built = run([*pip, "wheel", "--no-deps", "--no-build-isolation", "-q", str(src), "-w", dist])
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("ett_instrument-*.whl")
    return wheel


def test_wheel_installs_beside_another_opentelemetry(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "user-venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)])  # pip comes from here
    assert made.returncode == 0, made.stderr
    python = str(venv / "bin" / "python")
    pip = [sys.executable, "-m", "pip", "--python", python, "install"]
    pip += ["--disable-pip-version-check", "--no-compile", "-q"]
    otel = [
        f"opentelemetry-{name}=={OTHER_OTEL}" for name in ("api", "sdk", "exporter-otlp-proto-http")
    ]
    theirs = run([*pip, *otel])
    if theirs.returncode != 0:
        message = f"cannot install OpenTelemetry {OTHER_OTEL} from the package index"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{message}:\n{theirs.stderr}")
        pytest.skip(f"{message} (needs pip access to PyPI)")
    ours = run([*pip, str(wheel)])
    assert ours.returncode == 0, ours.stderr

    collector = start_collector(tmp_path / "home")
    try:
        code = textwrap.dedent(
            """
            import importlib.metadata as md
            import ett
            print(ett.__file__)
            print(md.version("opentelemetry-sdk"))
            sess = ett.init(job_id="wheel-job", model="m", install_handlers=False)
            with sess.eval():
                pass
            sess.first_batch()
            sess.step()
            sess.end()
            print(sess.dropped_spans)
            """
        )
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "ETT_", "PYTHON", "VIRTUAL_ENV"))
        }
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.url
        used = run([python, "-c", code], cwd=tmp_path, env=env)
        assert used.returncode == 0, used.stderr
        where, version, dropped = used.stdout.split()
        assert where.startswith(str(venv))  # the installed library, not this checkout
        assert version == OTHER_OTEL  # the user's OpenTelemetry was kept
        assert dropped == "0"
        collector.wait_computed()
        job = collector.job("wheel-job")
        assert job["model"] == "m"
    finally:
        collector.stop()
