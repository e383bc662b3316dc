"""Schema migrations: yoyo underneath, serialised by a PostgreSQL advisory lock.

Owns applying, listing and rolling back the ``migrations/NNNN-description.sql`` files. Invariants:
- ``apply`` and plain ``yoyo apply --batch -d postgresql+psycopg://... migrations`` record the same
  thing (yoyo's ``_yoyo_migration`` table), so either can follow the other;
- our entry points hold a session-level advisory lock while migrating: concurrent migrators queue,
  and a killed one releases it with its connection (yoyo's own lock row would survive a SIGKILL,
  so it is not taken here — run plain ``yoyo apply`` only when no other migrator is running);
- what is pending is read without the lock first (read-only), so an up-to-date database never
  waits for a migrator that hangs; the lock is polled (never waited for inside a statement,
  which would hold a snapshot that a ``CREATE INDEX CONCURRENTLY`` of the running migrator
  waits for) at most ``lock_timeout`` seconds, then
  ``MigrationError`` names the holder (server pid from ``pg_locks``, and the client's pid and
  host from its ``application_name``);
- a database created by the ikigai C program (``schema_metadata`` says N, no yoyo bookkeeping) has
  the migrations numbered <= N recorded as applied, untouched, before the rest are applied —
  except migrations whose header says ``-- ikigai-adopt: run``: those are idempotent converters
  of C-era tables (the C program numbered its own migrations differently), so they always run;
- each migration runs in one transaction: a failure rolls it back completely and raises
  ``MigrationError`` naming the file and PostgreSQL's message — except migrations marked
  ``-- transactional: false`` (0015 builds indexes ``CONCURRENTLY`` and fills a column in
  committed batches): on a failure yoyo undoes the statements that ran (statement i of the
  rollback undoes statement i), and since each statement is idempotent, applying again is safe.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from ._resources import migrations_dir
from .config import redact, to_yoyo_url
from .errors import ConnectError, IkigaiStoreError, MigrationError, translate_errors
from .pool import connect
from .sql import queries

__all__ = [
    "MIGRATION_LOCK_KEY",
    "apply",
    "migration_number",
    "packaged_version",
    "pending",
    "rollback",
]

#: pg_advisory_lock key held while migrating ("ikigai-m" as a big-endian int64).
MIGRATION_LOCK_KEY = int.from_bytes(b"ikigai-m", "big", signed=True)


def migration_number(migration_id: str) -> int:
    """``0002-agents`` -> 2 (the number each migration writes to ``schema_metadata``)."""
    head = migration_id.split("-", 1)[0]
    if not head.isdigit():
        raise MigrationError(f"migration {migration_id!r} does not start with a number")
    return int(head)


def packaged_version() -> int:
    """The schema version this ikigai-store's newest packaged migration writes."""
    return max(
        migration_number(p.name)
        for p in migrations_dir().glob("[0-9]*.sql")
        if not p.name.endswith(".rollback.sql")
    )


def _sources(extra: Sequence[Path | str]) -> list[str]:
    sources = [migrations_dir(), *(Path(p) for p in extra)]
    for source in sources:
        try:
            names = os.listdir(source)
        except OSError as exc:
            raise MigrationError(f"cannot read migrations directory {source}: {exc}") from exc
        for name in names:
            if name.endswith(".sql"):
                try:
                    with open(source / name, encoding="utf-8") as f:
                        f.read()
                except (OSError, UnicodeDecodeError) as exc:
                    raise MigrationError(f"cannot read migration {source / name}: {exc}") from exc
    return [str(s) for s in sources]


def _read(sources: list[str]) -> Any:
    from yoyo import read_migrations

    return read_migrations(*sources)


