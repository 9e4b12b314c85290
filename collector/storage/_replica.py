"""Reading from a PostgreSQL hot standby: is this database one, is it streaming from its
primary, and how far behind is it.

A standby replays the primary's WAL; every transaction on it is read-only. While its WAL
receiver streams, the lag reported is ``now() - pg_last_xact_replay_timestamp()`` (how old the
newest replayed commit is), or 0 when everything received has been replayed (an idle primary
commits nothing, so the age of its last commit says nothing about the standby). Replayed means
the replay position is at or past the receive position, not equal to it: a standby that
restarts replays its own WAL up to where it stopped, and its WAL receiver then reports the start
of the segment it streams from, behind the replay position until the primary writes again (with
``=``, the lag of a restarted standby of an idle primary grew without bound).

While nothing streams (``pg_stat_wal_receiver`` empty, or its status other than ``streaming``:
the primary is gone or unreachable, the WAL receiver has not connected yet, or the standby is
fed from an archive only) how far behind it is cannot be known, and the age of its newest
replayed commit is reported: it grows by the second. (The receive position keeps its last value
after the receiver disconnects, so "everything received is replayed" held there, and a standby
whose primary had been gone 90 s once said it was 0 s behind.) A role without
``pg_read_all_stats`` sees the receiver's row but not its status: a row is then taken as
streaming.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sqlalchemy import Engine

_STATE = (
    "SELECT pg_is_in_recovery(),"
    " (SELECT count(*) > 0 AND bool_and(coalesce(status = 'streaming', true))"
    "  FROM pg_stat_wal_receiver),"
    " pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn(),"
    " EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8"
)


def replication(engine: Engine) -> dict[str, Any]:
    """``{"standby": bool, "replication_lag_s": seconds or None}``, and on a standby
    ``"replication_streaming"``: whether its WAL receiver streams from the primary (SQLite:
    not a standby)."""
    if engine.dialect.name != "postgresql":
        return {"standby": False, "replication_lag_s": None}
    with engine.connect() as conn:
        standby, streaming, caught_up, age = conn.exec_driver_sql(_STATE).one()
    if not standby:
        return {"standby": False, "replication_lag_s": None}
    streaming = bool(streaming)
    lag = 0.0 if streaming and caught_up else (None if age is None else max(0.0, float(age)))
    return {"standby": True, "replication_lag_s": lag, "replication_streaming": streaming}


log = logging.getLogger("ett_collector.replica")


class ReplicaWatch:
    """The standby's last replication state, read by ``/healthz``, ``/readyz``, ``/metrics``
    and a background tick; logs one line when streaming stops and one when it resumes."""

    def __init__(self, engine: Engine, max_lag_s: float) -> None:
        self.engine = engine
        self.max_lag_s = max_lag_s
        """``ETT_READY_MAX_LAG_S``: past this lag a read-only collector is not ready (0: off)."""
        self.last: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def check(self) -> dict[str, Any]:
        """The replication state now (:func:`replication`), its change of streaming logged."""
        state = replication(self.engine)
        with self._lock:
            before, self.last = self.last, state
        was = None if before is None else before.get("replication_streaming")
        now = state.get("replication_streaming")
        if now is False and was is not False:
            lag = state["replication_lag_s"]
            log.warning(
                "the standby is not streaming from its primary (no WAL receiver streams): its "
                "figures stay as they are; its newest replayed commit is %s old",
                "of unknown age" if lag is None else f"{lag:.0f} s",
            )
        elif now is True and was is False:
            log.warning("the standby streams from its primary again")
        return state

    def tick(self) -> None:
        """:meth:`check`, for the background loop (its changes logged)."""
        self.check()

    def not_ready(self, state: dict[str, Any]) -> str | None:
        """Why a read-only collector with this state is not ready (None: it is): a standby
        more than ``max_lag_s`` behind, or not streaming with no commit replayed to date it."""
        if self.max_lag_s <= 0 or not state.get("standby"):
            return None
        lag, streaming = state["replication_lag_s"], state.get("replication_streaming")
        why = "" if streaming else "it is not streaming from its primary; "
        if lag is None:
            if streaming:
                return None
            return f"{why}how far behind the primary it is cannot be known"
        if lag > self.max_lag_s:
            return (
                f"{why}the standby is {lag:.0f} s behind its primary, past "
                f"ETT_READY_MAX_LAG_S={self.max_lag_s:g}"
            )
        return None


_READ_ONLY = "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')"


def read_only_reason(engine: Engine) -> str | None:
    """Why every write to this PostgreSQL database would be refused, or None: a hot standby
    (in recovery), or sessions that start read-only (``default_transaction_read_only``, as a
    read-only role or ``PGOPTIONS`` sets). SQLite: None (its file's permissions are the
    caller's to check)."""
    if engine.dialect.name != "postgresql":
        return None
    with engine.connect() as conn:
        standby, read_only = conn.exec_driver_sql(_READ_ONLY).one()
    if standby:
        return "it is a hot standby (in recovery), where every transaction is read-only"
    if str(read_only).lower() == "on":
        return "its sessions are read-only (default_transaction_read_only is on)"
    return None
