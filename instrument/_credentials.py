"""The bearer token the exports carry, kept current with ``ETT_TOKEN_FILE``.

The token comes from ``init(token=)``, ``ETT_TOKEN``, ``ETT_TOKEN_FILE`` or an ``authorization``
header of the OTLP headers (``ett._config.resolve_token``). Only the file can change while a
job runs, and it does when a token is rotated (docs/collector.md: the collector takes the new
token, the trainers' token file gets it, then the old one is removed). Read once at ``init()``,
a running job kept sending the old token, and lost every span after the old one was removed.

So :class:`Credentials` keeps the file's ``stat`` (modification time, size, inode: one
``os.stat``, about a microsecond) and checks it before each request; when it changed, the file
is read again. After a 401 or 403 it is read again whatever its ``stat`` says (a change within
the file system's timestamp resolution), and the sender sends that request again, once, when
the token changed (``ett._transport``, ``ett._spool_send``). A file that cannot be read, or
holds no token, while the job runs keeps the token read before (said once): a rotation that
rewrites the file in place passes through an empty file.

The token itself is never logged.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping

from ._config import read_token_file, resolve_token
from ._errors import log_once, logger

_Stamp = tuple[int, int, int] | None


def _stamp(path: str) -> _Stamp:
    """What tells a changed file: (modification time, size, inode); None when it is missing."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


class Credentials:
    """The headers of every export request (the token among them) and where the token came
    from (:attr:`origin`); with a :attr:`token_file`, kept current with it (module docstring).
    Thread-safe; never raises."""

    def __init__(
        self,
        headers: Mapping[str, str] | None = None,
        *,
        origin: str | None = None,
        token_file: str | None = None,
        stamp: _Stamp = None,
    ) -> None:
        self._headers = dict(headers or {})
        self.origin = origin
        """What set the token, for messages; None when none is sent."""
        self.token_file = token_file
        """The ``ETT_TOKEN_FILE`` path followed, or None (a token that cannot change)."""
        self.generation = 0
        """How many times the token changed since ``init()``."""
        self._stamp = stamp
        self._lock = threading.Lock()

    @classmethod
    def resolve(cls, token: str | None = None, env: Mapping[str, str] | None = None) -> Credentials:
        """The credentials of ``init(token=)`` and the environment (``ett._config``)."""
        env = os.environ if env is None else env
        path = env.get("ETT_TOKEN_FILE", "").strip()
        stamp = _stamp(path) if path else None  # before the read: a change after it is seen
        setting = resolve_token(token, env)
        return cls(
            setting.headers,
            origin=setting.origin,
            token_file=setting.token_file,
            stamp=stamp if setting.token_file else None,
        )

    def headers(self) -> dict[str, str]:
        """The headers to send now (the token file checked first: :meth:`refresh`)."""
        self.refresh()
        with self._lock:
            return dict(self._headers)

    def authorization(self) -> str | None:
        """The ``authorization`` header to send now (:meth:`refresh` first), or None."""
        self.refresh()
        return self._headers.get("authorization")

    def refresh(self) -> bool:
        """Read the token file again if its ``stat`` changed; True when the token changed."""
        path = self.token_file
        if path is None:
            return False
        stamp = _stamp(path)
        if stamp == self._stamp:
            return False
        return self._read(path, stamp)

    def reload(self) -> bool:
        """Read the token file again whatever its ``stat`` (the collector refused the token);
        True when the token changed. False without a token file."""
        path = self.token_file
        if path is None:
            return False
        return self._read(path, _stamp(path))

    def _read(self, path: str, stamp: _Stamp) -> bool:
        token, problem = read_token_file(path)
        with self._lock:
            self._stamp = stamp
            if token is None:
                log_once(
                    "credentials.unreadable",
                    "ETT_TOKEN_FILE %s changed but gives no token now (%s): the exports keep "
                    "the token read before",
                    path,
                    problem,
                )
                return False
            bearer = f"Bearer {token}"
            if self._headers.get("authorization") == bearer:
                return False
            self._headers["authorization"] = bearer
            self.origin = f"ETT_TOKEN_FILE {path}"
            self.generation += 1
        logger.info("ETT_TOKEN_FILE %s holds a new token: the exports send it from now on", path)
        return True
