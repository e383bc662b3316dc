"""Benchmark report: how soon a subscribed MCP client hears that a resource changed.

Usage: ``python scripts/bench_resources.py [--database URL] [--samples N]``

One scratch database, one ``ikigai-store mcp --http --as Ann`` server process, and in this
process: an ``AsyncStore`` that sends mail to Ann, and three receivers of every send:

1. baseline: a bare psycopg connection that ran ``LISTEN ikigai_mail`` and reads its
   notifications (the floor any LISTEN/NOTIFY design pays);
2. an SDK ``ClientSession`` (``initialize()``, protocol 2025-11-25) subscribed to
   ``ikigai://inbox/Ann`` with ``resources/subscribe``: the ``notifications/resources/updated``
   it receives over the streamable HTTP GET stream;
3. an SDK ``ClientSession`` (``discover()``, protocol 2026-07-28) with a
   ``subscriptions/listen`` stream on the same URI: the ``ResourceUpdated`` events it yields.

Each sample is one ``mail.send`` to Ann; each receiver's latency is the time from the send
returning (its commit is done) to its arrival, on ``time.monotonic`` (all in one process, one
event loop); the three hear the same commit, so they are compared sample by sample. An arrival
may precede the send's return (the server and the sender are told of the commit apart):
those latencies are negative. Reported: p50 / p95 of each, the ratios and differences of the
p50s to the baseline's, and how many notifications never came (a correctness check). Goal:
p95 <= 100 ms through the MCP server.

Invariants: nothing is asserted on timings; the sends are spaced by 5-15 ms (random) so one
notification is in flight at a time; the scratch database ``ikigai_bench_<pid>_resources_main``
is dropped and the server stopped at the end, even on failure.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psycopg
from benchkit import Row, Scratch, arguments, environment, ms, pct, run, server_url, summary
from mcp import ClientSession
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import listen
from mcp.shared.exceptions import MCPDeprecationWarning

import ikigai_store as ik

INBOX = "ikigai://inbox/Ann"
SIDES = ("bare LISTEN", "resources/subscribe", "subscriptions/listen")
COMMAND = (sys.executable, "-m", "ikigai_store")
#: Seconds to wait for a notification before counting it missed.
TIMEOUT = 5.0


class Server:
    """``ikigai-store mcp --http --as Ann`` on a free port, in a subprocess."""

    def __init__(self, url: str) -> None:
        self.proc = subprocess.Popen(
            [*COMMAND, "--database", url, "mcp", "--http", "--port", "0", "--as", "Ann"],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        found = re.search(r"serving (http://\S+/mcp)", line)
        if found is None:
            self.stop()
            raise RuntimeError(f"the MCP server did not start: {line.strip()}")
        self.url = found.group(1)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


@asynccontextmanager
async def client(
    url: str, *, modern: bool, handler: MessageHandlerFnT | None
) -> AsyncIterator[ClientSession]:
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write, *_),
        ClientSession(read, write, message_handler=handler) as session,
    ):
        await (session.discover() if modern else session.initialize())
        yield session


class Arrivals:
    """When each side last heard of a change (``time.monotonic``), and a wake-up."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.changed = anyio.Event()

    def heard(self, side: str) -> None:
        self.at.setdefault(side, time.monotonic())
        self.changed.set()

    async def all(self, deadline: float) -> None:
        with anyio.move_on_after(max(0.0, deadline - time.monotonic())):
            while len(self.at) < len(SIDES):
                self.changed = anyio.Event()
                await self.changed.wait()


async def measure(url: str, samples: int) -> list[Row]:
    latencies: dict[str, list[float]] = {side: [] for side in SIDES}
    missed = dict.fromkeys(SIDES, 0)
    arrivals = Arrivals()
    server = Server(url)
    try:
        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(ik.open_async(url))
            await store.identities.register("Bob")
            await store.identities.register("Ann")

            async def on_message(message: Any) -> None:
                if isinstance(message, types.ResourceUpdatedNotification):
                    arrivals.heard("resources/subscribe")

            classic = await stack.enter_async_context(
                client(server.url, modern=False, handler=on_message)
            )
            with warnings.catch_warnings():  # deprecated at 2026-07-28; what 2025-11-25 speaks
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await classic.subscribe_resource(INBOX)
            modern = await stack.enter_async_context(client(server.url, modern=True, handler=None))
            stream = await stack.enter_async_context(listen(modern, resource_subscriptions=[INBOX]))
            bare = await stack.enter_async_context(
                await psycopg.AsyncConnection.connect(url, autocommit=True)
            )
            await bare.execute("LISTEN ikigai_mail")

            async def read_stream() -> None:
                async for _ in stream:
                    arrivals.heard("subscriptions/listen")

            async def read_bare() -> None:
                async for _ in bare.notifies():
                    arrivals.heard("bare LISTEN")

            async with anyio.create_task_group() as group:
                group.start_soon(read_stream)
                group.start_soon(read_bare)
                warmup = 20
                for i in range(warmup + samples):
                    await anyio.sleep(random.uniform(0.005, 0.015))
                    arrivals.at.clear()
                    await store.mail.send("Bob", "Ann", "bench", "a short mail")
                    sent = time.monotonic()
                    await arrivals.all(sent + TIMEOUT)
                    if i < warmup:
                        continue
                    for side in SIDES:
                        if side in arrivals.at:
                            latencies[side].append(arrivals.at[side] - sent)
                        else:
                            missed[side] += 1
                group.cancel_scope.cancel()
    finally:
        server.stop()

    rows: list[Row] = []
    base = latencies["bare LISTEN"]
    for side in SIDES:
        xs = latencies[side]
        if not xs:
            rows.append(Row(f"{side}: p50 / p95", "no notification arrived", "", False))
            continue
        p50, p95 = pct(xs, 0.5), pct(xs, 0.95)
        mcp = side != "bare LISTEN"
        rows.append(
            Row(
                f"{side}{' via mcp --http' if mcp else ' (baseline)'}: p50 / p95 ({len(xs)})",
                f"{ms(p50)} / {ms(p95)}",
                "p95 <= 100 ms" if mcp else "",
                p95 <= 0.1 if mcp else None,
            )
        )
        if mcp and base:
            b50, b95 = pct(base, 0.5), pct(base, 0.95)
            rows.append(
                Row(
                    f"{side} / bare LISTEN: p50, p95",
                    f"{p50 / b50:.1f}x, {p95 / b95:.1f}x (+{ms(p50 - b50)}, +{ms(p95 - b95)})",
                    "",
                    None,
                )
            )
    rows.append(
        Row(
            "notifications missed (bare, subscribe, listen)",
            ", ".join(str(missed[side]) for side in SIDES),
            "0",
            not any(missed.values()),
            check=True,
        )
    )
    return rows


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--samples", type=int, default=200, help="sends measured (default 200)")
    options = parser.parse_args()
    started = time.perf_counter()
    server = server_url(options.database)
    environment(server)
    scratch = Scratch(server, "resources")
    try:
        url = scratch.create("main")
        os.environ.pop("CLAUDE_PROJECT_DIR", None)
        rows = anyio.run(measure, url, options.samples)
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
