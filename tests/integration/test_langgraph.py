"""LangGraph checkpoint savers on the store: LangGraph's own conformance suite (all 8
capabilities, both savers), the store's promises (a copy is one row, an appended message is
stored alone, a thread is read in one statement at any depth of copies) and a real
``StateGraph`` (messages, interrupt and resume, time travel, isolated threads)."""

from __future__ import annotations

import operator
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypedDict

import pytest
import pytest_asyncio
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

import ikigai_store as ik
from ikigai_store import ops
from ikigai_store.errors import Conflict, InvalidArgument
from ikigai_store.integrations.langgraph import AsyncIkigaiSaver, IkigaiSaver

pytestmark = [pytest.mark.db]


@pytest_asyncio.fixture
async def astore(ikigai_db_url: str) -> AsyncIterator[ik.AsyncStore]:
    """An AsyncStore on this file's database whose writes are rolled back after the test."""
    store = await ik.AsyncStore.connect(ikigai_db_url, pool_size=2)
    try:
        async with store.transaction(force_rollback=True):
            yield store
    finally:
        await store.close()


@pytest.fixture
def store(ikigai_module_store: ik.Store) -> Iterator[ik.Store]:
    """A Store on this file's database whose writes are rolled back after the test."""
    with ikigai_module_store.transaction(force_rollback=True):
        yield ikigai_module_store


@contextmanager
def counting_statements() -> Iterator[list[str]]:
    """The names of the queries run meanwhile, on either face (one call, one round trip)."""
    seen: list[str] = []
    real, areal = ops.execute, ops.aexecute

    def counted(conn: Any, call: ops.Call) -> Any:
        seen.append(call.name)
        return real(conn, call)

    async def acounted(conn: Any, call: ops.Call) -> Any:
        seen.append(call.name)
        return await areal(conn, call)

    ops.execute, ops.aexecute = counted, acounted  # type: ignore[assignment]
    try:
        yield seen
    finally:
        ops.execute, ops.aexecute = real, areal  # type: ignore[assignment]


def _assert_all_passed(report: Any) -> None:
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {c.value for c in ALL_CAPABILITIES}, report.results
    failures = {n: r.failures for n, r in report.results.items() if not r.passed}
    assert not failures, failures


# ---------------------------------------------------------------- LangGraph's conformance suite


@pytest.mark.asyncio
async def test_async_saver_passes_langgraph_conformance(astore: ik.AsyncStore) -> None:
    """AsyncIkigaiSaver: all 8 capabilities of langgraph-checkpoint-conformance detected and
    passing (each suite on a fresh saver in a transaction of its own)."""

    @checkpointer_test(name="AsyncIkigaiSaver")
    async def factory() -> AsyncIterator[AsyncIkigaiSaver]:
        async with astore.transaction(force_rollback=True):
            yield AsyncIkigaiSaver(astore)

    _assert_all_passed(await validate(factory))


@pytest.mark.asyncio
async def test_sync_saver_passes_langgraph_conformance(store: ik.Store) -> None:
    """IkigaiSaver (the sync saver, its async methods in worker threads): all 8 capabilities
    detected and passing."""

    @checkpointer_test(name="IkigaiSaver")
    async def factory() -> AsyncIterator[IkigaiSaver]:
        with store.transaction(force_rollback=True):
            yield IkigaiSaver(store)

    _assert_all_passed(await validate(factory))
