"""Benchmark report: LangGraph checkpoint savers (issue 35), ours against LangGraph's own
AsyncPostgresSaver on the same server, in the same run.

Usage: ``python scripts/bench_langgraph.py [--database URL] [--quick]`` (with no URL:
``IKIGAI_DATABASE_URL``, ``DATABASE_URL``, else the embedded server). Needs
``langgraph-checkpoint-postgres`` (the ``dev`` extra) besides the ``langgraph`` extra.

Three measurements, each saver on a scratch database of its own on one server:

1. A step at 10, 100 and 1,000 messages: ``aput`` of a checkpoint whose ``messages`` channel
   (LangChain ``HumanMessage`` objects, about 60 characters each) gained one message, then
   ``aget_tuple`` of the thread's newest checkpoint, as a graph's loop does. Each thread
   starts from one checkpoint holding N messages and grows by one message per timed step.
   Goal: ours >= 10x cheaper than AsyncPostgresSaver at 1,000 messages, and ours flat in
   history length (1,000 vs 10 messages <= 1.5x), p50.
2. A cold read: ``aget_tuple`` by a saver that has never seen the thread, at 1,000 messages
   put one message per step (ours rebuilds the list from its chain of appends, in the same
   round trip; AsyncPostgresSaver reads one blob), p50 ratio (info).
3. ``acopy_thread`` of a 1,000-step thread (one message added per step): ours (one row) vs
   copying the same thread's rows of AsyncPostgresSaver's tables in one transaction (it has
   no copy_thread), p50 ratio (info). Both copies are checked: they hold the 1,000 steps.

Nothing is asserted on timings: the exit status is non-zero only on errors or a failed
correctness check. The scratch databases are dropped at the end.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from contextlib import AsyncExitStack
from typing import Any

import psycopg
from benchkit import Row, Scratch, arguments, environment, interleaved, run, server_url, step
from benchkit import summary as report
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

import ikigai_store as ik
from ikigai_store.integrations.langgraph import AsyncIkigaiSaver

SIZES = (10, 100, 1_000)

COPY_ROWS = (
    """
INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type,
                         checkpoint, metadata)
SELECT %(dst)s, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata
FROM checkpoints WHERE thread_id = %(src)s
""",
    """
INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, type, blob)
SELECT %(dst)s, checkpoint_ns, channel, version, type, blob
FROM checkpoint_blobs WHERE thread_id = %(src)s
""",
    """
INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,
                               type, blob, task_path)
