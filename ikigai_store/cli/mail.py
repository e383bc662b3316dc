"""CLI ``mail`` commands: send, reply, inbox, read, ack, star, snooze, archive, trash, mark,
thread, search, prune, wait.

Mail goes between identities (``ikigai-store identity``); each recipient holds its own copy in
a state (unread, read, starred, snoozed, archived, trash) that moves only along the allowed
transitions. ``send`` and ``reply`` print the new mail's id alone on their first line.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import click

from ..mail import MAX_SUBJECT_CHARS
from ..models import MAIL_STATES, PRIORITIES, InboxItem, Mail, Queued
from .app import TextArgs, cli
from .common import (
    JSON_OPTION,
    deliver_or_queue,
    echo_queued,
    open_store,
    show_help_without_command,
    text_or_stdin,
)
from .params import DURATION, FROM_NOW, JSON
from .render import (
    age,
    counts_line,
    echo_body,
    echo_inbox,
    echo_table,
    echo_thread,
    json_text,
    one_line,
    subject_line,
    when,
)

# ---------------------------------------------------------------- rendering


def _echo_item(item: InboxItem) -> None:
    """A mail as its recipient sees it: the headers, a blank line, the body verbatim."""
    m = item.mail
    state = item.state
    if item.snoozed_until is not None:
        state += f" until {when(item.snoozed_until)}"
    if item.acked_at is not None:
        state += f", acked {when(item.acked_at)}"
    fields = [
        ("mail", str(m.id)),
        ("thread", m.thread_id),
        ("reply to", None if m.parent_id is None else f"#{m.parent_id}"),
        ("from", m.sender),
        ("to", ", ".join(m.to)),
        ("subject", subject_line(m, MAX_SUBJECT_CHARS)),
        ("priority", m.priority),
        ("date", f"{when(m.created_at)} ({age(m.created_at)} ago)"),
        ("deadline", None if m.deadline_at is None else when(m.deadline_at)),
        ("state", state),
        ("attachments", None if m.attachments is None else json_text(m.attachments)),
        ("metadata", None if m.metadata is None else json_text(m.metadata)),
    ]
    for label, value in fields:
        if value is not None:
            click.echo(f"{label + ':':<13}{value}")
    click.echo()
    echo_body(m.body)


def _echo_sent(m: Mail | Queued, as_json: bool) -> None:
    if isinstance(m, Queued):
        echo_queued(m, as_json)
        return
    if as_json:
        click.echo(json_text(m, indent=2))
        return
    click.echo(m.id)
    click.echo(f"thread {m.thread_id}, to {', '.join(m.to)}")


def _echo_state(name: str, item: InboxItem, as_json: bool) -> None:
    if as_json:
        click.echo(json_text(item, indent=2))
        return
    state = item.state
    if item.snoozed_until is not None:
        state += f" until {when(item.snoozed_until)}"
    if item.acked_at is not None:
        state += f" (acked {when(item.acked_at)})"
    click.echo(f"mail {item.mail.id} for {name}: {state}")


# ---------------------------------------------------------------- mail

PRIORITY_OPTION = click.option(
    "--priority",
    "-p",
    type=click.Choice(PRIORITIES),
    default="normal",
    show_default=True,
    help="How urgent the mail is.",
)
METADATA_OPTION = click.option(
    "--metadata",
    type=JSON,
    metavar="JSON",
    default=None,
    help="Structured metadata, as JSON text.",
)
KEY_OPTION = click.option(
    "--idempotency-key",
    metavar="KEY",
    default=None,
    help="Send at most once: the same request with this key again prints the original mail; "
    "a different request with a used key is an error.",
)


@cli.group(invoke_without_command=True)
@click.pass_context
def mail(ctx: click.Context) -> None:
    """Send, read and manage mail between identities.

    Each recipient holds its own copy of a mail in one state: unread, read, starred, snoozed,
    archived or trash. A snooze whose time has passed is unread again. Allowed moves:

    \b
      unread   -> read, starred, snoozed, archived, trash
      read     -> unread, starred, snoozed, archived, trash
      starred  -> read, archived, trash
      snoozed  -> unread, read, snoozed (again), trash
      archived -> read, trash
      trash    -> unread
    """
    show_help_without_command(ctx)


@mail.command(
    "send",
    cls=TextArgs,
    short_help="Send a mail and print its id.",
    epilog="Examples:\n\n"
    "\b\n"
    "  ikigai-store mail send --from alice --to bob -s 'Build broken' 'main fails since #41'\n"
    "  make test 2>&1 | ikigai-store mail send --from ci --to alice --to bob -s 'tests' -\n"
    "  ikigai-store mail send --from alice --to bob --thread T -p urgent 'ping'",
)
@click.argument("body")
@click.option("--from", "sender", metavar="NAME", required=True, help="The sending identity.")
@click.option(
    "--to",
    "to",
    metavar="NAME",
    multiple=True,
    required=True,
    help="A recipient (repeat for several).",
)
@click.option("--subject", "-s", default="", help="The subject line.")
@PRIORITY_OPTION
@click.option(
    "--thread",
    "thread_id",
    metavar="THREAD_ID",
    default=None,
    help="Add to this thread (default: a new thread, or the --parent's).",
)
@click.option(
    "--parent", "parent_id", metavar="MAIL_ID", type=int, default=None, help="In reply to."
)
@click.option(
    "--deadline",
    type=FROM_NOW,
    default=None,
    metavar="WHEN",
    help="A deadline: an ISO-8601 time (local without an offset), or a duration from now (2h).",
)
@click.option(
    "--attachments", type=JSON, metavar="JSON", default=None, help="Attachments, as JSON text."
)
@METADATA_OPTION
@KEY_OPTION
@JSON_OPTION
def mail_send(
    body: str,
    sender: str,
    to: tuple[str, ...],
    subject: str,
    priority: str,
    thread_id: str | None,
    parent_id: int | None,
    deadline: datetime | None,
    attachments: Any,
    metadata: Any,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Send BODY (markdown) from one identity to one or more others; print the mail's id alone
    on the first line, then its thread.

    BODY `-` reads standard input (stored verbatim). All recipients get the mail, or none does
    (an unknown or retired recipient is an error and nothing is sent).
    """
    payload = {
        "sender": sender,
        "to": list(to),
        "subject": subject,
        "body": text_or_stdin(body),
        "thread_id": thread_id,
        "parent_id": parent_id,
        "priority": priority,
        "deadline_at": deadline,
        "attachments": attachments,
        "metadata": metadata,
    }
    _echo_sent(deliver_or_queue("send", payload, idempotency_key), as_json)


