"""Exceptions raised by ikigai_store.

Owns the whole exception hierarchy. Invariant: every error a public function raises is an
``IkigaiStoreError``; driver (psycopg) and yoyo exceptions are translated in one place
(``ikigai_store.db.translate_errors``) and chained with ``raise ... from exc``.

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
    ├── StoreClosed
    ├── MigrationError
    └── DatabaseError
"""

from __future__ import annotations

__all__ = [
    "ConnectError",
    "ConnectionLost",
    "DatabaseError",
    "DatabaseUnavailable",
    "IkigaiStoreError",
    "InvalidArgument",
    "MigrationError",
    "NotFound",
    "StoreClosed",
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
    embedded server could not start (seed ERR_DB_CONNECT)."""


class MigrationError(IkigaiStoreError):
    """A migration failed and was rolled back, or a migration file was unreadable.

    Seed codes ERR_DB_MIGRATE and ERR_IO.
    """


class ConnectionLost(DatabaseUnavailable):
    """The connection dropped during the call; the call's transaction was not committed,
    unless the connection died after the server committed but before the reply arrived.

    The store reconnects on the next call, so a caller may simply retry (see the README on
    connection loss for writes that must not be repeated).
    """


class StoreClosed(IkigaiStoreError):
    """The store was closed: open a new one (retrying on this one can never succeed)."""


class DatabaseError(IkigaiStoreError):
    """Any other error reported by PostgreSQL (the message is PostgreSQL's)."""
