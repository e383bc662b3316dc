"""Driver errors become ours in one place, and constraint violations keep the constraint's name."""

from __future__ import annotations

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store.errors import translate

pytestmark = pytest.mark.db


def _violation(url: str, sql: str) -> psycopg.Error:
    with psycopg.connect(url) as conn:
        try:
            conn.execute(sql)
        except psycopg.Error as exc:
            conn.rollback()
            return exc
    pytest.fail(f"{sql!r} raised nothing")


@pytest.mark.parametrize(
    ("sql", "constraint", "sqlstate"),
    [
        ("INSERT INTO sessions (id) VALUES (1), (1)", "sessions_pkey", "23505"),
        ("INSERT INTO messages (session_id, kind) VALUES (999999, 'user')", None, "23503"),
        ("INSERT INTO agents (uuid, session_id, status) SELECT 'x', 1, 'zombie'", None, None),
    ],
)
def test_integrity_errors_become_conflicts(
    ikigai_db_url: str, sql: str, constraint: str | None, sqlstate: str | None
) -> None:
    """Unique, foreign-key and check violations become Conflict with constraint and SQLSTATE."""
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE sessions RESTART IDENTITY CASCADE")
        conn.execute("INSERT INTO sessions DEFAULT VALUES")
    error = translate(_violation(ikigai_db_url, sql))
    assert isinstance(error, ik.Conflict) and isinstance(error, ik.DatabaseError)
    assert error.constraint is not None
    if constraint is not None:
        assert error.constraint == constraint
    if sqlstate is not None:
        assert error.sqlstate == sqlstate
    with psycopg.connect(ikigai_db_url, autocommit=True) as conn:
        conn.execute("TRUNCATE sessions RESTART IDENTITY CASCADE")


def test_other_errors_are_database_errors(ikigai_db_url: str) -> None:
    """A non-integrity error becomes DatabaseError carrying PostgreSQL's first line."""
    error = translate(_violation(ikigai_db_url, "SELECT 1/0"))
    assert type(error) is ik.DatabaseError
    assert "division by zero" in str(error)


def test_operational_errors_that_keep_the_connection_are_not_connection_lost(
    ikigai_db_url: str,
) -> None:
    """A statement timeout (an OperationalError) is a DatabaseError even with no connection to
    inspect: only connection-class SQLSTATEs (08, 57P0x) or a broken connection mean 'lost'."""
    exc = _violation(ikigai_db_url, "SET statement_timeout = 1; SELECT pg_sleep(1)")
    assert isinstance(exc, psycopg.OperationalError)
    error = translate(exc, None)
    assert type(error) is ik.DatabaseError, error
    assert not isinstance(error, ik.DatabaseUnavailable)


def test_admin_shutdown_is_connection_lost(ikigai_db_url: str) -> None:
    """pg_terminate_backend's error (SQLSTATE 57P01) is ConnectionLost."""
    with psycopg.connect(ikigai_db_url, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(ikigai_db_url, autocommit=True) as killer:
            killer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as info:
            victim.execute("SELECT 1")
    assert isinstance(translate(info.value, None), ik.ConnectionLost)
