"""CLI ``identity`` commands: register, list, discover, retire, retire-idle, prune.

Identities are the named participants of agent mail (see ``ikigai-store mail``). ``retire``
keeps their mail but stops them sending and receiving; ``prune`` deletes only retired
identities nothing refers to.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import click

from .app import cli
from .common import JSON_OPTION, open_store, show_help_without_command
from .params import DURATION
from .render import age, echo_table, json_text, one_line, when

#: Width a purpose is cut to in listings.
PURPOSE_WIDTH = 40


def _dash(value: str | None, width: int | None = None) -> str:
    if value is None or value == "":
        return "-"
    return one_line(value, width) if width is not None else value


PROJECT_OPTION = click.option(
    "--project", "project_key", metavar="KEY", default=None, help="Only this project's identities."
)

# ---------------------------------------------------------------- identity


@cli.group(invoke_without_command=True)
@click.pass_context
def identity(ctx: click.Context) -> None:
    """Register, list, discover and retire mail identities.

    An identity is a named participant of agent mail (a person, a Claude Code instance, an
    ikigai agent). A name is 1 to 64 letters, digits, dots, underscores or hyphens, starting
    with a letter or digit, and is unique. Identities are retired, not deleted; prune deletes
    long-retired ones nothing refers to.
    """
    show_help_without_command(ctx)


@identity.command("register", short_help="Create an identity and print its name.")
@click.argument("name", required=False)
@click.option("--project", "project_key", metavar="KEY", default=None, help="Project key.")
@click.option("--branch", "git_branch", metavar="BRANCH", default=None, help="Git branch.")
@click.option("--purpose", default=None, help="What this participant does.")
@click.option("--working-dir", metavar="DIR", default=None, help="Its working directory.")
@click.option("--hostname", metavar="HOST", default=None, help="The host it runs on.")
@click.option(
    "--agent",
    "agent_uuid",
    metavar="UUID",
    default=None,
    help="Bind the identity to this runtime agent.",
)
@JSON_OPTION
def identity_register(
    name: str | None,
    project_key: str | None,
    git_branch: str | None,
    purpose: str | None,
    working_dir: str | None,
    hostname: str | None,
    agent_uuid: str | None,
    as_json: bool,
) -> None:
    """Create an identity called NAME (default: a memorable name such as BraveOtter) and print
    its name alone on the first line. A name already taken, even by a retired identity, is an
    error."""
    with open_store() as store:
        ident = store.identities.register(
            name,
            project_key=project_key,
            git_branch=git_branch,
            purpose=purpose,
            working_dir=working_dir,
            hostname=hostname,
            agent_uuid=agent_uuid,
        )
    if as_json:
        click.echo(json_text(ident, indent=2))
        return
    click.echo(ident.name)


@identity.command("list", short_help="List identities, most recently active first.")
@PROJECT_OPTION
@click.option("--all", "include_retired", is_flag=True, help="Include retired identities.")
@JSON_OPTION
def identity_list(project_key: str | None, include_retired: bool, as_json: bool) -> None:
    """List identities, most recently active first (retired ones only with --all)."""
    with open_store() as store:
        idents = store.identities.list(project_key=project_key, include_retired=include_retired)
    if as_json:
        click.echo(json_text(idents, indent=2))
        return
    if not idents:
        click.echo("no identities")
        return
    now = datetime.now(UTC)
    header = ["name", "project", "branch", "active", "purpose"]
    if include_retired:
        header.insert(3, "retired")
    rows = []
    for i in idents:
        row = [
            i.name,
            _dash(i.project_key),
            _dash(i.git_branch),
            age(i.last_active_at, now),
            _dash(i.purpose, PURPOSE_WIDTH),
        ]
        if include_retired:
            row.insert(3, "-" if i.retired_at is None else age(i.retired_at, now))
        rows.append(row)
    echo_table(header, rows, frozenset({"active", "retired"}))


@identity.command("discover", short_help="Who is around: status and unread mail.")
@PROJECT_OPTION
@JSON_OPTION
def identity_discover(project_key: str | None, as_json: bool) -> None:
    """List identities that are not retired, with their status and unread mail count.

    Status: active (seen in the last 5 minutes), idle (in the last 30), offline.
    """
    with open_store() as store:
        statuses = store.identities.discover(project_key=project_key)
    if as_json:
        click.echo(json_text(statuses, indent=2))
        return
    if not statuses:
        click.echo("no identities")
        return
    now = datetime.now(UTC)
    echo_table(
        ("name", "status", "unread", "active", "project", "branch", "purpose"),
        [
            (
                s.identity.name,
                s.status,
                str(s.unread),
                age(s.identity.last_active_at, now),
                _dash(s.identity.project_key),
                _dash(s.identity.git_branch),
                _dash(s.identity.purpose, PURPOSE_WIDTH),
            )
            for s in statuses
        ],
        frozenset({"unread", "active"}),
    )


@identity.command("retire", short_help="Retire an identity (it keeps its mail).")
@click.argument("name")
@JSON_OPTION
def identity_retire(name: str, as_json: bool) -> None:
    """Retire NAME: it keeps every mail it sent or received (and may still read them) but can
    no longer send or receive. Retiring again changes nothing."""
    with open_store() as store:
        ident = store.identities.retire(name)
    if as_json:
        click.echo(json_text(ident, indent=2))
        return
    click.echo(f"retired {ident.name} (since {when(ident.retired_at)})")


@identity.command("retire-idle", short_help="Retire identities idle for long; print them.")
@click.option(
    "--idle",
    "idle_for",
    default="7d",
    show_default=True,
    type=DURATION,
    help="Time since the identity was last active (30m, 12h, 7d...).",
)
@PROJECT_OPTION
@JSON_OPTION
def identity_retire_idle(idle_for: timedelta, project_key: str | None, as_json: bool) -> None:
    """Retire the identities not active for --idle that hold no live lease (a running
    ``watch`` holds one), one name per line. Their mail stays; an agent that comes back gets
    a new identity."""
    with open_store() as store:
        retired = store.identities.retire_idle(idle_for=idle_for, project_key=project_key)
    if as_json:
        click.echo(json_text(retired, indent=2))
        return
    for ident in retired:
        click.echo(ident.name)


@identity.command("prune", short_help="Delete long-retired identities; print their names.")
@click.option(
    "--retired-for",
    default="30d",
    show_default=True,
    type=DURATION,
    help="Time since the identity was retired (30m, 12h, 7d...).",
)
@JSON_OPTION
def identity_prune(retired_for: timedelta, as_json: bool) -> None:
    """Delete the identities retired for longer than --retired-for that nothing refers to (no
    mail, lease, task list, review, activity...), one name per line; the others stay retired.
    """
    with open_store() as store:
        pruned = store.identities.prune(retired_for=retired_for)
    if as_json:
        click.echo(json_text(pruned, indent=2))
        return
    for name in pruned:
        click.echo(name)
