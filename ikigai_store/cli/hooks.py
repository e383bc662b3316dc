"""CLI ``hook`` commands (run by Claude Code, see ``ikigai_store.hooks.claude``) and
``hooks install`` (registers them and the MCP server in a project, see
``ikigai_store.hooks.install``).

A ``hook`` command reads Claude Code's JSON event on stdin and always exits 0: a failure is one
``ikigai-store hook <name>: ...`` line on stderr, never a traceback (Claude Code carries on).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from ..config import resolve_url
from ..errors import InvalidArgument
from ..hooks import claude, install, remote
from ..service import client as service_client
from .app import cli
from .common import database_option, show_help_without_command

_NAME_OPTION = click.option(
    "--as",
    "name",
    metavar="NAME",
    default=None,
    help="This agent's identity name (default: $IKIGAI_AS, else the identity of the project "
    "and role, named on first use).",
)
_ROLE_OPTION = click.option(
    "--role",
    metavar="ROLE",
    default=None,
    help="This agent's role in the project (default: $IKIGAI_ROLE, else main); a subagent "
    "is <role>/<its agent type>.",
)


@cli.group(invoke_without_command=True)
@click.pass_context
def hook(ctx: click.Context) -> None:
    """Claude Code hooks: read the hook's JSON event on stdin, answer on stdout.

    Registered by `ikigai-store hooks install`. Every hook fails open: when anything goes
    wrong (the database is down, the input is not JSON) it prints one line on stderr and
    exits 0, so Claude Code carries on.
    """
    show_help_without_command(ctx)


def _run(hook_name: str, **options: Any) -> None:
    """Run the hook through the warm local service (``hooks.remote``), or in this process when
    ``IKIGAI_SERVICE=off``."""
    ctx = click.get_current_context()
    database: str | None = ctx.find_root().params.get("database")
    if service_client.enabled():
        ctx.exit(remote.main(hook_name, database=database, **options))
    ctx.exit(claude.main(hook_name, claude.HookOptions(database=database, **options)))


def _hook_command(name: str, help_text: str) -> Callable[[Callable[..., None]], click.Command]:
    def decorate(fn: Callable[..., None]) -> click.Command:
        return hook.command(name, help=help_text, short_help=help_text.split(".")[0] + ".")(
            _NAME_OPTION(_ROLE_OPTION(fn))
        )

    return decorate


@_hook_command(
    "session-start",
    "SessionStart: tell the agent who it is, its unread mail, the reviews waiting for it "
    "and the tasks it may claim.",
)
def session_start(name: str | None, role: str | None) -> None:
    _run("session-start", name=name, role=role)


@_hook_command(
    "prompt",
    "UserPromptSubmit: show the mail that arrived since the previous prompt (nothing when "
    "none did).",
)
def prompt(name: str | None, role: str | None) -> None:
    _run("prompt", name=name, role=role)


@_hook_command(
    "stop",
    "Stop: keep working while urgent unread mail or a claimed task in progress waits (once: "
    "a second stop in a row is let through).",
)
def stop(name: str | None, role: str | None) -> None:
    _run("stop", name=name, role=role)


@_hook_command(
    "post-tool",
    "PostToolUse: mirror TaskCreate, TaskUpdate and TodoWrite into the store's task list "
    "($CLAUDE_CODE_TASK_LIST_ID, else the session id).",
)
def post_tool(name: str | None, role: str | None) -> None:
    _run("post-tool", name=name, role=role)


@_hook_command(
    "pre-tool",
    "PreToolUse: deny Edit, Write, MultiEdit and NotebookEdit on a file another identity has "
    "reserved (an exclusive file: lease covering it).",
)
@click.option(
    "--auto-reserve",
    "auto_reserve",
    type=click.FloatRange(min=0, min_open=True, max=86400),
    is_flag=False,
    flag_value=claude.AUTO_RESERVE_SECONDS,
    default=None,
    metavar="[SECONDS]",
    help="Reserve a free file for this agent before it is edited (an exclusive lease of "
    f"SECONDS, default {claude.AUTO_RESERVE_SECONDS:g}).",
)
def pre_tool(name: str | None, role: str | None, auto_reserve: float | None) -> None:
    _run("pre-tool", name=name, role=role, auto_reserve=auto_reserve)


@cli.group(invoke_without_command=True)
@click.pass_context
def hooks(ctx: click.Context) -> None:
    """Install the Claude Code hooks and the MCP server into a project."""
    show_help_without_command(ctx)


@hooks.command("install", short_help="Register the hooks and the MCP server in a project.")
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=".",
    show_default=True,
    help="The project directory (its .claude/settings.json and .mcp.json are written).",
)
@_NAME_OPTION
@_ROLE_OPTION
@click.option(
    "--auto-reserve",
    is_flag=True,
    help="Make the pre-tool hook reserve each file it lets the agent edit.",
)
@click.option(
    "--wake",
    type=click.Choice(install.WAKES),
    default="none",
    show_default=True,
    help="How an idle agent is woken when something concerns it: rewake (an asyncRewake "
    "Stop hook running `watch --rewake`), or none.",
)
@click.option(
    "--http",
    "http",
    metavar="URL",
    default=None,
    help="Write http hooks posting to the running `ikigai-store mcp --http` at URL (e.g. "
    "http://127.0.0.1:8765) instead of commands: a request per hook, no process start.",
)
@click.option(
    "--codex",
    is_flag=True,
    help="Install the MCP server for Codex instead: merge [mcp_servers.ikigai-store] into "
    "$CODEX_HOME/config.toml (default ~/.codex/config.toml).",
)
@click.option("--dry-run", is_flag=True, help="Print a diff of each file; write nothing.")
def hooks_install(
    project: Path,
    name: str | None,
    role: str | None,
    auto_reserve: bool,
    wake: str,
    http: str | None,
    codex: bool,
    dry_run: bool,
) -> None:
    """Merge the ikigai-store hooks (SessionStart, UserPromptSubmit, Stop, PostToolUse on the
    task tools, PreToolUse on the edit tools) into PROJECT/.claude/settings.json, and the
    ikigai-store MCP server into PROJECT/.mcp.json. --wake rewake adds an asyncRewake Stop
    entry running `ikigai-store watch --rewake` (it wakes the idle session when mail, a task
    or a freed reservation arrives: through Claude Code's messaging socket when the hook is
    given one, without holding the hook; else by exiting 2).

    Everything else in both files is kept; our entries are found by their command and
    replaced, so running it again changes nothing. The commands name this ikigai-store
    executable by its absolute path. The server is approved in
    PROJECT/.claude/settings.local.json (enabledMcpjsonServers), so Claude Code does not
    hold it as "Pending approval".

    The database the server uses is the one this command resolves (--database, else
    $IKIGAI_DATABASE_URL, else $DATABASE_URL, else the embedded PostgreSQL): a URL is
    written into the server's env, or, when it carries a password, a reference to
    ${IKIGAI_DATABASE_URL} (no password is written into a file); for the embedded
    PostgreSQL, $IKIGAI_DATA_DIR when it is set (as an absolute path). The hooks use the
    agent's environment, as any command.

    With --codex the MCP server is installed for Codex: its [mcp_servers.ikigai-store]
    table in $CODEX_HOME/config.toml (default ~/.codex/config.toml) is written or replaced
    (other tables and keys kept), with its tools approved (default_tools_approval_mode) and
    the database named as above (a URL with a password: env_vars passes
    $IKIGAI_DATABASE_URL through). Codex gives the server its cwd as the project.

    With --http URL the hooks are Claude Code http hooks posting to that server's
    /hooks/NAME (the project, --as, --role and --auto-reserve in the URL); Claude Code fills
    in the Authorization header from $IKIGAI_MCP_TOKEN (the token is never written), and
    forwards $IKIGAI_ROLE, $IKIGAI_AS and $CLAUDE_CODE_TASK_LIST_ID in headers. The server
    must be running (`ikigai-store mcp --http`); while it is not, the hooks do nothing.
    """
    database = resolve_url(database_option())
    data_dir = install.installing_data_dir() if database is None else None
    if codex:
        if http is not None or wake != "none" or auto_reserve:
            raise InvalidArgument(
                "--codex installs the MCP server only: drop --http, --wake "
                "and --auto-reserve (Claude Code hooks)"
            )
        changes = install.plan_codex(
            install.executable(), name=name, role=role, database=database, data_dir=data_dir
        )
    else:
        changes = install.plan(
            project.resolve(),
            install.executable(),
            name=name,
            role=role,
            auto_reserve=auto_reserve,
            wake=wake,
            http=http,
            database=database,
            data_dir=data_dir,
        )
    if dry_run:
        for change in changes:
            click.echo(change.diff() if change.changed else f"{change.path}: unchanged", nl=False)
            if not change.changed:
                click.echo()
        return
    written = install.apply_changes(changes)
    for change in changes:
        click.echo(f"{change.path}: {'written' if change.path in written else 'unchanged'}")
