"""The named queries, loaded once from ``queries/*.sql`` by aiosql.

Owns ``queries``: the public aiosql query object (``ikigai_store.queries``), callable with any
psycopg 3 connection, e.g. ``ik.queries.session_messages(conn, session_id=1)``. Invariant: every
SQL statement the package runs (migrations aside) is one of these, and query names are unique
across files (``load_queries`` refuses duplicates; aiosql would silently keep the last one).

``LOCAL_FILES`` are not PostgreSQL: ``outbox.sql`` is the offline outbox's SQLite file, loaded on
its own with aiosql's sqlite3 adapter (``outbox_queries``), never into ``queries``.

Only ``queries`` is loaded on import (the operations of both faces run its SQL text);
``aqueries`` (the same queries for async connections) and ``outbox_queries`` are loaded on first
access, so a short-lived process (a hook) pays for one parse, not three.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import aiosql
from aiosql import query_loader

from ._resources import queries_dir

__all__ = ["LOCAL_FILES", "aqueries", "load_queries", "outbox_queries", "queries"]

#: Query files for other databases than PostgreSQL, and the aiosql adapter each is loaded with.
LOCAL_FILES = {"outbox.sql": "sqlite3"}

_NAME = re.compile(r"^--\s*name:\s*([A-Za-z_][A-Za-z0-9_]*)", re.MULTILINE)


class _Loader(query_loader.QueryLoader):
    """aiosql's loader, minus its ``/* */`` comment scan for text that has no ``/*`` at all.

    That scan matches the empty string at every character (about 100,000 matches for our
    files), most of a load's time; without ``/*`` in the text it returns the text unchanged,
    so skipping it gives the same queries (tests/unit/test_sql_files.py compares both loads).
    """

    def load_query_data_from_sql(
        self, sql: str, ns_parts: list[str], fname: Path | str = "<unknown>"
    ) -> list[Any]:
        if "/*" in sql:
            return super().load_query_data_from_sql(sql, ns_parts, fname)
        parts = query_loader._QUERY_DEF.split(sql)
        lineno = 1 + parts[0].count("\n")
        data = []
        for part in parts[1:]:
            data.append(self._make_query_datum(part, ns_parts, (fname, lineno)))
            lineno += part.count("\n")
        return data


def query_names(directory: Path) -> dict[str, list[str]]:
    """Map each query name to the files defining it (all files, ``LOCAL_FILES`` too)."""
    names: dict[str, list[str]] = {}
    for path in sorted(directory.glob("*.sql")):
        for name in _NAME.findall(path.read_text(encoding="utf-8")):
            names.setdefault(name, []).append(path.name)
    return names


def load_queries(
    driver_adapter: str = "psycopg", directory: Path | None = None, *, fast: bool = True
) -> Any:
    """Load the PostgreSQL ``*.sql`` files of ``directory`` (default: the packaged queries):
    every file but ``LOCAL_FILES``. ``fast=False`` uses aiosql's own loader throughout."""
    directory = directory or queries_dir()
    duplicates = {n: f for n, f in query_names(directory).items() if len(f) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate query names in {directory}: {duplicates}")
    paths = [p for p in sorted(directory.glob("*.sql")) if p.name not in LOCAL_FILES]
    text = "\n".join(p.read_text(encoding="utf-8") for p in paths)
    if not fast:
        return aiosql.from_str(text, driver_adapter)
    return aiosql.from_str(text, driver_adapter, loader_cls=_Loader)


queries: Any = load_queries()
"""Every named query of ``queries/*.sql``, loaded by aiosql for psycopg connections: e.g.
``ik.queries.session_messages(conn, session_id=1)``. Names, parameters and columns follow the
schema and may change in a minor release (see the CHANGELOG); ``Store`` and ``AsyncStore``
are the stable API."""
# Declared, not bound: module __getattr__ loads them on first access.
aqueries: Any
"""The same queries as ``queries``, for asyncio psycopg connections (``await
ik.aqueries.session_messages(aconn, session_id=1)``); loaded on first use."""
outbox_queries: Any


def __getattr__(name: str) -> Any:
    """``aqueries`` and ``outbox_queries``, loaded on first access (then module globals)."""
    if name == "aqueries":
        value = load_queries("apsycopg")
    elif name == "outbox_queries":
        path = queries_dir() / "outbox.sql"
        value = aiosql.from_path(path, LOCAL_FILES["outbox.sql"], loader_cls=_Loader)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