@mail.command("reply", cls=TextArgs, short_help="Reply to a mail's thread and print its id.")
@click.argument("mail_id", metavar="MAIL_ID", type=int)
@click.argument("body")
@click.option("--from", "sender", metavar="NAME", required=True, help="The replying identity.")
@click.option("--subject", "-s", default=None, help='The subject (default: "Re: <subject>").')
@PRIORITY_OPTION
@METADATA_OPTION
@KEY_OPTION
@JSON_OPTION
def mail_reply(
    mail_id: int,
    body: str,
    sender: str,
    subject: str | None,
    priority: str,
    metadata: Any,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Reply to MAIL_ID with BODY (`-` reads standard input); print the reply's id alone on the
    first line, then its thread.

    The reply goes to everyone who sent or received mail in the thread, except the replier and
    retired identities. The replier must have sent or received MAIL_ID.
    """
    payload = {
        "sender": sender,
        "mail_id": mail_id,
        "body": text_or_stdin(body),
        "subject": subject,
        "priority": priority,
        "metadata": metadata,
    }
    _echo_sent(deliver_or_queue("reply", payload, idempotency_key), as_json)


@mail.command("inbox", short_help="List an identity's mail, newest first.")
@click.argument("name")
@click.option(
    "--state",
    type=click.Choice(MAIL_STATES),
    default=None,
    help="Only mail in this state (snoozed: the sleeping ones).",
)
@click.option(
    "--priority", "-p", type=click.Choice(PRIORITIES), default=None, help="Only this priority."
)
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="How many to list.")
@click.option(
    "--before", "before_id", metavar="MAIL_ID", type=int, default=None, help="Older than this id."
)
@JSON_OPTION
def mail_inbox(
    name: str,
    state: str | None,
    priority: str | None,
    limit: int,
    before_id: int | None,
    as_json: bool,
) -> None:
    """List NAME's mail, newest first, under a line of counts. `*` marks unread mail.

    Default: unread, read and starred mail (archived, trash and sleeping snoozes are hidden).
    When the page is full, the last line tells the --before id of the next page.
    """
    with open_store() as store:
        items = store.mail.inbox(
            name, state=state, priority=priority, limit=limit, before=before_id
        )
        counts = store.mail.counts(name)
    if as_json:
        doc = {"identity": name, "counts": counts, "items": items}
        click.echo(json_text(doc, indent=2))
        return
    click.echo(counts_line(name, counts))
    echo_inbox(items)
    if len(items) == limit:
        click.echo(f"more: --before {items[-1].mail.id}")


@mail.command("read", short_help="Show a mail (an unread one becomes read).")
@click.argument("name")
@click.argument("mail_id", metavar="MAIL_ID", type=int)
@JSON_OPTION
def mail_read(name: str, mail_id: int, as_json: bool) -> None:
    """Show mail MAIL_ID as NAME received it: headers, then the body verbatim.

    An unread mail becomes read; any other state is kept.
    """
    with open_store() as store:
        item = store.mail.read(name, mail_id)
    if as_json:
        click.echo(json_text(item, indent=2))
        return
    _echo_item(item)


@mail.command("ack", short_help="Acknowledge a mail.")
@click.argument("name")
@click.argument("mail_id", metavar="MAIL_ID", type=int)
@JSON_OPTION
def mail_ack(name: str, mail_id: int, as_json: bool) -> None:
    """Acknowledge MAIL_ID for NAME: the first ack is recorded (again changes nothing) and an
    unread mail becomes read."""
    with open_store() as store:
        item = store.mail.ack(name, mail_id)
    _echo_state(name, item, as_json)


def _state_command(command: str, state: str, doc: str) -> None:
    """Register `mail COMMAND NAME MAIL_ID`, which moves the mail to ``state``."""

    @mail.command(command, help=doc, short_help=doc.split(" (")[0].rstrip(".") + ".")
    @click.argument("name")
    @click.argument("mail_id", metavar="MAIL_ID", type=int)
    @JSON_OPTION
    def run(name: str, mail_id: int, as_json: bool) -> None:
        with open_store() as store:
            item = store.mail.set_state(name, mail_id, state)
        _echo_state(name, item, as_json)


_state_command("star", "starred", "Star a mail (from unread or read).")
_state_command("archive", "archived", "Archive a mail (hidden from the default inbox).")
_state_command(
    "trash", "trash", "Move a mail to the trash (restore it with `mail mark ... unread`)."
)


@mail.command("mark", short_help="Move a mail to any state (unstar, unarchive, restore...).")
@click.argument("name")
@click.argument("mail_id", metavar="MAIL_ID", type=int)
@click.argument("state", type=click.Choice([s for s in MAIL_STATES if s != "snoozed"]))
@JSON_OPTION
def mail_mark(name: str, mail_id: int, state: str, as_json: bool) -> None:
    """Move NAME's copy of MAIL_ID to STATE, along the allowed moves (see `mail --help`):
    `read` unstars or unarchives, `unread` marks unread again or restores from the trash. To
    snooze, use `mail snooze`."""
    with open_store() as store:
        item = store.mail.set_state(name, mail_id, state)
    _echo_state(name, item, as_json)


@mail.command("snooze", short_help="Hide a mail until a later time.")
@click.argument("name")
@click.argument("mail_id", metavar="MAIL_ID", type=int)
@click.option(
    "--for",
    "for_",
    type=DURATION,
    metavar="DURATION",
    default=None,
    help="How long: 30s, 10m, 2h, 1d, 1h30m.",
)
@click.option(
    "--until",
    type=FROM_NOW,
    metavar="WHEN",
    default=None,
    help="Until when: an ISO-8601 date or time (2025-06-01T09:00+02:00, ...Z; local without "
    "an offset), or a duration from now (2h).",
)
@JSON_OPTION
def mail_snooze(
    name: str,
    mail_id: int,
    for_: timedelta | None,
    until: datetime | None,
    as_json: bool,
) -> None:
    """Snooze MAIL_ID for NAME (give --for or --until): it leaves the inbox and comes back as
    unread when the time has passed. Snoozing a snoozed mail again sets the new time."""
    if (for_ is None) == (until is None):
        raise click.ClickException("give either --for DURATION or --until WHEN")
    with open_store() as store:
        item = store.mail.set_state(
            name, mail_id, "snoozed", snoozed_until=until if for_ is None else for_
        )
    _echo_state(name, item, as_json)


@mail.command("thread", short_help="Show every mail of a thread, in order.")
@click.argument("thread_id", metavar="THREAD_ID")
@click.option(
    "--as",
    "identity",
    metavar="NAME",
    default=None,
    help="Only the mail NAME sent or received.",
)
@JSON_OPTION
def mail_thread(thread_id: str, identity: str | None, as_json: bool) -> None:
    """Show every mail of THREAD_ID in the order sent, bodies included. A thread with no mail
    at all is an error; with --as, NAME's part of it may be empty."""
    with open_store() as store:
        mails = store.mail.thread(thread_id, identity=identity)
        if not mails and (identity is None or not store.mail.thread(thread_id)):
            raise click.ClickException(f"thread {thread_id!r} has no mail")
    if as_json:
        click.echo(json_text(mails, indent=2))
        return
    if not mails:
        click.echo(f"{identity} sent or received no mail of thread {thread_id}")
        return
    click.echo(f"thread {thread_id}: {len(mails)} mail(s)")
    click.echo()
    echo_thread(mails)


@mail.command("search", cls=TextArgs, short_help="Full-text search of mail.")
@click.argument("query")
@click.option(
    "--as", "identity", metavar="NAME", default=None, help="Only mail NAME sent or received."
)
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="Most hits to show.")
@click.option(
    "--order",
    type=click.Choice(["rank", "recent"]),
    default="rank",
    show_default=True,
    help="rank: best of the newest 1000 matches first; recent: newest first.",
)
@JSON_OPTION
def mail_search(query: str, identity: str | None, limit: int, order: str, as_json: bool) -> None:
    """Full-text search of mail subjects (weighted higher) and bodies: the best matches among
    the newest 1000 (exact phrases first), or with --order recent the newest matches first.

    QUERY uses web-search syntax: "quoted phrase", `or`, -excluded; it may start with '-'.
    Matches in the snippet are shown in [brackets]. A query with no searchable word (only stop
    words such as "the") is an error: it could match nothing.
    """
    with open_store() as store:
        hits = store.mail.search(query, identity=identity, limit=limit, order=order)
        if not hits and not store.search_terms(query):
            raise click.ClickException(
                f"the query {query!r} has no searchable word (only stop words such as 'the', "
                "or punctuation): nothing to search"
            )
    if as_json:
        click.echo(json_text(hits, indent=2))
        return
    if not hits:
        click.echo("no matches")
        return
    echo_table(
        ("rank", "id", "from", "snippet"),
        [(f"{h.rank:.3f}", str(h.mail.id), h.mail.sender, one_line(h.snippet)) for h in hits],
        frozenset({"rank", "id"}),
    )


