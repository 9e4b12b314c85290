"""The spool: spans the collector did not take, kept on local disk until it takes them.

Layout: ``<spool dir>/<job>/<host>-a<attempt>-r<rank>-p<pid>-<n>.spool``, one file per session
(``ETT_SPOOL_DIR``, default ``$XDG_STATE_HOME/ett/spool``, else ``~/.local/state/ett/spool``;
directories mode 0700, files 0600, a directory owned by another user is refused). The process
that writes a file holds an exclusive ``flock`` on it for its whole life, so a reader (the next
attempt's process, ``ett-instrument flush``) takes only files whose writer has exited or died:
ranks and jobs never share or take each other's live file.

A file is a header (:data:`FILE_HEADER`) then records, each ``"ETTR"``, payload length and
CRC-32 (big-endian uint32 each), a kind byte, then the payload:

- :data:`KIND_BATCH`: a uint32 span count, then one OTLP ``ExportTraceServiceRequest``
  (protobuf; the request body as is: headers, and so the token, are never written);
- :data:`KIND_DROPS`: a uint64, spans this process dropped because the spool was full.

A reader stops at the first record that is cut short or fails its magic or CRC (a crash during
a write, a disk error) and reports the bytes after the last whole record; it never raises on bad
content.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import socket
import stat
import struct
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ._config import Identity

FILE_HEADER = b"ETT-SPOOL 1\n"
RECORD = struct.Struct(">4sIIB")
RECORD_MAGIC = b"ETTR"
KIND_BATCH = 1
KIND_DROPS = 2
MAX_PAYLOAD = 64 << 20
"""A longer length field is corruption (no batch of 512 spans comes near it)."""
SUFFIX = ".spool"
_COUNT = struct.Struct(">I")
_DROPS = struct.Struct(">Q")


@dataclass(frozen=True)
class Record:
    """One whole record: a batch (``spans`` spans in ``body``) or a drop count (``drops``)."""

    kind: int
    spans: int = 0
    body: bytes = b""
    drops: int = 0


def batch_record(spans: int, body: bytes) -> bytes:
    """The bytes of a :data:`KIND_BATCH` record of ``spans`` spans encoded in ``body``."""
    return _record(KIND_BATCH, _COUNT.pack(spans) + body)


def drops_record(drops: int) -> bytes:
    """The bytes of a :data:`KIND_DROPS` record."""
    return _record(KIND_DROPS, _DROPS.pack(drops))


def _record(kind: int, payload: bytes) -> bytes:
    return RECORD.pack(RECORD_MAGIC, len(payload), zlib.crc32(payload), kind) + payload


def _decode(kind: int, payload: bytes) -> Record | None:
    if kind == KIND_BATCH and len(payload) >= _COUNT.size:
        return Record(kind, spans=_COUNT.unpack_from(payload)[0], body=payload[_COUNT.size :])
    if kind == KIND_DROPS and len(payload) == _DROPS.size:
        return Record(kind, drops=_DROPS.unpack(payload)[0])
    return None


class Scan:
    """Reads the records of one open spool file from ``start``: iterate it for ``(end offset,
    record)``; afterwards :attr:`good_end` is the end of the last whole record and
    :attr:`problem` says why reading stopped early (``None``: the file ended cleanly)."""

    def __init__(self, f: BinaryIO, start: int = 0) -> None:
        self._f = f
        self._start = start
        self.good_end = start
        self.problem: str | None = None

    def __iter__(self) -> Iterator[tuple[int, Record]]:
        f, offset = self._f, self._start
        f.seek(offset)
        if offset == 0:
            if f.read(len(FILE_HEADER)) != FILE_HEADER:
                self.problem = "not an ETT spool file (bad header)"
                return
            offset = self.good_end = len(FILE_HEADER)
        while True:
            head = f.read(RECORD.size)
            if not head:
                return
            if len(head) < RECORD.size:
                self.problem = "record header cut short"
                return
            magic, length, crc, kind = RECORD.unpack(head)
            if magic != RECORD_MAGIC or length > MAX_PAYLOAD:
                self.problem = "bad record header"
                return
            payload = f.read(length)
            if len(payload) < length:
                self.problem = "record cut short"
                return
            record = _decode(kind, payload) if zlib.crc32(payload) == crc else None
            if record is None:
                self.problem = "record fails its checksum or kind"
                return
            offset += RECORD.size + length
            self.good_end = offset
            yield offset, record


def default_root(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """``$XDG_STATE_HOME/ett/spool``, else ``~/.local/state/ett/spool``."""
    env = os.environ if env is None else env
    state = env.get("XDG_STATE_HOME", "").strip()
    base = Path(state) if state else Path.home() / ".local" / "state"
    return base / "ett" / "spool"


def safe_name(text: str) -> str:
    """``text`` as one path component: other characters than ``[A-Za-z0-9._-]`` become ``_``
    (a leading dot too), at most 100 characters, plus a short hash when anything changed."""
    clean = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:100].lstrip(".") or "_"
    if clean == text:
        return clean
    return f"{clean}-{zlib.crc32(text.encode()):08x}"


def private_dir(path: Path) -> bool:
    """Create ``path`` (and its parents) mode 0700; True when it is a directory of ours that
    nobody else can enter (a wider one of ours is narrowed to 0700)."""
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = path.stat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return False
        if stat.S_IMODE(info.st_mode) != 0o700:
            path.chmod(0o700)
        return True
    except OSError:
        return False


def spool_files(root: Path, job: str | None = None) -> list[Path]:
    """The spool files under ``root`` (of one job's directory when ``job`` is given), oldest
    first."""
    dirs = [root / safe_name(job)] if job is not None else _subdirs(root)
    found: list[tuple[float, Path]] = []
    for folder in dirs:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                        found.append((entry.stat().st_mtime, Path(entry.path)))
        except OSError:
            continue
    return [path for _, path in sorted(found)]


def _subdirs(root: Path) -> list[Path]:
    try:
        with os.scandir(root) as entries:
            return [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def spool_bytes(root: Path) -> int:
    """Bytes in all the spool files under ``root`` (every job's)."""
    total = 0
    for path in spool_files(root):
        try:
            total += path.stat().st_size
        except OSError:
            continue
    return total


def try_lock(fd: int) -> bool:
    """Take the exclusive lock of an open spool file without waiting; False when a live
    process holds it."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except OSError:
        return False


class SpoolWriter:
    """This process's spool file: created (and locked) at the first write, appended to by the
    export thread; records before :attr:`sent` were delivered. Thread-safe."""

    def __init__(self, root: Path, identity: Identity) -> None:
        self.root = root
        self.job_dir = root / safe_name(identity.job_id)
        host = safe_name(identity.host_name or socket.gethostname())
        unique = f"{os.getpid()}-{time.time_ns() & 0xFFFFFFFF:08x}"  # a later session, a reused pid
        name = f"{host}-a{identity.attempt}-r{identity.rank}-p{unique}{SUFFIX}"
        self.path = self.job_dir / name
        self.lock = threading.Lock()
        self._fd = -1
        self.size = 0
        """Bytes in the file (header included)."""
        self.sent = len(FILE_HEADER)
        """Offset of the first record not yet delivered."""
        self.failed = False

    @property
    def pending(self) -> bool:
        """True while the file holds records not delivered yet."""
        return self.size > self.sent

    def _open(self) -> bool:
        if self._fd >= 0:
            return True
        if self.failed or not (private_dir(self.root) and private_dir(self.job_dir)):
            self.failed = True
            return False
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
        try:
            fd = os.open(self.path, flags, 0o600)
        except FileNotFoundError:  # a flush removed the empty job folder meanwhile: once more
            if not private_dir(self.job_dir):
                raise
            fd = os.open(self.path, flags, 0o600)
        if not try_lock(fd):  # cannot happen for a fresh file; be safe
            os.close(fd)
            self.failed = True
            return False
        os.fchmod(fd, 0o600)
        os.write(fd, FILE_HEADER)
        self._fd, self.size = fd, len(FILE_HEADER)
        return True

    def append(self, data: bytes) -> bool:
        """Append whole records; False when the file cannot be written (said by the caller)."""
        with self.lock:
            try:
                if not self._open():
                    return False
                view = memoryview(data)
                while view:  # a short write (a full disk, a file size limit) goes on, or raises
                    written = os.write(self._fd, view)
                    self.size += written
                    view = view[written:]
                return True
            except OSError:
                self.failed = True
                return False

    def reader(self) -> BinaryIO | None:
        """A new read-only handle on the file (``None`` before the first write)."""
        return os.fdopen(os.dup(self._fd), "rb") if self._fd >= 0 else None

    def mark_sent(self, offset: int) -> None:
        """Records before ``offset`` were delivered; once all are, the file is emptied."""
        with self.lock:
            self.sent = max(self.sent, offset)
            if self.sent >= self.size and self._fd >= 0:
                try:
                    os.ftruncate(self._fd, len(FILE_HEADER))
                    self.size = self.sent = len(FILE_HEADER)
                except OSError:
                    pass

    def close(self) -> None:
        """Release the file: removed when nothing in it is pending, else kept for a reader."""
        with self.lock:
            if self._fd < 0:
                return
            with contextlib.suppress(OSError):
                os.unlink(self.path) if not self.pending else os.fsync(self._fd)
            os.close(self._fd)
            self._fd, self.failed = -1, True  # a late append must not create a new file

    def forget_in_child(self) -> None:
        """After ``fork``: the child closes its copy, so that the lock dies with the parent."""
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd, self.failed = -1, True
