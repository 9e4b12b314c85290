"""Reading from a PostgreSQL hot standby: is this database one, and how far behind is it.

A standby replays the primary's WAL; every transaction on it is read-only. The lag reported is
``now() - pg_last_xact_replay_timestamp()`` (how old the newest replayed commit is), or 0 when
everything received has been replayed (an idle primary commits nothing, so the age of its last
commit says nothing about the standby). Replayed means the replay position is at or past the
receive position, not equal to it: a standby that restarts replays its own WAL up to where it
stopped, and its WAL receiver then reports the start of the segment it streams from, behind the
replay position until the primary writes again (with ``=``, the lag of a restarted standby of an
idle primary grew without bound). While nothing streams (no receive position: before the WAL
receiver connects, or a standby fed from an archive only) how far behind it is cannot be known,
and the age of its newest replayed commit is reported.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

_STATE = (
    "SELECT pg_is_in_recovery(), CASE WHEN NOT pg_is_in_recovery() THEN NULL"
    " WHEN pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() THEN 0.0"
    " ELSE EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp())::float8 END"
)


def replication(engine: Engine) -> dict[str, Any]:
    """``{"standby": bool, "replication_lag_s": seconds or None}`` (SQLite: not a standby)."""
    if engine.dialect.name != "postgresql":
        return {"standby": False, "replication_lag_s": None}
    with engine.connect() as conn:
        standby, lag = conn.exec_driver_sql(_STATE).one()
    return {"standby": bool(standby), "replication_lag_s": None if lag is None else float(lag)}


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
