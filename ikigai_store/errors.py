"""Exceptions raised by ikigai_store.

Owns the whole exception hierarchy and ``translate``, the one place where a psycopg exception
becomes ours (``translate_errors`` applies it to a block). Invariant: every error a public
function raises is an ``IkigaiStoreError``, chained to the driver's exception with ``raise ...
from exc``; a constraint violation keeps the constraint's name (``Conflict.constraint``), so
"duplicate key", "lost the race" and "a bug" stay distinguishable. A statement of ours that
refuses by raising (an append, an activity, a summary: migration 0040; a Claude Agent SDK
transcript's batch: migration 0041) uses SQLSTATE ``IK404``
for ``NotFound`` and ``IK400`` for ``InvalidArgument``, with the message the library shows.

Seed error codes map as: ERR_INVALID_ARG -> InvalidArgument, ERR_DB_CONNECT -> ConnectError,
ERR_DB_MIGRATE and ERR_IO -> MigrationError.

"The database is unreachable right now" is one family, ``DatabaseUnavailable``: the first call
of an outage typically raises ``ConnectionLost`` (its connection died under it) and the following
ones ``ConnectError`` (no new connection can be made); a caller retries on the family.

    IkigaiStoreError
    ├── InvalidArgument        (also a ValueError)
    ├── NotFound               (also a LookupError)
    ├── DatabaseUnavailable
    │   ├── ConnectError
    │   └── ConnectionLost
    │       └── NodeUnavailable
    ├── StoreClosed
    ├── OutboxError
    │   └── OutboxFull
    ├── MigrationError
    └── DatabaseError
        └── Conflict
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

__all__ = [
    "Conflict",
    "ConnectError",
    "ConnectionLost",
    "DatabaseError",
    "DatabaseUnavailable",
    "IkigaiStoreError",
    "InvalidArgument",
    "MigrationError",
    "NodeUnavailable",
    "NotFound",
    "OutboxError",
    "OutboxFull",
    "StoreClosed",
    "translate",
    "translate_errors",
]


class IkigaiStoreError(Exception):
    """Root of every exception raised by ikigai_store."""


class InvalidArgument(IkigaiStoreError, ValueError):
    """An argument was rejected before anything was written (seed ERR_INVALID_ARG)."""


class NotFound(IkigaiStoreError, LookupError):
    """The session (or other row) named by the caller does not exist."""


class DatabaseUnavailable(IkigaiStoreError):
    """The database cannot be used right now (an outage, a restart, a full pool); retry later.

    Nothing of the failing call was committed, except in one case: a connection that dies after
    the server committed but before the reply arrived (see ``ConnectionLost``).
    """


class ConnectError(DatabaseUnavailable):
    """No connection could be made, none became free within the store's ``timeout``, or the
    embedded server could not start (seed ERR_DB_CONNECT).

    ``sqlstate`` is the server's answer when it answered (None when it could not be reached);
    ``refused`` is True when that answer will not change by waiting: a wrong password or role,
    no ``pg_hba.conf`` entry, no such database. The offline outbox queues nothing then.
    """

    def __init__(self, message: str, *, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate

    @property
    def refused(self) -> bool:
        """Whether the server refused this connection for good (SQLSTATE class 28, 3D000)."""
        return self.sqlstate is not None and (
            self.sqlstate.startswith("28") or self.sqlstate == "3D000"
        )


class MigrationError(IkigaiStoreError):
    """A migration failed and was rolled back, or a migration file was unreadable.

    Seed codes ERR_DB_MIGRATE and ERR_IO.
    """


class ConnectionLost(DatabaseUnavailable):
    """The connection dropped during the call; the call's transaction was not committed,
    unless the connection died after the server committed but before the reply arrived.

    The store reconnects on the next call, so a caller may simply retry (see the documentation's
    "Errors and connection loss" for writes that must not be repeated).
    """


class NodeUnavailable(ConnectionLost):
    """On a Citus cluster: the coordinator could not reach the worker node holding the rows
    the call needed (it is down, restarting or unreachable); the connection to the
    coordinator is fine. The call's distributed transaction was aborted, so nothing was
    committed, unless the node failed while committing (as with ``ConnectionLost``). Calls
    that only need other nodes go on working; retry when the node is back (an idempotency key
    makes a retried append safe).
    """


class StoreClosed(IkigaiStoreError):
    """The store was closed: open a new one (retrying on this one can never succeed)."""


class OutboxError(IkigaiStoreError):
    """The offline outbox's file cannot be created, read or written (the message names it)."""


