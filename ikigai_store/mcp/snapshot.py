"""Record ``catalog.json``: what the SDK's server, run in this process over a pair of in-memory
lines, answers to ``initialize`` and ``tools/list`` (every tool, plain and ``--operator``).

``python -m ikigai_store.mcp.snapshot`` writes the file; ``build()`` is what a test compares it
with. Nothing here touches a database: the ``Face`` only lists.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from typing import Any

import anyio
from mcp.server.stdio import stdio_server
from mcp_types import version

from .catalog import PATH, render
from .server import INSTRUCTIONS, Face
from .tools import TOOLS

__all__ = ["build"]

_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": version.LATEST_HANDSHAKE_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "snapshot", "version": "0"},
    },
}
_LINES = [
    _INITIALIZE,
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


class _In:
    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        for line in _LINES:
            yield json.dumps(line) + "\n"
        await anyio.sleep(0.5)  # let the answers out before the end of input ends the session


class _Out:
    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []

    async def write(self, text: str) -> None:
        self.lines.append(json.loads(text))

    async def flush(self) -> None:
        return None


class _Listing:
    """Stands in for the store: the face only lists, and names a database."""

    url = "-"
    embedded_data_dir = None


async def _answers(operator: bool) -> dict[Any, dict[str, Any]]:
    face = Face(_Listing(), TOOLS, operator=operator)  # type: ignore[arg-type]
    server = face.server()
    out = _Out()
    async with stdio_server(stdin=_In(), stdout=out) as (read, write):  # type: ignore[arg-type]
        await server.run(read, write, server.create_initialization_options())
    return {line.get("id"): line.get("result", line) for line in out.lines}


def build() -> dict[str, Any]:
    """The catalog this code's server answers with (see ``catalog``)."""
    plain, operator = anyio.run(_answers, False), anyio.run(_answers, True)
    initialize = plain[1]
    del initialize["protocolVersion"], initialize["serverInfo"]["version"]
    initialize["instructions"] = INSTRUCTIONS  # the proxy adds the database it means
    return {
        "handshake_versions": list(version.HANDSHAKE_PROTOCOL_VERSIONS),
        "latest_handshake_version": version.LATEST_HANDSHAKE_VERSION,
        "initialize": initialize,
        "tools": [
            {
                "name": tool.name,
                "area": tool.area,
                "core": tool.core,
                "listed": plain[2]["tools"][i],
                "operator": operator[2]["tools"][i],
            }
            for i, tool in enumerate(TOOLS)
        ],
    }


if __name__ == "__main__":
    PATH.write_text(render(build()), encoding="utf-8")
    print(f"wrote {PATH}", file=sys.stderr)
