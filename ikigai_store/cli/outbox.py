"""CLI ``outbox`` commands: list, drain, clear, stats of the offline outbox.

``mail send``, ``mail reply`` and ``topic publish`` queue their operation in the outbox when
the database cannot be reached; every command that opens the store delivers what waits there
first. ``list``, ``clear`` and ``stats`` only read the local file (they work offline); ``drain``
connects.
"""

from __future__ import annotations

import click

from ..models import PendingOperation
from .app import cli
from .common import JSON_OPTION, open_outbox, open_store, show_help_without_command
from .render import age, echo_table, json_text, one_line


def _what(op: PendingOperation) -> str:
    """One line saying what the operation does."""
    p = op.payload
    if op.operation == "send":
        to = p["to"] if isinstance(p["to"], list) else [p["to"]]
        return f"to {', '.join(map(str, to))}: {p['subject'] or p['body']}"
    if op.operation == "reply":
        return f"reply to mail {p['mail_id']}: {p['body']}"
    if op.operation == "publish":
        return f"to topic {p['topic']}: {p['subject'] or p['body']}"
    return "heartbeat"


@cli.group("outbox", invoke_without_command=True)
@click.pass_context
def outbox(ctx: click.Context) -> None:
    """The offline outbox: mail waiting for the database (see the global --outbox option).

    An operation is pending until delivered (with its idempotency key, so never twice),
    failed (the store refused it: unknown recipient, ...), or expired (older than 7 days).
    """
    show_help_without_command(ctx)


@outbox.command("list", short_help="List queued operations, oldest first.")
@click.option("--all", "show_all", is_flag=True, help="Also delivered, failed and expired ones.")
@JSON_OPTION
def outbox_list(show_all: bool, as_json: bool) -> None:
    """List the operations waiting in the outbox, oldest first (--all: finished ones too)."""
    ops = open_outbox().list(include_finished=show_all)
    if as_json:
        click.echo(json_text(ops, indent=2))
        return
    if not ops:
        click.echo("the outbox is empty" if show_all else "nothing queued")
        return
    rows = [
        (
            op.idempotency_key,
            op.status,
            op.sender,
            one_line(_what(op), 50),
            age(op.created_at),
            str(op.attempts),
            one_line(op.last_error or "", 40),
        )
        for op in ops
    ]
    echo_table(("KEY", "STATUS", "FROM", "WHAT", "AGE", "TRIES", "LAST ERROR"), rows)


@outbox.command("drain", short_help="Deliver the queued operations now.")
@JSON_OPTION
def outbox_drain(as_json: bool) -> None:
    """Deliver the waiting operations to the database, oldest first, and say what happened."""
    with open_store(drain=False) as store:
        report = open_outbox().drain(store)
    if as_json:
        click.echo(json_text(report, indent=2))
        return
    click.echo(
        f"{report.delivered} delivered, {report.failed} failed, {report.expired} expired, "
        f"{report.pending} still queued"
    )


@outbox.command("clear", short_help="Forget finished operations (--all: everything).")
@click.option(
    "--all", "everything", is_flag=True, help="Also drop undelivered operations (they are lost)."
)
def outbox_clear(everything: bool) -> None:
    """Delete delivered, failed and expired operations from the outbox; with --all, also the
    ones still waiting, which are then never delivered."""
    cleared = open_outbox().clear(everything=everything)
    click.echo(f"{cleared} operation{'s' if cleared != 1 else ''} cleared")


@outbox.command("stats", short_help="Count operations by status.")
@JSON_OPTION
def outbox_stats(as_json: bool) -> None:
    """How many operations the outbox holds in each status, and where its file is."""
    box = open_outbox()
    stats = box.stats()
    if as_json:
        click.echo(json_text({"path": str(box.path), **stats}, indent=2))
        return
    click.echo(f"outbox {box.path}")
    for status, count in stats.items():
        click.echo(f"  {status:<10} {count}")