class OutboxFull(OutboxError):
    """The offline outbox already holds its ``max_pending`` undelivered operations; nothing was
    queued. Drain it (``Outbox.drain``, ``ikigai-store outbox drain``) or raise the limit."""


class DatabaseError(IkigaiStoreError):
    """Any other error reported by PostgreSQL (the message is PostgreSQL's)."""


class Conflict(DatabaseError):
    """A constraint refused the write: unique, exclusion, check, foreign key or not-null.

    ``constraint`` is the constraint's name as PostgreSQL reports it (None for not-null), and
    ``sqlstate`` the SQLSTATE (e.g. ``23505`` for a unique violation).
    """

    def __init__(self, message: str, *, constraint: str | None, sqlstate: str | None) -> None:
        super().__init__(message)
        self.constraint = constraint
        self.sqlstate = sqlstate


def translate(exc: psycopg.Error, conn: psycopg.Connection[Any] | None = None) -> IkigaiStoreError:
    """The ``IkigaiStoreError`` for a psycopg error raised while using ``conn``.

    A dropped connection (server restart, ``pg_terminate_backend``) becomes ``ConnectionLost``,
    and a Citus worker the coordinator could not reach ``NodeUnavailable`` (a ConnectionLost);
    an integrity violation a ``Conflict`` naming its constraint; a refusal raised by one of our
    statements (SQLSTATE ``IK404``, ``IK400``) ``NotFound`` or ``InvalidArgument`` with its
    message; anything else ``DatabaseError`` with PostgreSQL's first line.
    """
    if _node_unreachable(exc, conn):
        return NodeUnavailable(
            "a node of the Citus cluster is unreachable (the connection to the coordinator is "
            f"fine): {first_line(exc)}"
        )
    if _connection_lost(exc, conn):
        return ConnectionLost(f"database connection lost: {first_line(exc)}")
    refusal = _REFUSALS.get(exc.sqlstate or "")
    if refusal is not None:
        return refusal(exc.diag.message_primary or first_line(exc))
    if isinstance(exc, psycopg.IntegrityError):
        diag = exc.diag
        return Conflict(first_line(exc), constraint=diag.constraint_name, sqlstate=diag.sqlstate)
    if exc.sqlstate in _MISSING_SCHEMA:
        # A relation or function of ours that is not there: a store opened with migrate=False
        # on a database this version's migrations have not reached.
        return DatabaseError(
            f"{first_line(exc)} (is the database migrated? `ikigai-store status` shows its "
            "schema version and what is pending; `ikigai-store migrate` applies it)"
        )
    return DatabaseError(first_line(exc))


@contextmanager
def translate_errors(conn: psycopg.Connection[Any] | None = None) -> Iterator[None]:
    """Turn psycopg errors raised inside the block into ``IkigaiStoreError`` subclasses."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, conn) from exc


#: The SQLSTATEs our statements refuse with, and the exception each becomes.
_REFUSALS: dict[str, type[IkigaiStoreError]] = {"IK404": NotFound, "IK400": InvalidArgument}

#: SQLSTATEs of a missing table, column or function: undefined_table, undefined_column,
#: undefined_function.
_MISSING_SCHEMA = frozenset({"42P01", "42703", "42883"})

#: SQLSTATEs that end the session: class 08 (connection exception) and the shutdowns of 57P.
_LOST_STATES = ("08", "57P01", "57P02", "57P03")


def _node_unreachable(exc: psycopg.Error, conn: psycopg.Connection[Any] | None) -> bool:
    """True for Citus' "connection to the remote node ... failed" (class 08, raised by the
    coordinator on a connection that is still good)."""
    if not (exc.sqlstate or "").startswith("08") or (conn is not None and conn.broken):
        return False
    return (exc.diag.message_primary or "").startswith("connection to the remote node ")


def _connection_lost(exc: psycopg.Error, conn: psycopg.Connection[Any] | None) -> bool:
    """True when the error means the connection is gone (not, say, a serialization failure or
    a statement timeout, which psycopg also files under OperationalError)."""
    if not isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return False
    if conn is not None and (conn.closed or conn.broken):
        return True
    state = exc.sqlstate
    if state is not None:
        return state.startswith(_LOST_STATES)
    return conn is None  # no SQLSTATE: a client-side failure (e.g. the socket closed)


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (the type's name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
