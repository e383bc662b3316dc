"""Shared test configuration: Hypothesis profiles, and both faces for the behavioural tests.

"ci" (the default) keeps property tests bounded; "local" runs many more and longer examples. Pick
one with the environment variable HYPOTHESIS_PROFILE (e.g. ``HYPOTHESIS_PROFILE=local pytest``).

``ikigai_store`` (the plugin's rolled-back store) is overridden here to be parametrized over the
two faces: every test that takes it runs once on ``Store`` and once on ``AsyncStore`` (through
``tests.faces.SyncView``). Select one with ``-k sync`` / ``-k async``.

``IKIGAI_OUTBOX`` points at a private file for the whole run (inherited by CLI subprocesses), so
no test queues into, or drains, the user's own offline outbox.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

import ikigai_store as ik
from tests.faces import LoopThread, SyncView

settings.register_profile("ci", max_examples=30, stateful_step_count=30, deadline=None)
settings.register_profile("local", max_examples=300, stateful_step_count=60, deadline=None)
# The Citus subset in CI (.ci/run): the same machines, fewer and shorter runs (the plain suite
# runs the "ci" profile on the same SQL; each step on the cluster is a distributed statement).
settings.register_profile("citus", max_examples=15, stateful_step_count=20, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

os.environ["IKIGAI_OUTBOX"] = str(Path(tempfile.mkdtemp(prefix="ikigai-outbox-")) / "o.sqlite3")
# The warm local services this run starts (one per test database) live in a private runtime dir
# (short: it holds Unix sockets), end a minute after their last use, and are stopped at the end.
os.environ["IKIGAI_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="ikr-", dir="/tmp")
os.environ.setdefault("IKIGAI_SERVICE_IDLE", "60")


@pytest.fixture(scope="session", autouse=True)
def _stop_services() -> Iterator[None]:
    """Stop every service this test process started (none outlives the run)."""
    yield
    from ikigai_store.service import client

    for sock in Path(os.environ["IKIGAI_RUNTIME_DIR"]).glob("*.sock"):
        where = client.Target(None, sock.stem, sock.parent)
        with contextlib.suppress(client.ServiceError):
            client.stop(where)


@pytest.fixture(scope="session")
def loop_thread() -> Iterator[LoopThread]:
    """One event loop for the async face's tests, in a daemon thread."""
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def async_module_store(ikigai_db_url: str, loop_thread: LoopThread) -> Iterator[SyncView]:
    """An AsyncStore on this file's database, seen through the sync API."""
    store = loop_thread.call(ik.AsyncStore.connect(ikigai_db_url, pool_size=2))
    yield SyncView(store, loop_thread)
    loop_thread.call(store.close())


@pytest.fixture(params=["sync", "async"])
def ikigai_store(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A store whose every write in this test is rolled back afterwards, on each face."""
    name = "ikigai_module_store" if request.param == "sync" else "async_module_store"
    store = request.getfixturevalue(name)
    with store.transaction(force_rollback=True):
        yield store


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the Citus subset (tests/citus_subset.py): its files' sync-face tests, less the ones
    it leaves out."""
    from tests.citus_subset import FILES, LEFT_OUT

    root = Path(__file__).parent
    for item in items:
        try:
            rel = Path(item.path).relative_to(root).as_posix()
        except ValueError:
            continue
        name = getattr(item, "originalname", item.name)
        if rel in FILES and "[async" not in item.name and name not in LEFT_OUT:
            item.add_marker(pytest.mark.citus)
