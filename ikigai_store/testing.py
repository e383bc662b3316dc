"""pytest plugin: real-PostgreSQL fixtures for code built on ikigai_store (and for our own tests).

Loaded automatically (entry point ``pytest11``) once ikigai_store is installed. The seed's
patterns, in Python:

- ``ikigai_server_url`` (session): a server to create test databases on. From
  ``IKIGAI_TEST_DATABASE_URL``, else ``DATABASE_URL``, else libpq's environment when ``PGHOST`` is
  set, else the embedded server, started once per test run in ``IKIGAI_TEST_DATA_DIR`` (default:
  ``<tmp>/ikigai-store-test-<uid>/pgdata``). ``SKIP_LIVE_DB_TESTS=1`` skips every test that needs it
  and every test marked ``db``.
- ``ikigai_db_url`` (module): a database named ``ikigai_test_<test file basename>``, dropped and
  created afresh, migrated once, dropped at the end of the file.
- ``ikigai_store`` (function): a ``Store`` on that database whose work runs inside a transaction
  that is rolled back after the test — tests see an empty schema and leave nothing behind.
- ``ikigai_async_store`` (function, needs pytest-asyncio): the same for ``AsyncStore``, e.g.
  ``@pytest.mark.asyncio async def test_x(ikigai_async_store): await ikigai_async_store...``.
- ``ikigai_empty_db_url`` (function): an empty, unmigrated database (for migration tests).
- ``truncate_all(store)``: empties every table, for tests that must commit.
Invariant: no fixture touches a database it did not create.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from . import citus, migrate
from .aio import AsyncStore
from .config import admin_url, resolve_url
from .embedded import embedded_server_url, testing_data_dir
from .pool import create_database, drop_database
from .store import Store

__all__ = ["drop_test_database", "fresh_database", "test_database_name", "truncate_all"]


def _skip_requested() -> bool:
    return os.environ.get("SKIP_LIVE_DB_TESTS") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "db: needs a real PostgreSQL (SKIP_LIVE_DB_TESTS=1 skips)")
    config.addinivalue_line("markers", "slow: long-running test")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _skip_requested():
        return
    skip = pytest.mark.skip(reason="SKIP_LIVE_DB_TESTS=1")
    for item in items:
        if "db" in item.keywords:
            item.add_marker(skip)


def test_database_name(path: str | Path, suffix: str = "") -> str:
    """``tests/unit/db/session_test.py`` -> ``ikigai_test_session_test`` (<= 63 chars).

    Under pytest-xdist the worker id is appended so parallel workers never share a database;
    so is ``IKIGAI_TEST_DB_TAG`` when set, so that two runs on one server (two checkouts
    testing against one Citus cluster) never share one either.
    """
    stem = re.sub(r"[^a-z0-9_]", "_", Path(path).stem.lower())
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    tag = re.sub(r"[^a-z0-9_]", "_", os.environ.get("IKIGAI_TEST_DB_TAG", "").lower())
    name = "_".join(p for p in ("ikigai_test", stem, suffix, tag, worker) if p)
    if len(name) > 63:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        name = f"{name[:54]}_{digest}"
    return name


test_database_name.__test__ = False  # type: ignore[attr-defined]  # not a test for pytest


def fresh_database(server_url: str, name: str) -> str:
    """Drop ``name`` if it exists, create it empty and return its URL.

    On a Citus coordinator (the server's database has the citus extension) the database is made
    a Citus database too: created on every worker, citus created in it, the nodes registered
    (``ikigai_store.citus.prepare_database``), so that migrating it distributes the tables.
    """
    drop_test_database(server_url, name)
    create_database(server_url, name)
    citus.prepare_database(server_url, name)
    return admin_url(server_url, name)


def drop_test_database(server_url: str, name: str) -> None:
    """Drop ``name`` from the server (and from a Citus cluster's workers)."""
    drop_database(server_url, name)
    citus.drop_database(server_url, name)


def truncate_all(store: Store) -> None:
    """Empty every application table and restart the ids (seed ``ik_test_db_truncate_all``)."""
    store._truncate_all()


@pytest.fixture(scope="session")
def ikigai_server_url() -> str:
    """A PostgreSQL server the test databases are created on (see the module docstring)."""
    if _skip_requested():
        pytest.skip("SKIP_LIVE_DB_TESTS=1")
    for name in ("IKIGAI_TEST_DATABASE_URL", "DATABASE_URL"):
        value = os.environ.get(name)
        if value:
            return resolve_url(value) or value  # yoyo's postgresql+psycopg:// spelling too
    if os.environ.get("PGHOST"):
        return "postgresql:///" + os.environ.get("PGDATABASE", "postgres")
    return embedded_server_url(testing_data_dir())


@pytest.fixture(scope="module")
def ikigai_db_url(request: pytest.FixtureRequest, ikigai_server_url: str) -> Iterator[str]:
    """URL of this test file's migrated database, ``ikigai_test_<file basename>``."""
    name = test_database_name(request.path)
    url = fresh_database(ikigai_server_url, name)
    migrate.apply(url)
    yield url
    drop_test_database(ikigai_server_url, name)


@pytest.fixture(scope="module")
def ikigai_module_store(ikigai_db_url: str) -> Iterator[Store]:
    """A store on this file's database, shared by its tests (prefer ``ikigai_store``)."""
    store = Store(ikigai_db_url, pool_size=2)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def ikigai_store(ikigai_module_store: Store) -> Iterator[Store]:
    """A store whose every write in this test is rolled back afterwards."""
    with ikigai_module_store.transaction(force_rollback=True):
        yield ikigai_module_store


if importlib.util.find_spec("pytest_asyncio") is not None:  # the async fixture needs it
    import pytest_asyncio

    @pytest_asyncio.fixture
    async def ikigai_async_store(ikigai_db_url: str) -> AsyncIterator[AsyncStore]:
        """An AsyncStore whose every write in this test is rolled back afterwards."""
        store = await AsyncStore.connect(ikigai_db_url, pool_size=2)
        try:
            async with store.transaction(force_rollback=True):
                yield store
        finally:
            await store.close()


@pytest.fixture
def ikigai_empty_db_url(request: pytest.FixtureRequest, ikigai_server_url: str) -> Iterator[str]:
    """URL of a fresh database with no schema at all, dropped after the test."""
    name = test_database_name(request.path, "empty")
    url = fresh_database(ikigai_server_url, name)
    yield url
    drop_test_database(ikigai_server_url, name)
