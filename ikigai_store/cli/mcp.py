"""CLI ``mcp``: serve the store's operations to coding agents as MCP tools, and its state as
MCP resources (``ikigai://`` URIs, with subscriptions; ``mcp.resources``).

``ikigai-store mcp`` speaks MCP over stdio (what a coding agent spawns); ``--http`` serves
streamable HTTP on ``/mcp``, and Claude Code's ``http`` hooks on ``/hooks/NAME``, bound to
127.0.0.1 unless ``--host`` says otherwise (any other address needs ``--token`` /
``IKIGAI_MCP_TOKEN``). The server acts as one identity (``--as``,
else the agent's identity in its project and role, the one its hooks resolve). Needs the
``mcp`` extra; without it the command is one ``Error:`` line saying how to install it.
"""

from __future__ import annotations

import click

from ..errors import InvalidArgument
from .app import cli
from .common import database_option

TOOLS_HELP = (
    "Which tools: core (mail, reservations, tasks: the default), full, or a comma-separated "
    "list of areas (identities, mail, topics, leases, reviews, plans, tasks, activities, "
    "history) and tool names."
)


@cli.command("mcp")
@click.option(
    "--http",
    "http",
    is_flag=True,
    help="Serve streamable HTTP (/mcp) instead of stdio, and Claude Code's http hooks "
    "(POST /hooks/NAME).",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535))
@click.option(
    "--token",
    envvar="IKIGAI_MCP_TOKEN",
    default=None,
    help="Bearer token every HTTP request must carry (required off loopback). "
    "Default: $IKIGAI_MCP_TOKEN.",
)
@click.option("--as", "name", metavar="NAME", default=None, help="The identity to act as.")
@click.option("--role", default=None, help="The agent's role in its project (default: main).")
@click.option(
    "--project", default=None, metavar="DIR", help="The project directory (default: cwd)."
)
@click.option("--operator", is_flag=True, help="Tools may act as any identity (as_identity).")
@click.option("--tools", "tool_set", default="core", show_default=True, help=TOOLS_HELP)
def mcp_command(
    http: bool,
    host: str,
    port: int,
    token: str | None,
    name: str | None,
    role: str | None,
    project: str | None,
    operator: bool,
    tool_set: str,
) -> None:
    """Serve MCP tools (mail, reservations, tasks, reviews, ...) and resources to a coding
    agent."""
    try:
        from ..mcp import server
        from ..mcp.tools import select
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise click.ClickException(
            f"the MCP server needs the mcp extra: pip install '.[mcp]' in a checkout ({exc})"
        ) from exc
    try:
        tools = select(tool_set)
    except ValueError as exc:
        raise InvalidArgument(f"--tools: {exc}") from exc
    server.run(
        url=database_option(),
        tools=tools,
        name=name,
        project=project,
        role=role,
        operator=operator,
        http=http,
        host=host,
        port=port,
        token=token,
    )