def _packaged_hashes() -> set[str]:
    """yoyo's hashes (sha256 of the id, the file name without ``.sql``) of the packaged
    migrations, read as ``yoyo.read_migrations`` reads them: every ``.sql`` or ``.py`` file
    but rollbacks, post-apply hooks and yoyo's temporary files."""
    ids = [
        name.rsplit(".", 1)[0]
        for name in os.listdir(migrations_dir())
        if name.endswith((".sql", ".py"))
        and not name.endswith(".rollback.sql")
        and not name.startswith(("post-apply", "_tmp_yoyonew"))
    ]
    return {hashlib.sha256(i.encode("utf-8")).hexdigest() for i in ids}


def _applied_hashes(conn: psycopg.Connection[Any]) -> set[str]:
    """What yoyo recorded as applied (read-only: creates none of yoyo's tables)."""
    if not queries.yoyo_bookkeeping_exists(conn)["exists"]:
        return set()
    return {row["migration_hash"] for row in queries.applied_migration_hashes(conn)}


def _todo(conn: psycopg.Connection[Any], migrations: Any) -> tuple[list[Any], list[Any]]:
    """(migrations not applied yet in dependency order, those of them adoption records)."""
    from yoyo.migrations import topological_sort

    applied = _applied_hashes(conn)
    todo = list(topological_sort(m for m in migrations if m.hash not in applied))
    return todo, _adoptable(conn, applied, todo)


def _adoptable(conn: psycopg.Connection[Any], applied: set[str], todo: list[Any]) -> list[Any]:
    """Migrations <= schema_metadata's version, when yoyo has no record yet (a C-era database),
    except the converters marked ``-- ikigai-adopt: run``."""
    if applied or not queries.schema_metadata_exists(conn)["exists"]:
        return []
    version = queries.schema_version(conn)["version"] or 0
    return [m for m in todo if migration_number(m.id) <= version and not _runs_on_adoption(m.path)]


@contextmanager
def _locked(url: str, lock_timeout: float) -> Iterator[psycopg.Connection[Any]]:
    """Hold the migration advisory lock for the block, waiting at most ``lock_timeout`` s.

    The connection's application_name names this process, so a migrator that times out can
    say which process (pid and host) holds the lock.
    """
    name = f"ikigai-store migrate pid={os.getpid()} host={socket.gethostname()}"[:63]
    with (
        connect(url, autocommit=True, row_factory=dict_row, application_name=name) as conn,
        translate_errors(conn),
    ):
        # Poll instead of blocking in pg_advisory_lock: a statement waiting for a lock holds a
        # snapshot, and CREATE INDEX CONCURRENTLY (migration 0015) waits for every snapshot
        # older than its own, so blocked waiters and the migrator would wait for each other.
        deadline = time.monotonic() + lock_timeout
        pause = 0.02
        while not queries.migration_try_lock(conn, key=MIGRATION_LOCK_KEY)["locked"]:
            if time.monotonic() >= deadline:
                raise MigrationError(
                    f"another migrator has held the migration lock for over {lock_timeout:g} "
                    f"s: {_describe_holders(conn)}; wait for it, or stop that process if it "
                    "hangs"
                )
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.5)
        try:
            yield conn
        finally:
            if not conn.closed:
                queries.migration_unlock(conn, key=MIGRATION_LOCK_KEY)


def _describe_holders(conn: psycopg.Connection[Any]) -> str:
    holders = list(queries.advisory_lock_holders(conn, key=MIGRATION_LOCK_KEY))
    if not holders:
        return "its holder has just released it"
    return ", ".join(
        f"server pid {h['pid']} ({h['application_name'] or 'no application_name'}, "
        f"{h['state'] or 'unknown state'}, connected {h['backend_start']:%Y-%m-%d %H:%M:%S%z})"
        if h["backend_start"] is not None
        else f"server pid {h['pid']}"
        for h in holders
    )


