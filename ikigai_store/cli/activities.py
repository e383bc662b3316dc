"""CLI ``activity`` commands (record, feed, prune) and ``lease`` commands (acquire, renew,
release, force-release, held).

``activity record`` prints the new activity's id alone; ``activity feed`` lists newest first
(``--before ID`` continues after the last id shown). ``lease acquire`` prints the lease's token
alone on its first line: ``renew`` and ``release`` take RESOURCE TOKEN. A refused lease is one
``Error:`` line naming the holder and when its lease ends (exit status 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from ..models import ACTIVITY_TYPES, Lease
from .app import cli
from .common import JSON_OPTION, open_store, show_help_without_command
from .params import AGO, DURATION, JSON, SECONDS
from .render import age, echo_table, iso, json_text, one_line

#: Width a description is cut to in the feed.
DESCRIPTION_WIDTH = 60


def _until(when: datetime) -> str:
    seconds = (when - datetime.now(UTC)).total_seconds()
    return f"{iso(when)} (in {max(0.0, seconds):.0f}s)"


def _echo_leases(leases: Sequence[Lease]) -> None:
    echo_table(
        ("resource", "holder", "mode", "expires", "token"),
        [
            (
                lease.resource,
                lease.holder,
                "exclusive" if lease.exclusive else "shared",
                _until(lease.expires_at),
                lease.token,
            )
            for lease in leases
        ],
    )


# ---------------------------------------------------------------- activity


@cli.group(invoke_without_command=True)
@click.pass_context
def activity(ctx: click.Context) -> None:
    """The activity feed: what identities did, newest first.

    Types: commit, message, session_start, session_complete, decision, error, blocker,
    heartbeat, task_complete, review_*, plan_submitted, plan_decided.
    """
    show_help_without_command(ctx)


@activity.command("record", short_help="Record an activity; print its id.")
@click.argument("identity")
@click.argument("type", type=click.Choice(ACTIVITY_TYPES))
@click.argument("description")
@click.option("--metadata", type=JSON, metavar="JSON", default=None, help="A JSON object.")
@JSON_OPTION
def activity_record(
    identity: str, type: str, description: str, metadata: Any, as_json: bool
) -> None:
    """Record that IDENTITY did DESCRIPTION (an activity of TYPE); print its id."""
    with open_store() as store:
        made = store.activities.record(identity, type, description, metadata=metadata)
    if as_json:
        click.echo(json_text(made, indent=2))
    else:
        click.echo(str(made.id))


@activity.command("feed", short_help="The feed, newest first.")
@click.option(
    "--since",
    metavar="WHEN",
    type=AGO,
    default=None,
    help="Only since then: an ISO-8601 time (local without an offset), or a duration ago (2h).",
)
@click.option("--identity", metavar="NAME", default=None, help="Only this identity's.")
@click.option("--type", "type_", type=click.Choice(ACTIVITY_TYPES), default=None)
@click.option("--limit", "-n", type=int, default=50, show_default=True)
@click.option("--before", type=int, default=None, help="Only ids below this (the next page).")
@JSON_OPTION
def activity_feed(
    since: datetime | None,
    identity: str | None,
    type_: str | None,
    limit: int,
    before: int | None,
    as_json: bool,
) -> None:
    """List activities, newest first (--before the last id shown for the next page)."""
    with open_store() as store:
        found = store.activities.feed(
            since=since, identity=identity, activity_type=type_, limit=limit, before=before
        )
    if as_json:
        click.echo(json_text(found, indent=2))
        return
    if not found:
        click.echo("no activity")
        return
    echo_table(
        ("id", "age", "identity", "type", "description"),
        [
            (
                str(a.id),
                age(a.created_at),
                a.identity,
                a.type,
                one_line(a.description, DESCRIPTION_WIDTH),
            )
            for a in found
        ],
        frozenset({"id", "age"}),
    )


@activity.command("prune", short_help="Delete old activities.")
@click.option(
    "--older-than",
    required=True,
    type=DURATION,
    help="Delete what is older than this (30d, 12h...).",
)
@JSON_OPTION
def activity_prune(older_than: timedelta, as_json: bool) -> None:
    """Delete activities older than --older-than; print how many."""
    with open_store() as store:
        deleted = store.activities.prune(older_than=older_than)
    if as_json:
        click.echo(json_text({"deleted": deleted}))
    else:
        click.echo(f"deleted {deleted}")


# ---------------------------------------------------------------- lease


@cli.group(invoke_without_command=True)
@click.pass_context
def lease(ctx: click.Context) -> None:
    """Leases: reserve a resource (a file, a build slot, a port) for a while.

    An exclusive lease excludes every other holder; shared leases (--shared) exclude only
    exclusive ones. The database refuses a second holder; an expired lease frees the resource
    by itself. `acquire` prints the TOKEN that `renew` and `release` take.
    """
    show_help_without_command(ctx)


TTL_OPTION = click.option(
    "--ttl",
    default="60",
    show_default=True,
    type=SECONDS,
    help="How long: seconds, or 30s, 10m, 2h (at most a day).",
)


@lease.command("acquire", short_help="Lease a resource; print the token.")
@click.argument("holder")
@click.argument("resource")
@TTL_OPTION
@click.option("--shared", is_flag=True, help="A shared lease (default: exclusive).")
@JSON_OPTION
def lease_acquire(
    holder: str, resource: str, ttl: timedelta | float, shared: bool, as_json: bool
) -> None:
    """Lease RESOURCE to HOLDER for --ttl. Prints the TOKEN alone on the first line; refused
    (held by someone else): exit status 1, naming the holder."""
    with open_store() as store:
        got = store.leases.acquire(holder, resource, ttl=ttl, exclusive=not shared)
    if as_json:
        click.echo(json_text(got, indent=2))
        return
    click.echo(got.token)
    mode = "exclusive" if got.exclusive else "shared"
    click.echo(f"{got.resource}: {mode} lease of {got.holder} until {_until(got.expires_at)}")


@lease.command("renew", short_help="Extend a live lease.")
@click.argument("resource")
@click.argument("token")
@TTL_OPTION
@JSON_OPTION
def lease_renew(resource: str, token: str, ttl: timedelta | float, as_json: bool) -> None:
    """Make the lease on RESOURCE (TOKEN) end --ttl from now (it must still be live)."""
    with open_store() as store:
        got = store.leases.renew((resource, token), ttl)
    if as_json:
        click.echo(json_text(got, indent=2))
    else:
        click.echo(f"{got.resource}: lease of {got.holder} until {_until(got.expires_at)}")


@lease.command("release", short_help="End a lease.")
@click.argument("resource")
@click.argument("token")
@JSON_OPTION
def lease_release(resource: str, token: str, as_json: bool) -> None:
    """End the lease on RESOURCE (TOKEN); idempotent (says when it had already ended)."""
    with open_store() as store:
        was_live = store.leases.release((resource, token))
    if as_json:
        click.echo(json_text({"resource": resource, "released": was_live}))
    elif was_live:
        click.echo(f"released {resource}")
    else:
        click.echo(f"the lease on {resource} had already ended")


@lease.command("force-release", short_help="End every lease on a resource (admin).")
@click.argument("resource")
@JSON_OPTION
def lease_force_release(resource: str, as_json: bool) -> None:
    """End every lease on RESOURCE, whoever holds it; print how many were live."""
    with open_store() as store:
        ended = store.leases.force_release(resource)
    if as_json:
        click.echo(json_text({"resource": resource, "ended": ended}))
    else:
        click.echo(f"ended {ended} live lease(s) on {resource}")


@lease.command("held", short_help="Live leases (under a prefix).")
@click.argument("prefix", default="")
@click.option("--holder", metavar="NAME", default=None, help="Only this identity's leases.")
@JSON_OPTION
def lease_held(prefix: str, holder: str | None, as_json: bool) -> None:
    """List live leases whose resource starts with PREFIX (literally), by resource."""
    with open_store() as store:
        found = store.leases.held(prefix, holder=holder)
    if as_json:
        click.echo(json_text(found, indent=2))
    elif found:
        _echo_leases(found)
    else:
        click.echo("no live leases")
