"""The pytest plugin's own guarantees: naming, isolation, truncate_all."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store.testing import test_database_name, truncate_all

pytestmark = pytest.mark.db


def test_database_name_from_file() -> None:
    """Seed naming: tests/unit/db/session_test.py -> ikigai_test_session_test, <= 63 chars."""
    assert test_database_name("tests/unit/db/session_test.py").startswith(
        "ikigai_test_session_test"
    )
    assert len(test_database_name("x" * 200 + ".py")) <= 63


def test_store_fixture_sees_migrated_empty_schema(ikigai_store: ik.Store) -> None:
    """The per-test store starts on a migrated database with no sessions."""
    assert ikigai_store.schema_version() >= 2
    assert ikigai_store.list_sessions() == []
    ikigai_store.create_session("rolled back after this test")


def test_previous_test_was_rolled_back(ikigai_store: ik.Store) -> None:
    """Writes of the previous test are gone (transaction rollback isolation)."""
    assert ikigai_store.list_sessions() == []


@pytest.fixture
def committing_store(ikigai_db_url: str) -> Iterator[ik.Store]:
    with ik.Store(ikigai_db_url) as store:
        yield store
        truncate_all(store)


def test_truncate_all_empties_and_restarts_ids(committing_store: ik.Store) -> None:
    """truncate_all deletes committed rows and restarts the id sequences."""
    sid = committing_store.create_session()
    committing_store.append(sid, "user", "x")
    truncate_all(committing_store)
    assert committing_store.list_sessions() == []
    assert committing_store.create_session() == 1


def test_empty_database_fixture(ikigai_empty_db_url: str) -> None:
    """ikigai_empty_db_url is a database without any schema."""
    with ik.open(ikigai_empty_db_url, migrate=False) as store:
        assert store.schema_version() == 0


def test_skip_live_db_tests(tmp_path: Path) -> None:
    """SKIP_LIVE_DB_TESTS=1 skips tests using the database fixtures or the db marker."""
    (tmp_path / "test_user.py").write_text(
        "import pytest\n"
        "def test_uses_store(ikigai_store):\n    raise AssertionError('ran')\n"
        "@pytest.mark.db\ndef test_marked():\n    raise AssertionError('ran')\n"
        "def test_plain():\n    pass\n"
    )
    env = {**os.environ, "SKIP_LIVE_DB_TESTS": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout


def test_pghost_is_honoured_without_host_in_url(
    ikigai_db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL without a host connects through PGHOST (seed 001)."""
    params = psycopg.conninfo.conninfo_to_dict(ikigai_db_url)
    if "host" not in params:
        pytest.skip("the test server URL has no explicit host to move into PGHOST")
    monkeypatch.setenv("PGHOST", str(params["host"]))
    if "port" in params:
        monkeypatch.setenv("PGPORT", str(params["port"]))
    user = f"{params['user']}@" if "user" in params else ""
    password = params.get("password")
    if password:
        monkeypatch.setenv("PGPASSWORD", str(password))
    with ik.open(f"postgresql://{user}/{params['dbname']}", migrate=False) as store:
        assert store.schema_version() >= 2


def test_async_store_fixture(tmp_path: Path, ikigai_server_url: str) -> None:
    """With pytest-asyncio, ikigai_async_store is a rolled-back AsyncStore on a migrated db."""
    pytest.importorskip("pytest_asyncio")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nasyncio_default_fixture_loop_scope = function\n"
    )
    (tmp_path / "test_async_user.py").write_text(
        "import pytest\n"
        "@pytest.mark.asyncio\n"
        "async def test_one(ikigai_async_store):\n"
        "    assert await ikigai_async_store.list_sessions() == []\n"
        "    await ikigai_async_store.create_session('rolled back')\n"
        "@pytest.mark.asyncio\n"
        "async def test_two(ikigai_async_store):\n"
        "    assert await ikigai_async_store.list_sessions() == []\n"
    )
    env = {**os.environ, "IKIGAI_TEST_DATABASE_URL": ikigai_server_url}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", "."],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout
