"""``ett serve``'s TLS files are loaded at start, before the address is bound or a database
created: a key that is not the certificate's, a file that holds no certificate or no key, an
encrypted key (no prompt on the terminal) are each said in one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ett_collector.security import SecurityConfigError, TlsSettings
from tests.support.errors import one_line
from tests.support.pki import Authority, Pair, openssl
from tests.support.ports import free_port

ETT = str(Path(sys.executable).with_name("ett"))


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Pair, Pair]:
    ca = Authority.make(tmp_path_factory.mktemp("pki"), "ca")
    return ca.issue("collector"), ca.issue("other")


def _serve(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ETT_")}
    argv = ["serve", "--port", str(free_port()), "--db", str(tmp_path / "new" / "c.db"), *args]
    return subprocess.run(
        [ETT, *argv],
        capture_output=True,
        text=True,
        env={**env, "ETT_HOME": str(tmp_path / "home")},
        timeout=60,
        start_new_session=True,  # no terminal for OpenSSL to ask a passphrase on
        check=False,
    )


def _one_line(err: str) -> str:
    assert "SSLError" not in err, err
    return one_line(err)


def test_a_key_of_another_certificate_is_said_in_one_line(
    tmp_path: Path, pairs: tuple[Pair, Pair]
) -> None:
    ours, other = pairs
    done = _serve(tmp_path, "--tls-cert", str(ours.cert), "--tls-key", str(other.key))
    assert done.returncode == 2, done.stderr
    line = _one_line(done.stderr)
    assert f"the TLS key {other.key} is not the key of the certificate {ours.cert}" in line
    assert done.stdout == ""
    assert not (tmp_path / "new").exists() and not (tmp_path / "home").exists()


def test_files_that_hold_the_wrong_thing_are_named(
    tmp_path: Path, pairs: tuple[Pair, Pair]
) -> None:
    ours, _ = pairs
    junk = tmp_path / "junk.pem"
    junk.write_text("junk\n")
    cases = [
        ((junk, ours.key, None), f"the TLS certificate {junk} holds no PEM certificate"),
        ((ours.key, ours.key, None), f"the TLS certificate {ours.key} holds no PEM certificate"),
        ((ours.cert, junk, None), f"the TLS key {junk} is not a PEM private key"),
        ((ours.cert, ours.key, junk), f"the TLS client CA bundle {junk} holds no PEM certificate"),
    ]
    for (cert, key, ca), said in cases:
        with pytest.raises(SecurityConfigError, match="^" + said.replace(".", r"\.")):
            TlsSettings(cert, key, ca).check()
    TlsSettings(ours.cert, ours.key, ours.cert).check()  # the right files pass


def test_an_encrypted_key_is_refused_without_a_prompt(
    tmp_path: Path, pairs: tuple[Pair, Pair]
) -> None:
    ours, _ = pairs
    locked = tmp_path / "locked.key"
    encrypt = ["pkey", "-in", str(ours.key), "-out", str(locked), "-aes256"]
    subprocess.run(
        [openssl(), *encrypt, "-passout", "pass:secret"],
        check=True,
        capture_output=True,
    )
    with pytest.raises(SecurityConfigError, match="is encrypted"):
        TlsSettings(ours.cert, locked).check()
