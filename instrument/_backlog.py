"""The export queue's link to the spool (:mod:`ett._spool`): what goes to disk, what comes back.

:class:`Backlog` is used by the export thread only (and by ``shutdown`` once that thread is
done or stuck); the training thread never touches the disk.

- :meth:`Backlog.store` appends a batch the collector did not take (and, while records are
  pending, every later batch, so that they stay in order) as one record. The spool directory as
  a whole (every job's files) holds at most ``max_bytes``: past it the *newest* spans are
  dropped (the oldest, already on disk, are kept), except the once-per-attempt spans
  (``is_priority``), which may use :data:`PRIORITY_RESERVE_BYTES` more; every dropped span is
  counted (the queue's ``dropped``, and a drop record in the file for its next reader) and said
  once in the log.
- :meth:`Backlog.deliver` sends, oldest first, the files of earlier processes of the same job
  that no live process holds (a previous attempt, a killed rank), then this process's pending
  records, until the collector does not take one or the time slice ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from ._answers import TOKEN_REFUSED, refusal
from ._config import Identity
from ._errors import log_once
from ._spool import (
    Scan,
    SpoolWriter,
    batch_record,
    default_root,
    drops_record,
    spool_bytes,
    spool_files,
)
from ._spool_send import DELIVERED, DROP, SETTINGS_STATUS, Drained, Sender, drain_file, verdict

PRIORITY_RESERVE_BYTES = 1 << 20
RESCAN_S = 10.0
"""How often, at most, the bytes of the other files in the spool directory are counted again."""
MAX_BACKOFF_S = 30.0
TOKEN_BACKOFF_S = 300.0
"""After the collector refused the token (401/403), the spool is sent again when the token
changes (``ETT_TOKEN_FILE`` rotated), else this long after: the same token cannot come right
by itself, and the collector counts every wrong one against the host's address (10 a minute
ban it)."""
DROPS_EVERY_S = 60.0
"""A full spool writes its drop count at most this often (and with a kept span, and at the
end), so that a collector that never comes back cannot grow it past the bound."""
DONE, FAILED, MORE = "done", "failed", "more"


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """The OTLP/HTTP request body for ``spans`` (what the exporter would POST)."""
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    return bytes(encode_spans(spans).SerializePartialToString())


class Backlog:
    """A process's spool file and the delivery of it (module docstring)."""

    def __init__(
        self,
        writer: SpoolWriter,
        sender: Sender,
        max_bytes: int,
        is_priority: Callable[[str], bool],
        on_earlier_drops: Callable[[int], None] | None = None,
    ) -> None:
        self.writer = writer
        self._sender = sender
        self._max_bytes = max_bytes
        self._is_priority = is_priority
        self._on_earlier_drops = on_earlier_drops
        self._others = 0
        self._scanned_at: float | None = None
        self._foreign = True
        """Files of earlier processes of this job may be waiting (checked at the first turn)."""
        self._next_try = 0.0
        self._backoff = 0.0
        self._refused_token: int | None = None
        """The credentials' generation the collector refused (401/403), until one is taken."""
        self._bad_at = -1
        self._unwritten_drops = 0
        self._drops_written_at = -DROPS_EVERY_S
        self.dropped = 0
        """Spans lost here: refused for lack of room, or refused for good by the collector."""
        self.earlier_dropped = 0
        """Spans the earlier processes whose files this one delivered had lost (counted by
        them in their files, or refused for good now)."""

    @property
    def usable(self) -> bool:
        """False once the spool file could not be created or written (said once)."""
        if self.writer.failed:
            log_once(
                "spool.unusable", "ETT spool %s cannot be written: spooling off", self.writer.root
            )
        return not self.writer.failed

    def close(self) -> None:
        """The process is done with its file (kept, with its last drop count, when records are
        pending)."""
        if self._unwritten_drops and self.writer.pending:
            self.writer.append(drops_record(self._unwritten_drops))
            self._unwritten_drops = 0
        self.writer.close()

    @property
    def active(self) -> bool:
        """True while something waits on disk: batches go through the spool, in order."""
        return self.writer.pending or self._foreign

    def due(self) -> bool:
        """True when the back-off since the last failed delivery is over, or when the token
        the collector refused has changed since (a rotated ``ETT_TOKEN_FILE``)."""
        if self._refused_token is not None:
            credentials = self._sender.credentials
            credentials.refresh()
            if credentials.generation != self._refused_token:
                return True
        return time.monotonic() >= self._next_try

    def _room(self, size: int, priority: bool) -> bool:
        now = time.monotonic()
        limit = self._max_bytes + (PRIORITY_RESERVE_BYTES if priority else 0)
        used = self._others + self.writer.size
        if used + size > self._max_bytes and (
            self._scanned_at is None or now - self._scanned_at > RESCAN_S
        ):
            self._others = max(0, spool_bytes(self.writer.root) - self.writer.size)
            self._scanned_at = now
            used = self._others + self.writer.size
        return used + size <= limit

    def store(self, spans: Sequence[ReadableSpan]) -> bool:
        """Write ``spans`` to the spool (module docstring for a full one); False when the spool
        cannot be written at all (the caller keeps or drops them as it would without one)."""
        if not spans:
            return True
        body = encode(spans)
        record = batch_record(len(spans), body)
        if self._room(len(record), priority=False):
            return self.writer.append(record)
        keep = [span for span in spans if self._is_priority(span.name)]
        record = batch_record(len(keep), encode(keep)) if keep else b""
        if record and not self._room(len(record), priority=True):
            keep, record = [], b""
        self.dropped += len(spans) - len(keep)
        self._unwritten_drops += len(spans) - len(keep)
        log_once(
            "spool.full",
            "ETT spool %s is full (ETT_SPOOL_MAX_MB): dropping the newest spans (counted)",
            self.writer.root,
        )
        now = time.monotonic()
        if record or now - self._drops_written_at >= DROPS_EVERY_S:  # bounded: rarely
            record += drops_record(self._unwritten_drops)
            self._unwritten_drops, self._drops_written_at = 0, now
        return self.writer.append(record) if record else True

    def deliver(self, slice_s: float) -> str:
        """Send what waits on disk for at most ``slice_s``: :data:`DONE` (all delivered),
        :data:`FAILED` (the collector did not take a record: back-off) or :data:`MORE`."""
        deadline = time.monotonic() + slice_s
        result = self._deliver_foreign(deadline) if self._foreign else DONE
        if result == DONE:
            result = self._deliver_own(deadline)
        if result == FAILED:
            status = self._sender.last
            if status is not None and status in SETTINGS_STATUS:  # the settings are wrong
                sender = self._sender
                origin, reason = sender.credentials.origin, sender.reason
                said = refusal(sender.endpoint, status, origin=origin, reason=reason)
                kept = said.replace("Spans are dropped, not retried", "the spool keeps its spans")
                log_once(f"spool.refused.{status}", kept)
            self._backoff = min(max(2 * self._backoff, 1.0), MAX_BACKOFF_S)
            if status is not None and status in TOKEN_REFUSED:
                self._refused_token = self._sender.credentials.generation
                self._backoff = TOKEN_BACKOFF_S
            self._next_try = time.monotonic() + self._backoff
        else:
            self._backoff, self._next_try, self._refused_token = 0.0, 0.0, None
        return result

    def _deliver_foreign(self, deadline: float) -> str:
        out = Drained()
        for path in spool_files(self.writer.root, self._job()):
            if path != self.writer.path:
                drain_file(path, self._sender, out, deadline)
            if not out.complete or time.monotonic() > deadline:
                break
        else:
            self._foreign = False
        earlier = out.dropped_full + out.dropped_refused
        if earlier:
            self.earlier_dropped += earlier
            log_once(
                "spool.earlier_dropped",
                "ETT: earlier processes of this job lost %d spans (spool full or refused)",
                earlier,
            )
            if self._on_earlier_drops is not None:
                self._on_earlier_drops(self.earlier_dropped)
        for problem in out.problems:
            log_once(
                "spool.bad." + problem, "ETT spool: %s (the rest of that file is lost)", problem
            )
        if out.stopped != -1:
            return FAILED
        return DONE if not self._foreign else MORE

    def _job(self) -> str:
        return self.writer.job_dir.name  # already safe: safe_name() keeps it as it is

    def _deliver_own(self, deadline: float) -> str:
        w = self.writer
        if not w.pending:
            return DONE
        f = w.reader()
        if f is None:
            return DONE
        with f:
            scan = Scan(f, w.sent)
            for end, record in scan:
                if end > w.size:
                    break  # being appended right now: next turn
                if record.spans:
                    outcome = verdict(self._sender.send(record.body))
                    if outcome not in (DELIVERED, DROP):
                        return FAILED
                    self.dropped += record.spans if outcome == DROP else 0
                w.mark_sent(end)
                if time.monotonic() > deadline:
                    return MORE if w.pending else DONE
            bad = scan.problem is not None and scan.good_end < w.size
            if bad and self._bad_at == scan.good_end:  # twice: not a write in progress
                log_once("spool.own_bad", "ETT spool %s: %s (skipped)", w.path, scan.problem)
                w.mark_sent(w.size)
            self._bad_at = scan.good_end if bad else -1
        return DONE if not w.pending else MORE


def make_backlog(
    identity: Identity,
    sender: Sender,
    setting: tuple[str | None, int],
    is_priority: Callable[[str], bool],
    on_earlier_drops: Callable[[int], None] | None = None,
) -> Backlog | None:
    """The backlog for ``setting`` (``resolve_spool()``: directory or ``None`` for the default,
    bound in bytes), or ``None`` when spooling is off; ``is_priority(name)``: the spans kept
    in the reserve when the spool is full."""
    root, max_bytes = setting
    if root == "" or max_bytes <= 0:
        return None
    path = Path(root).expanduser() if root else default_root()
    writer = SpoolWriter(path, identity)
    return Backlog(writer, sender, max_bytes, is_priority, on_earlier_drops)
