"""The named queries, loaded once from ``queries/*.sql`` by aiosql.

Owns ``queries``: the public aiosql query object (``ikigai_store.queries``), callable with any
psycopg 3 connection, e.g. ``ik.queries.session_messages(conn, session_id=1)``. Invariant: every
SQL statement the package runs (migrations aside) is one of these, and query names are unique
across files (``load_queries`` refuses duplicates; aiosql would silently keep the last one).

``LOCAL_FILES`` are not PostgreSQL: ``outbox.sql`` is the offline outbox's SQLite file, loaded on
its own with aiosql's sqlite3 adapter (``outbox_queries``), never into ``queries``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiosql

from ._resources import queries_dir

__all__ = ["LOCAL_FILES", "aqueries", "load_queries", "outbox_queries", "queries"]

#: Query files for other databases than PostgreSQL, and the aiosql adapter each is loaded with.
LOCAL_FILES = {"outbox.sql": "sqlite3"}

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


def query_names(directory: Path) -> dict[str, list[str]]:
    """Map each query name to the files defining it (all files, ``LOCAL_FILES`` too)."""
    names: dict[str, list[str]] = {}
    for path in sorted(directory.glob("*.sql")):
        for name in _NAME.findall(path.read_text(encoding="utf-8")):
            names.setdefault(name, []).append(path.name)
    return names


def load_queries(driver_adapter: str = "psycopg", directory: Path | None = None) -> Any:
    """Load the PostgreSQL ``*.sql`` files of ``directory`` (default: the packaged queries):
    every file but ``LOCAL_FILES``."""
    directory = directory or queries_dir()
    duplicates = {n: f for n, f in query_names(directory).items() if len(f) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate query names in {directory}: {duplicates}")
    paths = [p for p in sorted(directory.glob("*.sql")) if p.name not in LOCAL_FILES]
    text = "\n".join(p.read_text(encoding="utf-8") for p in paths)
    return aiosql.from_str(text, driver_adapter)


queries: Any = load_queries()
aqueries: Any = load_queries("apsycopg")
outbox_queries: Any = aiosql.from_path(queries_dir() / "outbox.sql", LOCAL_FILES["outbox.sql"])
