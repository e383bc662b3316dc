"""What our MCP tools cost in the real agents' model requests, beside our own ``tools/list``.

Usage: ``python scripts/tool_list_size.py [--database URL]`` (default: $IKIGAI_DATABASE_URL, else
the embedded server). Needs the agents of tests/clients/package.json in $IKIGAI_AGENTS_DIR
(``.ci/run`` installs them).

For ``--tools core`` and ``--tools full`` it runs, against the recording fake model of
``tests.fakemodel`` (offline, in a throwaway project and home):
- Claude Code (``claude -p``): its first request lists our tools as deferred tools (names
  only); the model then loads all of them with one ToolSearch call, and the next request
  carries their definitions in ``tools``: those are measured;
- Codex (``codex exec``): its first request carries our tools in a ``namespace`` tool.
Each figure is the JSON text of our tool definitions as the client sent them (characters, and
characters / 4 as a token estimate), beside the same run's ``tools/list`` of the server (with
and without output schemas: clients drop them). Nothing is asserted: this is a report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.agents import CLAUDE_PREFIX, CODEX_NAMESPACE, Project  # noqa: E402
from tests.fakemodel import FakeModel, Text, ToolCall, deferred_tools  # noqa: E402


def listed(database: str, tools: str) -> list[dict[str, Any]]:
    """Our server's own tools/list (through the Python SDK)."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def scenario() -> list[dict[str, Any]]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "ikigai_store", "--database", database, "mcp", "--tools", tools],
            env=dict(os.environ),
        )
        async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
            await session.initialize()
            result = await session.list_tools()
            return [t.model_dump(by_alias=True, exclude_none=True) for t in result.tools]

    return anyio.run(scenario)


def chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def claude(database: str, tools: str, root: Path) -> tuple[int, int]:
    """(characters of the deferred names in the first request, of the loaded definitions)."""
    project = Project(root / f"claude-{tools}", database)
    project.install()
    mcp = project.dir / ".mcp.json"
    data = json.loads(mcp.read_text())
    data["mcpServers"]["ikigai-store"]["args"] += ["--tools", tools]
    mcp.write_text(json.dumps(data))
    with FakeModel([Text("listing")]) as fake:  # the first request lists the deferred tools
        project.claude(fake, "hello")
        first = fake.turns("/v1/messages")[0]
        ours = [n for n in deferred_tools(first) if n.startswith(CLAUDE_PREFIX)]
    with FakeModel() as fake:
        fake.add(ToolCall("ToolSearch", {"query": "select:" + ",".join(ours)}), Text("done"))
        run = project.claude(fake, "hello")
        assert run.returncode == 0, run.stderr
        loaded = fake.turns("/v1/messages")[1]
        definitions = [t for t in loaded.tools if str(t.get("name", "")).startswith(CLAUDE_PREFIX)]
    assert len(definitions) == len(ours), (len(definitions), len(ours))
    return sum(len(n) + 1 for n in ours), chars(definitions)


def codex(database: str, tools: str, root: Path) -> int:
    """Characters of our namespace tool in Codex's first request."""
    project = Project(root / f"codex-{tools}", database)
    with FakeModel() as fake:
        project.codex_provider(fake)
        project.install("--codex")
        config = project.codex_home / "config.toml"
        config.write_text(
            config.read_text().replace('args = ["mcp"]', f'args = ["mcp", "--tools", "{tools}"]')
        )
        fake.add(Text("done"))
        run = project.codex(fake, "hello")
        assert run.returncode == 0, run.stderr
        first = fake.turns("/v1/responses")[0]
        [ours] = [t for t in first.tools if t.get("name") == CODEX_NAMESPACE]
    return chars(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", default=os.environ.get("IKIGAI_DATABASE_URL"))
    args = parser.parse_args()
    database = args.database
    if database is None:
        from ikigai_store.embedded import default_data_dir, embedded_server_url

        database = embedded_server_url(default_data_dir())
    print("characters of our tool definitions (tokens ~ characters / 4)")
    print(
        f"{'set':6} {'tools/list':>11} {'no output':>10} {'Claude deferred':>16} "
        f"{'Claude loaded':>14} {'Codex':>8} {'Claude/ours':>12} {'Codex/ours':>11}"
    )
    with tempfile.TemporaryDirectory(prefix="iktools-") as tmp:
        root = Path(tmp)
        for tools in ("core", "full"):
            ours = listed(database, tools)
            bare = [{k: v for k, v in t.items() if k != "outputSchema"} for t in ours]
            deferred, loaded = claude(database, tools, root)
            namespace = codex(database, tools, root)
            print(
                f"{tools:6} {chars(ours):>11} {chars(bare):>10} {deferred:>16} {loaded:>14} "
                f"{namespace:>8} {loaded / chars(bare):>12.2f} {namespace / chars(bare):>11.2f}"
            )


if __name__ == "__main__":
    main()
