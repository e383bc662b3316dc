"""Schema migrations: yoyo underneath, serialised by a PostgreSQL advisory lock.

Owns applying, listing and rolling back the ``migrations/NNNN-description.sql`` files. Invariants:
- ``apply`` and plain ``yoyo apply --batch -d postgresql+psycopg://... migrations`` record the same
  thing (yoyo's ``_yoyo_migration`` table), so either can follow the other;
- our entry points hold a session-level advisory lock while migrating: concurrent migrators queue,
  and a killed one releases it with its connection (yoyo's own lock row would survive a SIGKILL,
  so it is not taken here — run plain ``yoyo apply`` only when no other migrator is running);
- a database created by the ikigai C program (``schema_metadata`` says N, no yoyo bookkeeping) has
  the migrations numbered <= N recorded as applied, untouched, before the rest are applied —
  except migrations whose header says ``-- ikigai-adopt: run``: those are idempotent converters
  of C-era tables (the C program numbered its own migrations differently), so they always run;
- each migration runs in one transaction: a failure rolls it back completely and raises
  ``MigrationError`` naming the file and PostgreSQL's message.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg

from ._resources import migrations_dir
from .db import connect, redact, to_yoyo_url, translate_errors
from .errors import ConnectError, IkigaiStoreError, MigrationError
from .sql import queries

__all__ = ["MIGRATION_LOCK_KEY", "apply", "migration_number", "pending", "rollback"]

#: pg_advisory_lock key held while migrating ("ikigai-m" as a big-endian int64).
MIGRATION_LOCK_KEY = int.from_bytes(b"ikigai-m", "big", signed=True)


def migration_number(migration_id: str) -> int:
    """``0002-agents`` -> 2 (the number each migration writes to ``schema_metadata``)."""
    head = migration_id.split("-", 1)[0]
    if not head.isdigit():
        raise MigrationError(f"migration {migration_id!r} does not start with a number")
    return int(head)


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


@contextmanager
def _backend(url: str, extra: Sequence[Path | str]) -> Iterator[tuple[Any, Any, list[Any]]]:
    """Yield (yoyo backend, migrations, adoptable) while holding the migration advisory lock.

    ``adoptable`` are the migrations a C-era database already has (see ``_adoptable``).
    """
    from yoyo import get_backend, read_migrations

    sources = _sources(extra)
    with connect(url, autocommit=True) as lock_conn, translate_errors(lock_conn):
        queries.migration_lock(lock_conn, key=MIGRATION_LOCK_KEY)
        try:
            try:
                backend = get_backend(to_yoyo_url(url))
            except psycopg.Error as exc:
                raise ConnectError(f"yoyo cannot connect to {redact(url)}: {exc}") from exc
            try:
                # The advisory lock serialises us; yoyo's lock row would survive a SIGKILL.
                backend._is_locked = True
                migrations = read_migrations(*sources)
                yield backend, migrations, _adoptable(lock_conn, backend, migrations)
            finally:
                backend.connection.close()
        finally:
            if not lock_conn.closed:
                queries.migration_unlock(lock_conn, key=MIGRATION_LOCK_KEY)


def _adoptable(conn: psycopg.Connection[Any], backend: Any, migrations: Any) -> list[Any]:
    """Migrations <= schema_metadata's version, when yoyo has no record yet (a C-era database),
    except the converters marked ``-- ikigai-adopt: run``."""
    if backend.get_applied_migration_hashes() or not queries.schema_metadata_exists(conn):
        return []
    version = queries.schema_version(conn) or 0
    return [
        m for m in migrations if migration_number(m.id) <= version and not _runs_on_adoption(m.path)
    ]


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
) -> list[str]:
    """Apply pending migrations (packaged ones plus ``extra_sources``); return the ids applied.

    ``progress(migration_id)`` is called before each migration is applied.
    """
    applied: list[str] = []
    with _backend(url, extra_sources) as (backend, migrations, adoptable):
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
                    f"migration {migration.id} ({migration.path}) failed and was rolled back: "
                    f"{_pg_message(exc)}"
                ) from exc
            applied.append(migration.id)
    return applied


def pending(url: str, extra_sources: Sequence[Path | str] = ()) -> list[str]:
    """Ids of the migrations ``apply`` would run (it records nothing, adoption included)."""
    with _backend(url, extra_sources) as (backend, migrations, adoptable):
        return [m.id for m in backend.to_apply(migrations) if m not in adoptable]


def rollback(
    url: str, count: int | None = None, extra_sources: Sequence[Path | str] = ()
) -> list[str]:
    """Roll back the newest ``count`` applied migrations (all when None); return their ids."""
    rolled: list[str] = []
    with _backend(url, extra_sources) as (backend, migrations, _):
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