SELECT %(dst)s, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, task_path
FROM checkpoint_writes WHERE thread_id = %(src)s
""",
)


def message(i: int) -> HumanMessage:
    return HumanMessage(f"message {i}: the quick brown fox jumps over the lazy dog", id=f"m{i}")


class Thread:
    """One thread driven the way a graph's loop drives a saver: each step puts a checkpoint
    whose messages gained one message (a new list, the version bumped), then reads it back."""

    def __init__(self, saver: BaseCheckpointSaver[Any], thread_id: str, messages: int) -> None:
        self.saver = saver
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.messages = [message(i) for i in range(messages)]
        self.version: Any = None

    async def put(self) -> None:
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint: Any = {
            "v": 4,
            "id": str(uuid6(clock_seq=-1)),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": self.messages},
            "channel_versions": {"messages": self.version},
            "versions_seen": {"agent": {"messages": self.version}},
            "updated_channels": ["messages"],
        }
        self.config = await self.saver.aput(
            self.config,
            checkpoint,
            {"source": "loop", "step": len(self.messages)},
            {"messages": self.version},
        )

    async def step(self) -> None:
        self.messages = [*self.messages, message(len(self.messages))]
        await self.put()
        tup = await self.saver.aget_tuple(
            {
                "configurable": {
                    "thread_id": self.config["configurable"]["thread_id"],
                    "checkpoint_ns": "",
                }
            }
        )
        assert tup is not None


def bench(ours_url: str, theirs_url: str, quick: bool) -> list[Row]:
    rows: list[Row] = []
    loop = asyncio.new_event_loop()
    stack = AsyncExitStack()

    async def open_savers() -> tuple[AsyncIkigaiSaver, AsyncPostgresSaver, ik.AsyncStore]:
        store = await stack.enter_async_context(ik.open_async(ours_url, pool_size=2))
        theirs = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(theirs_url))
        await theirs.setup()
        return AsyncIkigaiSaver(store), theirs, store

    ours, theirs, store = loop.run_until_complete(open_savers())
    try:
        rounds, per_round = (4, 8) if quick else (6, 12)
        print("\n[1] a step (aput + aget_tuple) at 10, 100 and 1,000 messages")
        sides: dict[str, Any] = {}
        threads: dict[str, Thread] = {}
        with step("seed one thread per size and saver"):
            for n in SIZES:
                for name, saver in (("ours", ours), ("theirs", theirs)):
                    t = Thread(saver, f"step-{name}-{n}", n)
                    loop.run_until_complete(t.put())
                    threads[f"{name} {n}"] = t
                    sides[f"{name} {n}"] = lambda t=t: loop.run_until_complete(t.step())
        t = interleaved(sides, rounds=rounds, per_round=per_round, warmup=3)
        for side in t.calls:
            print(f"  {side:12}: {t.line(side)}")
        for n in SIZES:
            ratio = t.ratio(f"theirs {n}", f"ours {n}")
            rows.append(
                Row(
                    f"step at {n:,} messages: AsyncPostgresSaver / ours, p50",
                    f"{t.p50(f'theirs {n}') * 1e3:.2f} ms / {t.p50(f'ours {n}') * 1e3:.2f} ms"
                    f" = {ratio:.1f}x",
                    "≥ 10x" if n == 1_000 else "info",
                    ratio >= 10 if n == 1_000 else None,
                )
            )
        flat = t.ratio("ours 1000", "ours 10")
        rows.append(
            Row(
                "ours: step at 1,000 vs 10 messages, p50",
                f"{t.p50('ours 1000') * 1e3:.2f} ms vs {t.p50('ours 10') * 1e3:.2f} ms"
                f" = {flat:.2f}x",
                "≤ 1.5x",
                flat <= 1.5,
            )
        )
        theirs_flat = t.ratio("theirs 1000", "theirs 10")
        rows.append(
            Row(
                "AsyncPostgresSaver: step at 1,000 vs 10 messages, p50",
                f"{theirs_flat:.2f}x",
                "info",
                None,
            )
        )
        stored = loop.run_until_complete(
            AsyncIkigaiSaver(store).aget_tuple(threads["ours 1000"].config)
        )
        ok = stored is not None and stored.checkpoint["channel_values"]["messages"] == (
            threads["ours 1000"].messages
        )
        rows.append(
            Row("ours: a fresh saver reads the grown thread back", str(ok), "True", ok, True)
        )

        print("\n[2, 3] a 1,000-step thread: a cold read, and acopy_thread")
        built: dict[str, Thread] = {}
        with step("put 1,000 steps (one message each) on each saver"):
            for name, saver in (("ours", ours), ("theirs", theirs)):
                th = Thread(saver, f"long-{name}", 0)
                for _ in range(1_000):
                    th.messages = [*th.messages, message(len(th.messages))]
                    loop.run_until_complete(th.put())
                built[name] = th

        async def cold(url_saver: str) -> None:
            if url_saver == "ours":
                tup = await AsyncIkigaiSaver(store).aget_tuple(built["ours"].config)
            else:
                tup = await theirs.aget_tuple(built["theirs"].config)
            assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == 1_000

        c = interleaved(
            {
                "ours cold": lambda: loop.run_until_complete(cold("ours")),
                "theirs": lambda: loop.run_until_complete(cold("theirs")),
            },
            rounds=rounds,
            per_round=per_round // 2,
            warmup=2,
        )
        for side in c.calls:
            print(f"  {side:12}: {c.line(side)}")
        ratio = c.ratio("ours cold", "theirs")
        rows.append(
            Row(
                "cold aget_tuple at 1,000 steps: ours (fresh saver, 1,000 appends) / theirs, p50",
                f"{c.p50('ours cold') * 1e3:.2f} ms / {c.p50('theirs') * 1e3:.2f} ms"
                f" = {ratio:.2f}x",
                "info",
                None,
            )
        )

        raw = psycopg.connect(theirs_url, autocommit=True)
        copies: list[str] = []

        def copy_ours() -> None:
            target = f"copy-{uuid.uuid4()}"
            loop.run_until_complete(ours.acopy_thread("long-ours", target))
            copies.append(target)

        def copy_rows() -> None:
            params = {"src": "long-theirs", "dst": f"copy-{uuid.uuid4()}"}
            with raw.transaction():
                for statement in COPY_ROWS:
                    raw.execute(statement, params)

        k = interleaved({"ours": copy_ours, "row copy": copy_rows}, rounds=3, per_round=2, warmup=1)
        for side in k.calls:
            print(f"  {side:12}: {k.line(side)}")
        ratio = k.ratio("row copy", "ours")
        rows.append(
            Row(
                "acopy_thread of a 1,000-step thread: row copy (theirs) / ours, p50",
                f"{k.p50('row copy') * 1e3:.1f} ms / {k.p50('ours') * 1e3:.2f} ms = {ratio:,.0f}x",
                "info",
                None,
            )
        )
        size = raw.execute(
            "SELECT pg_size_pretty(sum(length(blob))) FROM checkpoint_blobs "
            "WHERE thread_id = 'long-theirs'"
        ).fetchone()
        print(f"  (the row copy moves {size[0] if size else '?'} of blobs each time)")
        copied = loop.run_until_complete(
            AsyncIkigaiSaver(store).aget_tuple(
                {"configurable": {"thread_id": copies[-1], "checkpoint_ns": ""}}
            )
        )
        ok = copied is not None and copied.checkpoint["channel_values"]["messages"] == (
            built["ours"].messages
        )
        theirs_copy = raw.execute(
            "SELECT count(*) FROM checkpoints WHERE thread_id LIKE 'copy-%%'"
        ).fetchone()
        ok = ok and theirs_copy is not None and theirs_copy[0] % 1_000 == 0
        rows.append(Row("both copies hold the 1,000 steps", str(ok), "True", ok, True))
        raw.close()
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    args = parser.parse_args()
    t0 = time.perf_counter()
    server = server_url(args.database)
    environment(server)
    scratch = Scratch(server, "langgraph")
    try:
        ours = scratch.create("ours")
        theirs = scratch.create("theirs")
        rows = bench(ours, theirs, args.quick)
    finally:
        scratch.drop_all()
    return report(rows, t0)


if __name__ == "__main__":
    run(main)