@contextmanager
def _yoyo(url: str) -> Iterator[Any]:
    from yoyo import get_backend

    try:
        backend = get_backend(to_yoyo_url(url))
    except psycopg.Error as exc:
        raise ConnectError(f"yoyo cannot connect to {redact(url)}: {exc}") from exc
    try:
        # The advisory lock serialises us; yoyo's lock row would survive a SIGKILL.
        backend._is_locked = True
        # A migrator killed mid-statement: its lock's connection closes, but this backend would
        # finish its statement (a long fill) beside the next migrator's. Checking the client
        # socket every second ends it with its client (PostgreSQL 14+). Named, to be found.
        queries.migrator_session(backend.connection)
        backend.connection.commit()
        yield backend
    finally:
        backend.connection.close()


_ADOPT_RUN = re.compile(r"^--\s*ikigai-adopt:\s*run\s*$", re.MULTILINE)


def _runs_on_adoption(path: str) -> bool:
    """True when the migration converts C-era tables and must run even when adopting."""
    with open(path, encoding="utf-8") as f:
        return bool(_ADOPT_RUN.search(f.read()))


def apply(
    url: str,
    extra_sources: Sequence[Path | str] = (),
    *,
    progress: Callable[[str], None] | None = None,
    lock_timeout: float = 60.0,
) -> list[str]:
    """Apply pending migrations (packaged ones plus ``extra_sources``); return the ids applied.

    With nothing pending, no lock is taken and nothing is written. Otherwise the migration lock
    is awaited for at most ``lock_timeout`` seconds (``MigrationError`` naming the holder after
    that), and what is pending is computed again under it. ``progress(migration_id)`` is called
    before each migration is applied.
    """
    sources = _sources(extra_sources)
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        if not extra_sources and _packaged_hashes() <= _applied_hashes(conn):
            return []  # up to date: decided without importing yoyo (a hook starts faster)
        migrations = _read(sources)
        if not _todo(conn, migrations)[0]:
            return []
    applied: list[str] = []
    with _locked(url, lock_timeout) as conn:
        todo, adoptable = _todo(conn, migrations)
        if not todo:
            return []
        with _yoyo(url) as backend:
            if adoptable:
                backend.mark_migrations(adoptable)
            for migration in backend.to_apply(migrations):
                if progress is not None:
                    progress(migration.id)
                try:
                    backend.apply_one(migration)
                except IkigaiStoreError:
                    raise
                except Exception as exc:
                    raise MigrationError(
                        f"migration {migration.id} ({migration.path}) failed and was rolled "
                        f"back: {_pg_message(exc)}"
                    ) from exc
                applied.append(migration.id)
    return applied


def pending(url: str, extra_sources: Sequence[Path | str] = ()) -> list[str]:
    """Ids of the migrations ``apply`` would run. Read-only: takes no lock, records nothing
    (so it answers even while another migrator holds the lock)."""
    migrations = _read(_sources(extra_sources))
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        todo, adoptable = _todo(conn, migrations)
    return [m.id for m in todo if m not in adoptable]


def rollback(
    url: str,
    count: int | None = None,
    extra_sources: Sequence[Path | str] = (),
    *,
    lock_timeout: float = 60.0,
) -> list[str]:
    """Roll back the newest ``count`` applied migrations (all when None); return their ids."""
    migrations = _read(_sources(extra_sources))
    rolled: list[str] = []
    with _locked(url, lock_timeout), _yoyo(url) as backend:
        todo = list(backend.to_rollback(migrations))
        for migration in todo[:count] if count is not None else todo:
            try:
                backend.rollback_one(migration)
            except Exception as exc:
                raise MigrationError(
                    f"rollback of {migration.id} ({migration.path}) failed: {_pg_message(exc)}"
                ) from exc
            rolled.append(migration.id)
    return rolled


def _pg_message(exc: BaseException) -> str:
    diag = getattr(exc, "diag", None)
    primary = getattr(diag, "message_primary", None)
    sqlstate = getattr(diag, "sqlstate", None)
    if primary:
        return f"{primary} (SQLSTATE {sqlstate})" if sqlstate else str(primary)
    return str(exc).strip() or type(exc).__name__
