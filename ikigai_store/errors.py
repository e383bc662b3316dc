"""Exceptions raised by ikigai_store.

Owns the whole exception hierarchy. Invariant: every error a public function raises is an
``IkigaiStoreError``; driver (psycopg) and yoyo exceptions are translated in one place
(``ikigai_store.db.translate_errors``) and chained with ``raise ... from exc``.

Seed error codes map as: ERR_INVALID_ARG -> InvalidArgument, ERR_DB_CONNECT -> ConnectError,
ERR_DB_MIGRATE and ERR_IO -> MigrationError.
"""

from __future__ import annotations

__all__ = [
    "ConnectError",
    "ConnectionLost",
    "DatabaseError",
    "IkigaiStoreError",
    "InvalidArgument",
    "MigrationError",
    "NotFound",
]


class IkigaiStoreError(Exception):
    """Root of every exception raised by ikigai_store."""


class InvalidArgument(IkigaiStoreError, ValueError):
    """An argument was rejected before anything was written (seed ERR_INVALID_ARG)."""


class NotFound(IkigaiStoreError, LookupError):
    """The session (or other row) named by the caller does not exist."""


class ConnectError(IkigaiStoreError):
    """The database could not be reached or the embedded server could not start (ERR_DB_CONNECT)."""


class MigrationError(IkigaiStoreError):
    """A migration failed and was rolled back, or a migration file was unreadable.

    Seed codes ERR_DB_MIGRATE and ERR_IO.
    """


class ConnectionLost(IkigaiStoreError):
    """The connection dropped during the call; nothing of the call was committed.

    The store reconnects on the next call, so a caller may simply retry.
    """


class DatabaseError(IkigaiStoreError):
    """Any other error reported by PostgreSQL (the message is PostgreSQL's)."""