@mail.command("prune", short_help="Delete mail long in the trash; print how many.")
@click.option(
    "--older-than",
    default="30d",
    show_default=True,
    type=DURATION,
    help="Time in the trash (30m, 12h, 30d...).",
)
@JSON_OPTION
def mail_prune(older_than: timedelta, as_json: bool) -> None:
    """Delete the recipients' copies that have been in the trash longer than --older-than
    (only the copies: the other recipients keep theirs), and forget dead ``mail wait``
    registrations; print how many copies were deleted. Topic mail has its own retention
    (``topic retention``)."""
    with open_store() as store:
        deleted = store.mail.prune(older_than=older_than)
    if as_json:
        click.echo(json_text({"deleted": deleted}))
    else:
        click.echo(str(deleted))


@mail.command("wait", short_help="Wait for a mail to arrive, then print it.")
@click.argument("name")
@click.option(
    "--timeout",
    "-t",
    type=click.FloatRange(0, 86400),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait (0: only check).",
)
@JSON_OPTION
def mail_wait(name: str, timeout: float, as_json: bool) -> None:
    """Print NAME's oldest unread mail (marked read), waiting up to --timeout seconds for one.

    Returns within milliseconds of the sender's commit (no polling). Concurrent waiters never
    get the same mail. Exit status: 0 when a mail was printed; 1 when none came in time, with
    "Error: no mail for NAME within N s" on standard error and nothing on standard output (bad
    input also exits 1).
    """
    with open_store() as store:
        item = store.mail.wait(name, timeout)
    if item is None:
        raise click.ClickException(f"no mail for {name} within {timeout:g} s")
    if as_json:
        click.echo(json_text(item, indent=2))
        return
    _echo_item(item)
