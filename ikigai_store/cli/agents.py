"""CLI ``agent`` commands: list, new, zero, fork, kill, replay, ranges."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from ..models import Agent
from .app import cli
from .common import JSON_OPTION, SESSION_OPTION, active_or, open_store, show_help_without_command
from .render import as_dict, echo_agents, echo_context, echo_ranges, json_text, short

# ---------------------------------------------------------------- agents


@cli.group(invoke_without_command=True)
@click.pass_context
def agent(ctx: click.Context) -> None:
    """Create, fork, list, kill and replay agents.

    A fork inherits its parent's history up to the fork point without copying any event; replay
    reads the inherited ranges, then the agent's own events.
    """
    show_help_without_command(ctx)


_F = TypeVar("_F", bound=Callable[..., Any])


def _agent_fields(
    name: str | None, provider: str | None, model: str | None, thinking_level: str | None
) -> dict[str, str | None]:
    return {"name": name, "provider": provider, "model": model, "thinking_level": thinking_level}


def _agent_options(fn: _F) -> _F:
    """--name, --provider, --model, --thinking-level (shared by `agent new` and `agent fork`)."""
    for option in reversed(
        (
            click.option("--name", "-n", default=None, help="A name for the agent."),
            click.option("--provider", default=None, help="LLM provider."),
            click.option("--model", "-m", default=None, help="Model name."),
            click.option("--thinking-level", default=None, help="Thinking level."),
        )
    ):
        fn = option(fn)
    return fn


@agent.command("list", short_help="List running agents as a tree.")
@SESSION_OPTION
@click.option("--all", "all_sessions", is_flag=True, help="Running agents of every session.")
def agent_list(session_id: int | None, all_sessions: bool) -> None:
    """List running agents as a tree: children indented under their parent."""
    if all_sessions and session_id is not None:
        raise click.ClickException("give --session or --all, not both")
    with open_store() as store:
        if all_sessions:
            agents = store.running_agents()
        else:
            sid = active_or(store, session_id)
            store.get_session(sid)  # NotFound for a session that does not exist
            agents = store.running_agents(sid)
    if not agents:
        click.echo("no running agents")
        return
    by_session: dict[int, list[Agent]] = {}
    for a in agents:
        by_session.setdefault(a.session_id, []).append(a)
    for n, (sid, group) in enumerate(by_session.items()):
        if n:
            click.echo()
        click.echo(f"session {sid}")
        echo_agents(group, indent="  ")


@agent.command("new", short_help="Create a root agent and print its uuid.")
@SESSION_OPTION
@_agent_options
def agent_new(
    session_id: int | None,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Register a root agent (no parent) in a session and print its uuid."""
    with open_store() as store:
        sid = active_or(store, session_id)
        fields = _agent_fields(name, provider, model, thinking_level)
        click.echo(store.create_agent(sid, **fields).uuid)


@agent.command("zero", short_help="Print (or create) the session's root agent.")
@SESSION_OPTION
@_agent_options
def agent_zero(
    session_id: int | None,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Print the session's root agent ("agent zero"), creating it if missing.

    Events of the session that belong to no agent are given to it. The options apply only when it
    is created.
    """
    with open_store() as store:
        sid = active_or(store, session_id)
        fields = _agent_fields(name, provider, model, thinking_level)
        click.echo(store.ensure_root_agent(sid, **fields).uuid)


@agent.command("fork", short_help="Fork an agent; print the child uuid and fork point.")
@click.argument("parent_uuid", metavar="PARENT_UUID")
@_agent_options
def agent_fork(
    parent_uuid: str,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Fork a running agent: print the child's uuid (first line) and its fork point.

    The child inherits the parent's history up to the parent's newest event (the fork point) and,
    unless given, its provider, model and thinking level. No event is copied.
    """
    with open_store() as store:
        child = store.fork_agent(
            parent_uuid, **_agent_fields(name, provider, model, thinking_level)
        )
    click.echo(child.uuid)
    if child.fork_message_id:
        click.echo(f"fork point: #{child.fork_message_id} (inherits the parent's events up to it)")
    else:
        click.echo("fork point: 0 (the parent had no events of its own)")


@agent.command("kill", short_help="Kill an agent and its descendants.")
@click.argument("uuid", metavar="UUID")
def agent_kill(uuid: str) -> None:
    """Mark an agent and its running descendants dead; print their uuids, parents first."""
    with open_store() as store:
        killed = store.kill_agent(uuid)
    for killed_uuid in killed:
        click.echo(killed_uuid)
    if not killed:
        click.echo(f"agent {uuid} and its descendants were not running", err=True)


@agent.command("replay", short_help="Print the context an agent replays to.")
@click.argument("uuid", metavar="UUID")
@JSON_OPTION
def agent_replay(uuid: str, as_json: bool) -> None:
    """Print the context an agent replays to: inherited events, then its own.

    Like `replay`, with an extra column: the agent each event belongs to (a short uuid prefix),
    so events inherited from ancestors are visible.
    """
    with open_store() as store:
        me = store.get_agent(uuid)
        ctx = store.replay_agent(uuid)
    if as_json:
        doc = {"agent_uuid": me.uuid, "session_id": me.session_id, **as_dict(ctx)}
        click.echo(json_text(doc, indent=2))
        return
    inherited = sum(1 for m in ctx.messages if m.agent_uuid != me.uuid)
    click.echo(
        f"agent {me.uuid} ({short(me.uuid)}, session {me.session_id}): "
        f"{len(ctx.messages)} message(s) in context, {inherited} inherited"
    )
    echo_context(ctx, agents=True)


@agent.command("ranges", short_help="Print the id ranges an agent's replay reads.")
@click.argument("uuid", metavar="UUID")
def agent_ranges(uuid: str) -> None:
    """Print the id ranges an agent's replay reads, root first: start < id <= end per agent."""
    with open_store() as store:
        echo_ranges(store, uuid)
