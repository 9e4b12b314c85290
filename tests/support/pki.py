"""Throwaway certificate authorities for TLS tests, made with the ``openssl`` command.

Every key is a P-256 EC key (fast to make); certificates name ``127.0.0.1`` (IP SAN) so that a
server on the loopback address verifies. ``issue(..., expired=True)`` gives a certificate whose
validity ended in 2020.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_CA_CONFIG = """\
[ca]
default_ca = c
[c]
database = {db}/index.txt
new_certs_dir = {db}
serial = {db}/serial
default_md = sha256
policy = p
copy_extensions = none
unique_subject = no
x509_extensions = ext
[p]
commonName = supplied
[ext]
subjectAltName = IP:127.0.0.1
basicConstraints = CA:FALSE
"""


@dataclass(frozen=True)
class Pair:
    """A certificate and its key (PEM files)."""

    cert: Path
    key: Path


def openssl() -> str:
    """The ``openssl`` binary; a failure under ``CI=true``, else a skip, when it is missing."""
    found = shutil.which("openssl")
    if found is None:
        message = "the openssl command is not installed (apt-get install openssl)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


def _run(*args: str) -> None:
    subprocess.run([openssl(), *args], check=True, capture_output=True)


def _key_and_csr(folder: Path, name: str) -> tuple[Path, Path]:
    key, csr = folder / f"{name}.key", folder / f"{name}.csr"
    _run(
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-keyout",
        str(key),
        "-out",
        str(csr),
        "-subj",
        f"/CN={name}",
    )
    return key, csr


@dataclass(frozen=True)
class Authority:
    """A CA that issues certificates in its own folder."""

    folder: Path
    pair: Pair

    @classmethod
    def make(cls, folder: Path, name: str) -> Authority:
        """A new self-signed CA under ``folder / name``."""
        home = folder / name
        (home / "db").mkdir(parents=True)
        (home / "db" / "index.txt").touch()
        (home / "db" / "serial").write_text("01\n")
        (home / "ca.cnf").write_text(_CA_CONFIG.format(db=home / "db"))
        key, cert = home / "ca.key", home / "ca.pem"
        _run(
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            f"/CN={name}",
        )
        return cls(home, Pair(cert, key))

    def issue(self, name: str, *, expired: bool = False) -> Pair:
        """A certificate for ``name`` (IP SAN 127.0.0.1), valid for two days or ``expired``."""
        key, csr = _key_and_csr(self.folder, name)
        cert = self.folder / f"{name}.pem"
        dates = (
            ["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"]
            if expired
            else ["-days", "2"]
        )
        _run(
            "ca",
            "-batch",
            "-config",
            str(self.folder / "ca.cnf"),
            "-cert",
            str(self.pair.cert),
            "-keyfile",
            str(self.pair.key),
            "-in",
            str(csr),
            "-out",
            str(cert),
            *dates,
        )
        return Pair(cert, key)
