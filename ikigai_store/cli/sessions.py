"""CLI ``session`` commands: new, list, show, end, title, prune."""

from __future__ import annotations

from datetime import datetime

import click

from ..models import Session
from .app import cli
from .common import JSON_OPTION, active_or, open_store, show_help_without_command
from .params import AGO
from .render import json_text, when

# ---------------------------------------------------------------- session


def _title(session: Session) -> str:
    return session.title if session.title is not None else "-"


@cli.group(invoke_without_command=True)
@click.pass_context
def session(ctx: click.Context) -> None:
    """Create, list, inspect, end and title sessions."""
    show_help_without_command(ctx)


@session.command("new")
@click.option("--title", "-t", default=None, help="A title for the session.")
def session_new(title: str | None) -> None:
    """Start a session (it becomes the active one) and print its id."""
    with open_store() as store:
        click.echo(store.create_session(title))


@session.command("list")
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="How many to list.")
def session_list(limit: int) -> None:
    """List sessions, newest first; `*` marks the active one."""
    with open_store() as store:
        sessions = store.list_sessions(limit=limit)
        active = store.get_active_session()
    if not sessions:
        click.echo("no sessions")
        return
    click.echo(f"  {'id':>8}  {'started':<19}  {'ended':<19}  title")
    for s in sessions:
        flag = "*" if s.id == active else " "
        click.echo(
            f"{flag} {s.id:>8}  {when(s.started_at):<19}  {when(s.ended_at):<19}  {_title(s)}"
        )


@session.command("show")
@click.argument("session_id", metavar="ID", type=int)
def session_show(session_id: int) -> None:
    """Show one session: its fields, message count and context size."""
    with open_store() as store:
        s = store.get_session(session_id)
        total = store.count_messages(session_id)
        ctx = store.replay_session(session_id)
        active = store.get_active_session()
    state = "active" if s.id == active else ("ended" if s.ended_at else "open")
    click.echo(f"{'id:':<18}{s.id} ({state})")
    click.echo(f"{'title:':<18}{_title(s)}")
    click.echo(f"{'started:':<18}{when(s.started_at)}")
    click.echo(f"{'ended:':<18}{when(s.ended_at)}")
    click.echo(f"{'messages:':<18}{total}")
    click.echo(f"{'in context:':<18}{len(ctx.messages)}")
    click.echo(f"{'marks:':<18}{', '.join(m.label or '-' for m in ctx.marks) or 'none'}")


@session.command("end")
@click.argument("session_id", metavar="[ID]", type=int, required=False)
def session_end(session_id: int | None) -> None:
    """End a session (default: the active one). Ending it again is harmless."""
    with open_store() as store:
        sid = active_or(store, session_id)
        store.end_session(sid)
    click.echo(f"ended session {sid}")


@session.command("title")
@click.argument("session_id", metavar="ID", type=int)
@click.argument("title", required=False)
@click.option("--clear", is_flag=True, help="Remove the title instead of setting one.")
def session_title(session_id: int, title: str | None, clear: bool) -> None:
    """Set a session's TITLE, or remove it with --clear."""
    if clear == (title is not None):
        raise click.ClickException("give either a TITLE or --clear")
    with open_store() as store:
        store.set_session_title(session_id, None if clear else title)
    click.echo(f"session {session_id}: " + ("title cleared" if clear else f"title set to {title}"))


@session.command("prune", short_help="Delete sessions that ended long ago.")
@click.option(
    "--ended-before",
    "ended_before",
    metavar="WHEN",
    required=True,
    type=AGO,
    help="Delete the sessions that ended before then: an ISO-8601 date or time (2026-01-01; "
    "local without an offset), or a duration ago (90d, 12h...).",
)
@click.option("--dry-run", is_flag=True, help="Count what would be deleted; delete nothing.")
@JSON_OPTION
def session_prune(ended_before: datetime, dry_run: bool, as_json: bool) -> None:
    """Delete ended sessions older than --ended-before with their events, agents and what
    hangs off them, in short transactions; never an active session."""
    with open_store() as store:
        report = store.prune_sessions(ended_before=ended_before, dry_run=dry_run)
    counts = {"sessions": report.sessions, "events": report.events, "agents": report.agents}
    if as_json:
        click.echo(json_text({**counts, "dry_run": dry_run}))
    else:
        verb = "would delete" if dry_run else "deleted"
        click.echo(
            f"{verb} {report.sessions} session(s), {report.events} event(s), "
            f"{report.agents} agent(s)"
        )
