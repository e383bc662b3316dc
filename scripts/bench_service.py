"""Benchmark report: the agent-facing commands with the warm local service, beside their floors.

Usage: ``python scripts/bench_service.py [--database URL] [--data-dir DIR] [-n N]``

Measured in one run (nothing asserted; runs interleaved round-robin so load hits all alike):

1. fresh processes, wall time from spawn to exit, N runs each: the floors ``python -S -c pass``
   and ``python -c 'import json, socket'``; ``hook prompt``, ``hook pre-tool`` and
   ``hook session-start`` with the service warm; the same hooks in-process
   (``IKIGAI_SERVICE=off``, the path before the service) with the database warm. Goals: the
   warm ``prompt`` and ``pre-tool`` p50 <= 60 ms, p95 <= 120 ms;
2. ``ikigai-store mcp`` over stdio, N spawns each: spawn -> ``initialize`` answered and
   -> ``tools/list`` answered, through the proxy and in-process (``IKIGAI_SERVICE=off``). Goals:
   <= 150 ms and <= 250 ms p50;
3. ``send_mail`` through ``ikigai-store mcp`` (service warm) vs the SDK's own floor: a tool that
   returns at once on an SDK server of a few lines (a canned answer with ``send_mail``'s output
   schema and result, which the client validates on both sides alike), both through the SDK's
   ``ClientSession`` over stdio; and ``send_mail`` through the in-process server
   (``IKIGAI_SERVICE=off``), what the service path is compared with. Goal: the p50 difference
   <= 1 ms;
4. the idle service: resident memory, and the database connections it holds;
5. cold first use: the service stopped (and, on the embedded default, the embedded server
   stopped too), then one ``hook session-start``: its wall time, against Claude Code's 60 s
   hook timeout.

Default: the embedded PostgreSQL on a scratch data dir (``--data-dir``, kept between runs);
with ``--database URL``: a scratch database on that server, dropped at the end. The service
runs in a private runtime dir and is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path

import anyio
import psycopg
from benchkit import Scratch, environment, ms, nproc, pct
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ikigai_store.config import admin_url
from ikigai_store.embedded import EMBEDDED_DATABASE, embedded_server_url
from ikigai_store.service import client

SCRIPT = str(Path(sys.executable).with_name("ikigai-store"))
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
#: The SDK's floor: a server whose one tool returns at once a canned answer, with the output
#: schema and structured result of a real ``send_mail`` (``FLOOR_TOOL``, JSON), so that the
#: client checks the same result against the same schema on both sides.
EMPTY_SERVER = textwrap.dedent(
    """
    import json, os
    import anyio, mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    tool, result = json.loads(os.environ["FLOOR_TOOL"])
    listed = types.Tool.model_validate({**tool, "name": "noop"})
    answer = types.CallToolResult.model_validate(result)

    async def list_tools(ctx, params):
        return types.ListToolsResult(tools=[listed])

    async def call_tool(ctx, params):
        return answer

    async def main():
        server = Server("empty", on_list_tools=list_tools, on_call_tool=call_tool)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(main)
    """
)


def run_once(argv: list[str], stdin: bytes, env: dict[str, str]) -> float:
    """Seconds from spawn to exit; a failing or complaining command is an error."""
    started = time.perf_counter()
    done = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{argv} failed ({done.returncode}): {done.stderr.decode().strip()}")
    return elapsed


def mcp_startup(env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Seconds from spawning ``ikigai-store mcp`` to its initialize and tools/list answers."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        [SCRIPT, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=cwd
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INIT).encode() + b"\n")
    proc.stdin.flush()
    json.loads(proc.stdout.readline())
    initialized = time.perf_counter() - started
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    proc.stdin.flush()
    json.loads(proc.stdout.readline())
    listed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    proc.stdout.close()
    return initialized, listed


async def tool_calls(
    env: dict[str, str], cwd: str, calls: int
) -> tuple[list[float], list[float], list[float]]:
    """Per-call seconds of ``send_mail`` through ``ikigai-store mcp`` and of the SDK server's
    canned tool (``EMPTY_SERVER``), alternating blocks of ten."""
    sender = f"bench-sender-{os.getpid()}"  # a fresh inbox each run (the data dir is kept)
    async with AsyncExitStack() as stack:

        async def session(command: str, args: list[str]) -> ClientSession:
            params = StdioServerParameters(command=command, args=args, env=env, cwd=cwd)
            read, write = await stack.enter_async_context(stdio_client(params))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            return session

        ours = await session(SCRIPT, ["mcp", "--as", sender])
        direct_env = {**env, "IKIGAI_SERVICE": "off"}
        sent = await ours.call_tool("send_mail", {"to": [sender], "subject": "warm", "body": "x"})
        (tool,) = [t for t in (await ours.list_tools()).tools if t.name == "send_mail"]
        canned = [
            tool.model_dump(by_alias=True, mode="json", exclude_none=True),
            sent.model_dump(by_alias=True, mode="json", exclude_none=True),
        ]
        env = {**env, "FLOOR_TOOL": json.dumps(canned)}
        floor = await session(sys.executable, ["-c", EMPTY_SERVER])
        await floor.call_tool("noop", {})
        env = direct_env
        direct = await session(SCRIPT, ["mcp", "--as", sender])
        await direct.call_tool("send_mail", {"to": [sender], "subject": "w", "body": "x"})
        mail, empty, in_process = [], [], []
        for block in range(calls // 10):
            for _ in range(10):
                started = time.perf_counter()
                result = await ours.call_tool(
                    "send_mail", {"to": [sender], "subject": f"b{block}", "body": "x"}
                )
                mail.append(time.perf_counter() - started)
                if result.is_error:
                    raise RuntimeError(f"send_mail failed: {result.content}")
            for _ in range(10):
                started = time.perf_counter()
                await floor.call_tool("noop", {})
                empty.append(time.perf_counter() - started)
            for _ in range(10):
                started = time.perf_counter()
                await direct.call_tool(
                    "send_mail", {"to": [sender], "subject": f"d{block}", "body": "x"}
                )
                in_process.append(time.perf_counter() - started)
        return mail, empty, in_process


@contextmanager
def target(args: argparse.Namespace) -> Iterator[tuple[dict[str, str], str, str]]:
    """(the clients' environment, the server to describe, the database URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IKIGAI_", "CLAUDE_"))}
    env.pop("DATABASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="ikigai-bench-service-") as tmp:
        env["XDG_STATE_HOME"] = os.path.join(tmp, "state")
        env["IKIGAI_RUNTIME_DIR"] = runtime = tempfile.mkdtemp(prefix="ibs-", dir="/tmp")
        try:
            if args.database:
                scratch = Scratch(args.database, "service")
                try:
                    url = scratch.create("db")
                    env["IKIGAI_DATABASE_URL"] = url
                    yield env, args.database, url
                finally:
                    stop(env)
                    scratch.drop_all()
                return
            data_dir = Path(args.data_dir).resolve()
            env["IKIGAI_DATA_DIR"] = str(data_dir)
            try:
                yield env, f"embedded ({data_dir})", ""
            finally:
                stop(env)
        finally:
            shutil.rmtree(runtime, ignore_errors=True)


def stop(env: dict[str, str]) -> None:
    client.stop(client.target(None, env))


def embedded_pids(data_dir: Path) -> bool:
    return (data_dir / "postmaster.pid").exists()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--database", metavar="URL", help="a server for a scratch database")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=str(Path(tempfile.gettempdir()) / f"ikigai-bench-svc-{os.getuid()}" / "pgdata"),
        help="the embedded server's data dir (default: %(default)s)",
    )
    parser.add_argument("-n", type=int, default=30, help="runs per command (default: 30)")
    args = parser.parse_args()
    with target(args) as (env, server, url), tempfile.TemporaryDirectory() as project_dir:
        project = os.path.realpath(project_dir)
        # first, with nothing running: this process starts nothing before it
        cold = cold_start(args, env, hook_event(project, "SessionStart", source="startup"))
        if not url:
            url = admin_url(embedded_server_url(Path(env["IKIGAI_DATA_DIR"])), EMBEDDED_DATABASE)
        environment(url)
        print(f"  described   : {server}", flush=True)
        report = measure(args, env, project, url)
    print(report)
    print(f"\n5. cold first use: {cold}")
    return 0


def hook_event(project: str, name: str, **fields: object) -> bytes:
    return json.dumps(
        {"session_id": "bench", "cwd": project, "hook_event_name": name, **fields}
    ).encode()


def measure(args: argparse.Namespace, env: dict[str, str], project: str, url: str) -> str:
    off = {**env, "IKIGAI_SERVICE": "off"}
    events = {
        "prompt": hook_event(project, "UserPromptSubmit", prompt="go"),
        "pre-tool": hook_event(
            project, "PreToolUse", tool_name="Edit", tool_input={"file_path": f"{project}/a.py"}
        ),
        "session-start": hook_event(project, "SessionStart", source="startup"),
    }
    commands: dict[str, tuple[list[str], bytes, dict[str, str]]] = {
        "python -S -c pass": ([sys.executable, "-S", "-c", "pass"], b"", env),
        "python -c 'import json, socket'": (
            [sys.executable, "-c", "import json, socket"],
            b"",
            env,
        ),
    }
    for name, data in events.items():
        commands[f"hook {name} (service warm)"] = ([SCRIPT, "hook", name], data, env)
    for name, data in events.items():
        commands[f"hook {name} (in-process)"] = ([SCRIPT, "hook", name], data, off)
    lines: list[str] = []
    for argv, stdin, e in commands.values():  # warm-up
        run_once(argv, stdin, e)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.n):
        for name, (argv, stdin, e) in commands.items():
            times[name].append(run_once(argv, stdin, e))
    floor = statistics.median(times["python -c 'import json, socket'"])
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    lines.append(f"\n1. fresh processes, {args.n} runs each (nproc {nproc()}, load {load})\n")
    lines.append("| command | p50 | p95 | p50 - floor |")
    lines.append("|---|---|---|---|")
    for name, xs in times.items():
        p50 = statistics.median(xs)
        lines.append(f"| {name} | {ms(p50)} | {ms(pct(xs, 0.95))} | {ms(p50 - floor)} |")
    for name in ("prompt", "pre-tool"):
        xs = times[f"hook {name} (service warm)"]
        p50, p95 = statistics.median(xs), pct(xs, 0.95)
        met = "met" if p50 <= 0.060 and p95 <= 0.120 else "NOT MET"
        lines.append(f"goal hook {name}: p50 <= 60 ms, p95 <= 120 ms: {ms(p50)} / {ms(p95)}, {met}")

    starts: dict[str, list[tuple[float, float]]] = {"proxy (service warm)": [], "in-process": []}
    for _ in range(args.n):
        starts["proxy (service warm)"].append(mcp_startup(env, project))
        starts["in-process"].append(mcp_startup(off, project))
    lines.append(f"\n2. ikigai-store mcp over stdio, {args.n} spawns each\n")
    lines.append("| server | spawn -> initialize p50 | p95 | spawn -> tools/list p50 | p95 |")
    lines.append("|---|---|---|---|---|")
    for name, pairs in starts.items():
        inits, lists = [p[0] for p in pairs], [p[1] for p in pairs]
        lines.append(
            f"| {name} | {ms(statistics.median(inits))} | {ms(pct(inits, 0.95))} "
            f"| {ms(statistics.median(lists))} | {ms(pct(lists, 0.95))} |"
        )
    proxy = starts["proxy (service warm)"]
    init50 = statistics.median(p[0] for p in proxy)
    list50 = statistics.median(p[1] for p in proxy)
    met = "met" if init50 <= 0.150 and list50 <= 0.250 else "NOT MET"
    lines.append(f"goal: initialize <= 150 ms, tools/list <= 250 ms p50: {met}")

    calls = max(10, args.n * 10 // 10 * 10)
    mail, empty, direct = anyio.run(tool_calls, env, project, calls)
    mail50, empty50 = statistics.median(mail), statistics.median(empty)
    gap = mail50 - empty50
    lines.append(f"\n3. tool calls through the SDK's ClientSession over stdio, {calls} each\n")
    lines.append("| call | p50 | p95 |\n|---|---|---|")
    lines.append(f"| send_mail via ikigai-store mcp | {ms(mail50)} | {ms(pct(mail, 0.95))} |")
    lines.append(
        f"| SDK server, canned send_mail answer | {ms(empty50)} | {ms(pct(empty, 0.95))} |"
    )
    lines.append(
        f"| send_mail via ikigai-store mcp in-process (IKIGAI_SERVICE=off) "
        f"| {ms(statistics.median(direct))} | {ms(pct(direct, 0.95))} |"
    )
    met = "met" if gap <= 0.001 else "NOT MET"
    lines.append(f"goal: send_mail p50 <= empty p50 + 1 ms: +{ms(gap)}, {met}")

    where = client.target(None, env)
    time.sleep(1.0)
    state = client.status(where) or {}
    held = connections(url)
    lines.append("\n4. the idle service")
    rss = state.get("rss_bytes")
    lines.append(
        f"resident memory {rss / 2**20:.1f} MiB (peak {state.get('peak_rss_bytes', 0) / 2**20:.1f} "
        f"MiB); database connections held: {held} (pool of up to 4, idle ones kept 1+, one "
        "listener when a session listens)"
        if isinstance(rss, int)
        else "memory unknown"
    )
    return "\n".join(lines)


def connections(url: str) -> int:
    """Connections to the store's database other than this one's."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        ).fetchone()
    return int(row[0]) if row else -1


def cold_start(args: argparse.Namespace, env: dict[str, str], event: bytes) -> str:
    """One session-start with nothing running (service stopped; embedded server stopped)."""
    stop(env)
    if not args.database:
        data_dir = Path(env["IKIGAI_DATA_DIR"])
        deadline = time.monotonic() + 30
        while embedded_pids(data_dir) and time.monotonic() < deadline:
            time.sleep(0.05)  # the last user (the service) stops it
        if embedded_pids(data_dir):
            return "not measured: the embedded server is held up by another process"
    seconds = run_once([SCRIPT, "hook", "session-start"], event, env)
    what = "service and embedded server" if not args.database else "service"
    return f"{ms(seconds)} (starting the {what}); Claude Code's hook timeout is 60 s"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, OSError, client.ServiceError) as exc:
        print(f"\nbench failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
