"""Schema facts and test helpers, as operations shared by both faces (see ``ops``).

Owns reading the schema version and emptying the tables for tests. Invariant: a database
without the schema reports version 0 instead of failing.
"""

from __future__ import annotations

from .ops import Area, FaceT, Op, one, operation, statement

__all__ = ["schema_version", "truncate_all"]


def schema_version() -> Op[int]:
    """The version in ``schema_metadata`` (0 on a database without the schema)."""
    exists = yield one("schema_metadata_exists")
    if not exists["exists"]:
        return 0
    row = yield one("schema_version")
    return int(row["version"] or 0)


def truncate_all() -> Op[None]:
    """Delete every session and event and restart the ids (for tests)."""
    yield statement("truncate_all")


class AdminOps(Area[FaceT]):
    """The admin operations of a store (``Store``, ``AsyncStore``)."""

    schema_version = operation(schema_version)
    _truncate_all = operation(truncate_all)
