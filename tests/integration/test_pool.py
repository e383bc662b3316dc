"""The store's pool: first come, first served; bounded, explained waits; settable from ik.open."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import pytest
from psycopg.adapt import PyFormat
from psycopg.types.array import ListBinaryDumper

import ikigai_store as ik

pytestmark = pytest.mark.db


def _run_threads(n: int, seconds: float, work: Callable[[], None]) -> tuple[list[int], list[str]]:
    """Run ``work`` in a loop on ``n`` threads for ``seconds``; return calls per thread, errors."""
    calls = [0] * n
    errors: list[str] = []
    stop = time.monotonic() + seconds

    def loop(i: int) -> None:
        while time.monotonic() < stop:
            try:
                work()
            except ik.IkigaiStoreError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            calls[i] += 1

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return calls, errors


@pytest.mark.slow
def test_a_looping_thread_cannot_starve_another(ikigai_db_url: str) -> None:
    """pool_size=1: a thread appending in a loop never keeps a second thread waiting for long."""
    with ik.Store(ikigai_db_url, pool_size=1, timeout=2.0) as store:
        sid = store.create_session()
        hog_stop = threading.Event()

        def hog() -> None:
            while not hog_stop.is_set():
                store.append(sid, "user", "hog")

        hog_thread = threading.Thread(target=hog)
        hog_thread.start()
        try:
            for _ in range(20):
                store.append(sid, "assistant", "polite")  # ConnectError if starved for 2 s
                time.sleep(0.05)
        finally:
            hog_stop.set()
            hog_thread.join()
        assert sum(m.content == "polite" for m in store.messages(sid)) == 20
        store._truncate_all()


@pytest.mark.slow
def test_many_threads_on_a_small_pool_all_progress(ikigai_db_url: str) -> None:
    """16 threads on a pool of 2 for 3 s: no ConnectError, and every thread gets calls through."""
    with ik.Store(ikigai_db_url, pool_size=2, timeout=5.0) as store:
        sid = store.create_session()
        calls, errors = _run_threads(16, 3.0, lambda: store.append(sid, "user", "x") and None)
        assert errors == []
        assert min(calls) > 0, calls
        assert store.count_messages(sid) == sum(calls)
        store._truncate_all()


def test_exhausted_pool_says_so(ikigai_db_url: str) -> None:
    """A checkout that times out raises ConnectError naming the pool size, not a driver error."""
    with ik.Store(ikigai_db_url, pool_size=1, timeout=0.3) as store:
        with store.transaction():  # holds the only connection on this thread
            result: list[BaseException] = []

            def other() -> None:
                try:
                    store.list_sessions()
                except ik.IkigaiStoreError as exc:
                    result.append(exc)

            t = threading.Thread(target=other)
            t.start()
            t.join()
        assert len(result) == 1
        assert isinstance(result[0], ik.ConnectError)
        assert isinstance(result[0], ik.DatabaseUnavailable)
        assert "all 1 in use" in str(result[0])
        store.list_sessions()  # and the pool works again once the connection is back


def test_open_takes_pool_options(ikigai_db_url: str) -> None:
    """ik.open passes pool_size and timeout on; bad values are InvalidArgument."""
    with ik.open(ikigai_db_url, pool_size=2, timeout=0.3) as store:
        held = threading.Barrier(3)
        release = threading.Event()

        def hold() -> None:
            with store.transaction():
                store.list_sessions()
                held.wait()
                release.wait()

        holders = [threading.Thread(target=hold) for _ in range(2)]
        for t in holders:
            t.start()
        held.wait()
        try:
            with pytest.raises(ik.ConnectError, match="all 2 in use"):
                store.list_sessions()
        finally:
            release.set()
            for t in holders:
                t.join()
    for bad in (0, -1.0, float("nan"), float("inf"), "3", True):
        with pytest.raises(ik.InvalidArgument):
            ik.open(ikigai_db_url, timeout=bad)


def test_closed_store_raises_store_closed(ikigai_db_url: str) -> None:
    """A closed store raises StoreClosed, which is not a DatabaseUnavailable (retry can't help)."""
    store = ik.Store(ikigai_db_url)
    store.close()
    with pytest.raises(ik.StoreClosed) as info:
        store.list_sessions()
    assert not isinstance(info.value, ik.DatabaseUnavailable)
    store.close()  # idempotent


def test_store_url_has_no_password(ikigai_db_url: str) -> None:
    """store.url and repr(store) never carry the password, which stays usable inside."""
    import psycopg

    params = psycopg.conninfo.conninfo_to_dict(ikigai_db_url)
    params.setdefault("password", "hunter2-secret")  # the embedded server trusts its socket
    secret = str(params["password"])
    url = psycopg.conninfo.make_conninfo("", **params)
    with ik.Store(url) as store:
        assert isinstance(store.list_sessions(), list)  # the secret was used to connect
        assert secret not in store.url and secret not in repr(store)
        assert "password=***" in store.url


TRICKY = ["NULL", "null", "", "{a,b}", '"q"', "back\\slash", "a,b", " pad ", "é ☃ 🜁", "x" * 5000]


def test_pooled_connections_send_lists_as_binary_arrays(ikigai_db_url: str) -> None:
    """Every pooled connection, sync and async, dumps a list parameter as a binary array (the
    text form searched every element for characters to quote: most of a batch's client time);
    batches of text that the text form would have to quote come back exactly."""
    with ik.open(ikigai_db_url, migrate=False, pool_size=1) as store:
        with store._pool.connection() as conn:
            assert conn.adapters.get_dumper(list, PyFormat.AUTO) is ListBinaryDumper
        who = store.identities.register(f"lists-{time.monotonic_ns()}").name
        topic = f"lists-{time.monotonic_ns()}"
        store.topics.create(topic)
        mails = store.mail.publish_many(who, topic, TRICKY, subject="s")
        assert [m.body for m in store.topics.read(topic)] == TRICKY == [m.body for m in mails]
        sid = store.create_session("lists")
        store.append_many(sid, [("user", body, {"k": body}) for body in TRICKY])
        events = store.replay_session(sid).messages
        assert [(e.content, e.data) for e in events] == [(b, {"k": b}) for b in TRICKY]

    async def in_async() -> None:
        store = await ik.AsyncStore.connect(ikigai_db_url, pool_size=1)
        try:
            async with store._pool.connection() as conn:
                assert conn.adapters.get_dumper(list, PyFormat.AUTO) is ListBinaryDumper
        finally:
            await store.close()

    asyncio.run(in_async())
