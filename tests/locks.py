"""Helpers for the tests of who waits for whose row lock."""

from __future__ import annotations

import psycopg


def waiting_on_a_lock(url: str, query_like: str = "%") -> bool:
    """Whether some backend of ``url``'s database waits for a lock, running a query that
    matches ``query_like`` (SQL LIKE). Asked on a connection of its own: pg_stat_activity is
    read once per transaction. On Citus a routed statement waits on the worker holding the
    shard, so the cluster's lock waits (``citus_lock_waits``, by the waiting distributed
    statement) count too."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND query LIKE %s",
            (query_like,),
        ).fetchone()
        if row and row[0]:
            return True
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'citus'").fetchone():
            row = conn.execute(
                "SELECT count(*) FROM citus_lock_waits WHERE blocked_statement LIKE %s",
                (query_like,),
            ).fetchone()
    return bool(row and row[0])
