"""Schema facts and test helpers, as operations shared by both faces (see ``ops``).

Owns reading the schema version and emptying the tables for tests. Invariant: a database
without the schema reports version 0 instead of failing.
"""

from __future__ import annotations

from .ops import Op, one, statement

__all__ = ["schema_version", "truncate_all"]


def schema_version() -> Op[int]:
    exists = yield one("schema_metadata_exists")
    if not exists["exists"]:
        return 0
    row = yield one("schema_version")
    return int(row["version"] or 0)


def truncate_all() -> Op[None]:
    yield statement("truncate_all")
