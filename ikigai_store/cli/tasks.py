"""CLI ``task`` commands: create-list, lists, list, show, upsert, available, claim, release,
stats, sync, prune.

A task list (e.g. one Claude Code task list) belongs to an identity; its tasks are known by
their external ids, depend on each other (``--blocked-by``), and are claimed by one owner at a
time (and released by it). ``upsert``, ``claim`` and ``release`` print ``EXTERNAL_ID STATUS
OWNER`` alone on their first line; ``sync`` and ``prune`` print the count alone. Every command
takes ``--json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import click

from ..models import TASK_STATUSES, Task
from .app import cli
from .common import JSON_OPTION, open_store, show_help_without_command
from .params import DURATION, JSON
from .render import as_dict, echo_table, iso, json_text, one_line

#: Width a subject is cut to in listings.
SUBJECT_WIDTH = 50


def _echo_tasks(tasks: Sequence[Task], empty: str, *, with_list: bool = False) -> None:
    """A table of tasks; ``with_list`` adds their list (when they come from several)."""
    if not tasks:
        click.echo(empty)
        return
    echo_table(
        (*(("list",) if with_list else ()), "id", "status", "owner", "blocked by", "subject"),
        [
            (
                *((t.list_id,) if with_list else ()),
                t.external_id,
                t.status,
                t.owner or "",
                ",".join(t.blocked_by),
                one_line(t.subject, SUBJECT_WIDTH),
            )
            for t in tasks
        ],
    )


def _echo_task_line(t: Task) -> None:
    """The first line scripts read: EXTERNAL_ID STATUS OWNER (``-`` when unowned)."""
    click.echo(f"{t.external_id} {t.status} {t.owner or '-'}")


@cli.group(invoke_without_command=True)
@click.pass_context
def task(ctx: click.Context) -> None:
    """Task lists, tasks with dependencies, and claims.

    A task is available when it is pending, unowned and every task it is blocked by is
    completed or deleted; `claim` takes one for an owner (of racing claimers exactly one wins),
    `release` gives it back.
    `upsert` never erases: options left out (or given as "") keep the stored values.
    """
    show_help_without_command(ctx)


@task.command("create-list", short_help="Create a task list owned by an identity.")
@click.argument("list_id")
@click.option("--owner", metavar="NAME", required=True, help="The owning identity.")
@click.option("--watch-path", metavar="PATH", default=None, help="Where the list's source is.")
@JSON_OPTION
def task_create_list(list_id: str, owner: str, watch_path: str | None, as_json: bool) -> None:
    """Create list LIST_ID (the same request again is a no-op)."""
    with open_store() as store:
        made = store.tasks.create_list(list_id, owner, watch_path=watch_path)
    if as_json:
        click.echo(json_text(made, indent=2))
    else:
        click.echo(made.list_id)


#: ``--project KEY``: a project's task lists and those of no project.
PROJECT_OPTION = click.option(
    "--project",
    "project_key",
    metavar="KEY",
    default=None,
    help="Only this project's lists (its owner's project key) and those of no project.",
)


@task.command("lists", short_help="List every task list.")
@PROJECT_OPTION
@JSON_OPTION
def task_lists(project_key: str | None, as_json: bool) -> None:
    """Every task list (with --project, that project's and those of no project), oldest
    first, with its counts."""
    with open_store() as store:
        found = [(x, store.tasks.stats(x)) for x in store.tasks.lists(project_key=project_key)]
    if as_json:
        click.echo(json_text([{**as_dict(x), "stats": s} for x, s in found], indent=2))
        return
    if not found:
        click.echo("no task lists")
        return
    echo_table(
        ("list", "owner", "tasks", "available", "in progress", "completed"),
        [
            (
                x.list_id,
                x.owner,
                str(s.total),
                str(s.available),
                str(s.in_progress),
                str(s.completed),
            )
            for x, s in found
        ],
        frozenset({"tasks", "available", "in progress", "completed"}),
    )


@task.command("list", short_help="A list's tasks.")
@click.argument("list_id")
@click.option("--status", type=click.Choice(TASK_STATUSES), default=None, help="Only these.")
@JSON_OPTION
def task_list(list_id: str, status: str | None, as_json: bool) -> None:
    """The tasks of LIST_ID in creation order."""
    with open_store() as store:
        found = store.tasks.list(list_id, status=status)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_tasks(found, f"no tasks in {list_id}")


@task.command("show", short_help="One task in full.")
@click.argument("list_id")
@click.argument("external_id")
@JSON_OPTION
def task_show(list_id: str, external_id: str, as_json: bool) -> None:
    """Show task EXTERNAL_ID of LIST_ID."""
    with open_store() as store:
        t = store.tasks.get(list_id, external_id)
    if as_json:
        click.echo(json_text(t, indent=2))
        return
    _echo_task_line(t)
    click.echo(f"Subject: {t.subject}")
    for label, value in (
        ("Active form", t.active_form),
        ("Blocked by", ", ".join(t.blocked_by)),
        ("Blocks", ", ".join(t.blocks)),
        ("Created", iso(t.created_at)),
        ("Updated", iso(t.updated_at)),
        ("Started", iso(t.started_at)),
        ("Completed", iso(t.completed_at)),
        ("Metadata", json_text(t.metadata) if t.metadata else None),
    ):
        if value:
            click.echo(f"{label}: {value}")
    if t.description:
        click.echo()
        click.echo(t.description)


@task.command("upsert", short_help="Create or update a task; print ID STATUS OWNER.")
@click.argument("list_id")
@click.argument("external_id")
@click.option("--subject", "-s", default=None, help="Required for a new task.")
@click.option("--description", "-d", default=None)
@click.option("--active-form", default=None, help="What is shown while it is in progress.")
@click.option(
    "--metadata", type=JSON, metavar="JSON", default=None, help="A JSON object, merged in."
)
@click.option("--status", type=click.Choice(TASK_STATUSES), default=None)
@click.option("--owner", default=None, help="Who holds it (free text, e.g. an agent's name).")
@click.option(
    "--blocked-by",
    "blocked_by",
    metavar="ID",
    multiple=True,
    help="A task of the list this one waits for (repeat; replaces the current ones).",
)
@click.option("--no-blockers", is_flag=True, help="Remove every dependency of the task.")
@JSON_OPTION
def task_upsert(
    list_id: str,
    external_id: str,
    subject: str | None,
    description: str | None,
    active_form: str | None,
    metadata: Any,
    status: str | None,
    owner: str | None,
    blocked_by: tuple[str, ...],
    no_blockers: bool,
    as_json: bool,
) -> None:
    """Create or update task EXTERNAL_ID of LIST_ID (completion: --status completed)."""
    if blocked_by and no_blockers:
        raise click.ClickException("--blocked-by and --no-blockers exclude each other")
    blockers: list[str] | None = [] if no_blockers else list(blocked_by) or None
    with open_store() as store:
        t = store.tasks.upsert(
            list_id,
            external_id,
            subject=subject,
            description=description,
            active_form=active_form,
            metadata=metadata,
            status=status,
            owner=owner,
            blocked_by=blockers,
        )
    if as_json:
        click.echo(json_text(t, indent=2))
    else:
        _echo_task_line(t)


@task.command("available", short_help="Tasks anyone may claim now.")
@click.argument("list_id", required=False)
@PROJECT_OPTION
@JSON_OPTION
def task_available(list_id: str | None, project_key: str | None, as_json: bool) -> None:
    """Pending, unowned tasks whose blockers are all completed or deleted (of LIST_ID, or of
    every list; with --project, only in that project's lists and those of no project)."""
    with open_store() as store:
        found = store.tasks.available(list_id, project_key=project_key)
    if as_json:
        click.echo(json_text(found, indent=2))
    else:
        _echo_tasks(found, "nothing available", with_list=list_id is None)


@task.command("claim", short_help="Claim a task for an owner; print ID STATUS OWNER.")
@click.argument("list_id")
@click.argument("external_id")
@click.argument("owner")
@JSON_OPTION
def task_claim(list_id: str, external_id: str, owner: str, as_json: bool) -> None:
    """Make task EXTERNAL_ID of LIST_ID in_progress with OWNER (exit 1 when someone else holds
    it, or it is blocked or finished)."""
    with open_store() as store:
        t = store.tasks.claim(list_id, external_id, owner)
    if as_json:
        click.echo(json_text(t, indent=2))
    else:
        _echo_task_line(t)


@task.command("release", short_help="Give back an in-progress task; print ID STATUS OWNER.")
@click.argument("list_id")
@click.argument("external_id")
@click.argument("owner")
@JSON_OPTION
def task_release(list_id: str, external_id: str, owner: str, as_json: bool) -> None:
    """Make task EXTERNAL_ID of LIST_ID, in progress and held by OWNER, pending and unowned
    again, e.g. when the agent working on it died (exit 1 when someone else holds it or it is
    not in progress)."""
    with open_store() as store:
        t = store.tasks.release(list_id, external_id, owner)
    if as_json:
        click.echo(json_text(t, indent=2))
    else:
        _echo_task_line(t)


@task.command("stats", short_help="Counts per status, available, blocked.")
@click.argument("list_id", required=False)
@JSON_OPTION
def task_stats(list_id: str | None, as_json: bool) -> None:
    """Counts of LIST_ID's tasks (or of every list's)."""
    with open_store() as store:
        counts = store.tasks.stats(list_id)
    if as_json:
        click.echo(json_text(counts, indent=2))
        return
    for name, value in as_dict(counts).items():
        click.echo(f"{name}: {value}")


@task.command("sync", short_help="Delete the tasks not named; print how many.")
@click.argument("list_id")
@click.argument("active", nargs=-1)
@JSON_OPTION
def task_sync(list_id: str, active: tuple[str, ...], as_json: bool) -> None:
    """Mirror LIST_ID's source: every task whose id is not among ACTIVE becomes deleted."""
    with open_store() as store:
        deleted = store.tasks.sync(list_id, list(active))
    if as_json:
        click.echo(json_text({"list_id": list_id, "deleted": deleted}, indent=2))
    else:
        click.echo(str(deleted))


@task.command("prune", short_help="Delete old finished tasks; print how many.")
@click.option(
    "--older-than",
    default="7d",
    show_default=True,
    type=DURATION,
    help="Age since the last update (30m, 12h, 7d...).",
)
@JSON_OPTION
def task_prune(older_than: timedelta, as_json: bool) -> None:
    """Delete completed and deleted tasks not updated for --older-than, with their
    dependencies."""
    with open_store() as store:
        deleted = store.tasks.prune(older_than=older_than)
    if as_json:
        click.echo(json_text({"deleted": deleted}, indent=2))
    else:
        click.echo(str(deleted))
