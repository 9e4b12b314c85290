"""Which database errors can pass (503, retried) and which are bugs (500): real drivers' errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, exc, text

from ett_collector.storage import is_transient_db_error
from tests.support.ports import free_port


def _raised(engine_url: str, sql: str, **kwargs: object) -> BaseException:
    engine = create_engine(engine_url, **kwargs)  # type: ignore[arg-type]
    try:
        with engine.begin() as conn:
            conn.execute(text(sql))
    except Exception as error:
        return error
    finally:
        engine.dispose()
    raise AssertionError(f"{sql!r} did not fail")


def test_sqlite_locked_passes(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    holder = create_engine(f"sqlite:///{db}")
    with holder.connect() as conn:
        conn.exec_driver_sql("CREATE TABLE t (x INTEGER)")
        conn.commit()
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # holds the write lock
        error = _raised(f"sqlite:///{db}", "INSERT INTO t VALUES (1)", connect_args={"timeout": 0})
        conn.rollback()
    holder.dispose()
    assert isinstance(error, exc.OperationalError)
    assert is_transient_db_error(error)


def test_sqlite_bugs_do_not_pass(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'y.db'}"
    missing = _raised(url, "INSERT INTO nowhere VALUES (1)")
    assert isinstance(missing, exc.OperationalError)  # an OperationalError, yet a bug
    assert not is_transient_db_error(missing)
    assert not is_transient_db_error(_raised(url, "SELEC 1"))


def test_postgres_unreachable_passes() -> None:
    port = free_port()  # nothing listens there
    error = _raised(f"postgresql+psycopg://ett@127.0.0.1:{port}/ett", "SELECT 1")
    assert is_transient_db_error(error)


@pytest.mark.postgres
def test_postgres_bugs_do_not_pass(fresh_postgres_url: str) -> None:
    assert not is_transient_db_error(_raised(fresh_postgres_url, "SELECT * FROM nowhere"))
    assert not is_transient_db_error(_raised(fresh_postgres_url, "SELECT 1/0"))
    assert not is_transient_db_error(ValueError("not a database error"))


@pytest.mark.postgres
@pytest.mark.parametrize("sqlstate", ["40P01", "40001"], ids=["deadlock", "serialization"])
def test_postgres_rolled_back_transactions_pass(fresh_postgres_url: str, sqlstate: str) -> None:
    """A deadlock or a serialization failure rolled the transaction back whole: it can run
    again (503, retried). A probe saw ingest deadlock against `ett db upgrade`, answered 500."""
    raise_it = f"DO $$ BEGIN RAISE EXCEPTION 'rolled back' USING ERRCODE = '{sqlstate}'; END $$"
    error = _raised(fresh_postgres_url, raise_it)
    assert getattr(getattr(error, "orig", None), "sqlstate", None) == sqlstate
    assert is_transient_db_error(error)


def _raw_raised(engine_url: str, sql: str) -> BaseException:
    """The driver's own error, unwrapped, as a connection checked out with
    ``Engine.raw_connection`` raises it."""
    engine = create_engine(engine_url)
    try:
        raw = engine.raw_connection()
        try:
            raw.cursor().execute(sql)
        finally:
            raw.close()
    except Exception as error:
        return error
    finally:
        engine.dispose()
    raise AssertionError(f"{sql!r} did not fail")


def test_unwrapped_driver_errors_are_judged_alike(tmp_path: Path) -> None:
    port = free_port()
    refused = _raw_raised(f"postgresql+psycopg://ett@127.0.0.1:{port}/ett", "SELECT 1")
    assert not isinstance(refused, exc.DBAPIError)  # psycopg's own OperationalError
    assert is_transient_db_error(refused)
    bug = _raw_raised(f"sqlite:///{tmp_path / 'z.db'}", "INSERT INTO nowhere VALUES (1)")
    assert type(bug).__module__ == "sqlite3" and not is_transient_db_error(bug)
    assert not is_transient_db_error(OSError("not a database error"))
