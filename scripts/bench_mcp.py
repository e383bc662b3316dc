"""Benchmark report: a tool call through ``ikigai-store mcp`` vs the same operation in-process.

Usage: ``python scripts/bench_mcp.py [--database URL] [--calls N]``

Measured in one run, on one scratch database:

1. ``send_mail`` through MCP over stdio (the SDK's ``ClientSession`` against a spawned
   ``ikigai-store mcp``) vs ``await AsyncStore.mail.send(...)`` in this process, the same
   mail, one call at a time: p50 / p95 of each and the MCP layer's cost (difference of the
   medians; goal <= 1 ms), and the ratio to mcp_agent_mail's published 118.6 ms per send;
2. our layer alone: ``Face.call("send_mail", ...)`` in this process (argument validation,
   identity, serialization, no transport), against the same in-process baseline;
3. the SDK alone: a ``tools/call`` of a tool that returns at once (``list_topics`` on an
   empty database) through the same client, the floor any MCP tool pays here;
4. the size of ``tools/list`` (default ``core``, and ``full``), in tokens counted as
   characters of its JSON / 4 (goal: default <= 8,000).

Invariants: nothing is asserted on timings; blocks of MCP calls and in-process calls
alternate (ABAB), so load from other processes hits both; the scratch database
``ikigai_bench_<pid>_mcp_main`` is dropped at the end, even on failure.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import AsyncExitStack

import anyio
from benchkit import Row, Scratch, arguments, environment, ms, pct, run, server_url, summary
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

import ikigai_store as ik
from ikigai_store.mcp.server import Face
from ikigai_store.mcp.tools import TOOLS

AGENT_MAIL_SEND_MS = 118.6  # mcp_agent_mail's published time per send


async def session(stack: AsyncExitStack, url: str, *args: str) -> ClientSession:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "ikigai_store", "--database", url, "mcp", *args],
        env=dict(os.environ),
    )
    read, write = await stack.enter_async_context(stdio_client(params))
    client = await stack.enter_async_context(ClientSession(read, write))
    await client.initialize()
    return client


async def measure(url: str, calls: int) -> list[Row]:
    rows: list[Row] = []
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(ik.open_async(url))
        await store.identities.register("Bob")
        mcp = await session(stack, url, "--as", "Ann")
        tokens = {}
        for tools in ("core", "full"):
            listing = await session(stack, url, "--as", "Ann", "--tools", tools)
            listed = (await listing.list_tools()).tools
            text = json.dumps([t.model_dump(by_alias=True, exclude_none=True) for t in listed])
            tokens[tools] = (len(listed), len(text) / 4)
        await mcp.call_tool("whoami", {})
        arguments = {"to": "Bob", "subject": "bench", "body": "a short mail"}

        async def through_mcp() -> float:
            started = time.perf_counter()
            result = await mcp.call_tool("send_mail", arguments)
            elapsed = time.perf_counter() - started
            assert not result.is_error, result.content
            return elapsed

        async def in_process() -> float:
            started = time.perf_counter()
            await store.mail.send("Ann", "Bob", "bench", "a short mail")
            return time.perf_counter() - started

        face = Face(store, TOOLS, name="Ann")

        async def face_only() -> float:
            started = time.perf_counter()
            result = await face.call("send_mail", arguments)
            elapsed = time.perf_counter() - started
            assert not result.is_error, result.content
            return elapsed

        async def floor() -> float:
            started = time.perf_counter()
            await mcp.call_tool("list_topics", {})
            return time.perf_counter() - started

        sides = {"mcp": through_mcp, "store": in_process, "face": face_only, "floor": floor}
        samples: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(20):  # warm up every side alike
            for fn in sides.values():
                await fn()
        block = 50
        for _ in range(max(1, calls // block)):
            for name, fn in sides.items():
                for _ in range(block):
                    samples[name].append(await fn())

    mcp_p50, store_p50, floor_p50 = (pct(samples[k], 0.5) for k in ("mcp", "store", "floor"))
    rows.append(
        Row(
            "send_mail via MCP stdio: p50 / p95",
            f"{ms(mcp_p50)} / {ms(pct(samples['mcp'], 0.95))}",
            "",
            None,
        )
    )
    rows.append(
        Row(
            "store.mail.send in-process: p50 / p95",
            f"{ms(store_p50)} / {ms(pct(samples['store'], 0.95))}",
            "",
            None,
        )
    )
    added = mcp_p50 - store_p50
    rows.append(Row("MCP layer's cost (p50 difference)", ms(added), "<= 1 ms", added <= 0.001))
    ours = pct(samples["face"], 0.5) - store_p50
    rows.append(Row("of which ours (Face.call in-process - store)", ms(ours), "", None))
    rows.append(
        Row(
            "empty tool call via MCP stdio (SDK floor): p50",
            ms(floor_p50),
            "",
            None,
        )
    )
    rows.append(
        Row(
            "mcp_agent_mail's send (118.6 ms) / ours via MCP",
            f"{AGENT_MAIL_SEND_MS / 1000 / mcp_p50:.0f}x faster",
            "",
            None,
        )
    )
    for tools, (count, cost) in tokens.items():
        goal = "<= 8,000" if tools == "core" else ""
        met = cost <= 8000 if tools == "core" else None
        rows.append(
            Row(f"tools/list --tools {tools} ({count} tools)", f"{cost:,.0f} tokens", goal, met)
        )
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--calls", type=int, default=1000, help="calls per side (default 1000)")
    options = parser.parse_args()
    started = time.perf_counter()
    server = server_url(options.database)
    environment(server)
    scratch = Scratch(server, "mcp")
    try:
        url = scratch.create("main")
        rows = anyio.run(measure, url, options.calls)
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
