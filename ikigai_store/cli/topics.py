"""CLI ``topic`` commands: create, list, delete, subscribe, unsubscribe, publish, publish-many,
poll, read,
commit, claim, complete, release, extend, dead, requeue, retention.

A broadcast topic is a log every subscriber reads by offset (``poll``/``commit``); a queue
topic's messages are claimed by one subscriber at a time under a lease. ``publish`` prints the
mail id alone on its first line; ``claim`` prints ``MAIL_ID TOKEN`` alone on its first line, the
pair that ``complete``, ``release`` and ``extend`` take.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import click

from ..models import PRIORITIES, Mail, Queued, TopicInfo
from .app import TextArgs, cli
from .common import (
    JSON_OPTION,
    deliver_or_queue,
    echo_queued,
    open_store,
    show_help_without_command,
    text_or_stdin,
)
from .params import DURATION, JSON
from .render import age, echo_table, iso, json_text, subject_line


def _echo_log(mails: Sequence[Mail], indent: str = "") -> None:
    echo_table(
        ("offset", "id", "from", "age", "subject"),
        [
            (str(m.log_offset), str(m.id), m.sender, age(m.created_at), subject_line(m))
            for m in mails
        ],
        frozenset({"offset", "id", "age"}),
        indent,
    )


@cli.group(invoke_without_command=True)
@click.pass_context
def topic(ctx: click.Context) -> None:
    """Broadcast topics read by offset, and work queues with leases.

    Offsets are gapless and committed in order; a consumer's position is stored on the server
    (`poll`, then `commit`). A queue message is held by one claimer at a time; `claim` prints
    MAIL_ID TOKEN for `complete`, `release` and `extend`.
    """
    show_help_without_command(ctx)


@topic.command("create", short_help="Create a broadcast or queue topic.")
@click.argument("name")
@click.option("--queue", is_flag=True, help="A work queue (default: broadcast).")
@click.option(
    "--retention",
    default="7d",
    show_default=True,
    type=DURATION,
    help="How long mail is kept (30m, 12h, 7d...).",
)
@click.option("--max-attempts", type=int, default=5, show_default=True, help="Queue claims.")
@click.option(
    "--searchable/--unsearchable",
    default=True,
    show_default=True,
    help="Index its mail for full-text search (--unsearchable: publishing skips parsing it).",
)
@JSON_OPTION
def topic_create(
    name: str,
    queue: bool,
    retention: timedelta,
    max_attempts: int,
    searchable: bool,
    as_json: bool,
) -> None:
    """Create topic NAME."""
    with open_store() as store:
        made = store.topics.create(
            name,
            "queue" if queue else "broadcast",
            retention=retention,
            max_attempts=max_attempts,
            searchable=searchable,
        )
        info = next(i for i in store.topics.list() if i.topic.id == made.id)
    if as_json:
        click.echo(json_text(info, indent=2))
    else:
        click.echo(f"{made.name} ({made.kind})")


@topic.command("list", short_help="List topics: subscribers, messages, offsets, queue counts.")
@JSON_OPTION
def topic_list(as_json: bool) -> None:
    """List every topic; for a queue, its available messages (delayed ones too, before they
    are due), claimed ones and dead letters."""
    with open_store() as store:
        infos = store.topics.list()
    if as_json:
        click.echo(json_text(infos, indent=2))
        return
    if not infos:
        click.echo("no topics")
        return

    def queue(i: TopicInfo, n: int) -> str:
        return str(n) if i.topic.kind == "queue" else "-"

    echo_table(
        ("name", "kind", "subscribers", "messages", "last offset", "available", "claimed", "dead"),
        [
            (
                i.topic.name,
                i.topic.kind,
                str(i.subscribers),
                str(i.messages),
                str(i.last_offset),
                queue(i, i.available),
                queue(i, i.claimed),
                queue(i, i.dead),
            )
            for i in infos
        ],
        frozenset({"subscribers", "messages", "last offset", "available", "claimed", "dead"}),
    )


@topic.command("delete", short_help="Delete a topic and its log.")
@click.argument("name")
def topic_delete(name: str) -> None:
    """Delete topic NAME and its whole log (refused while a queue has open work)."""
    with open_store() as store:
        store.topics.delete(name)
    click.echo(f"deleted {name}")


@topic.command("subscribe", short_help="Subscribe an identity (creates a missing topic).")
@click.argument("identity")
@click.argument("name")
def topic_subscribe(identity: str, name: str) -> None:
    """Subscribe IDENTITY to topic NAME (a missing topic is created as broadcast)."""
    with open_store() as store:
        store.topics.subscribe(identity, name)
    click.echo(f"{identity} subscribed to {name}")


@topic.command("unsubscribe", short_help="Unsubscribe an identity.")
@click.argument("identity")
@click.argument("name")
def topic_unsubscribe(identity: str, name: str) -> None:
    """Unsubscribe IDENTITY from topic NAME (its stored offset is kept)."""
    with open_store() as store:
        store.topics.unsubscribe(identity, name)
    click.echo(f"{identity} unsubscribed from {name}")


@topic.command("publish", cls=TextArgs, short_help="Publish a mail and print its id.")
@click.argument("name")
@click.argument("body")
@click.option("--from", "sender", metavar="NAME", required=True, help="The sending identity.")
@click.option("--subject", "-s", default="", help="The subject line.")
@click.option(
    "--priority", "-p", type=click.Choice(PRIORITIES), default="normal", show_default=True
)
@click.option("--metadata", type=JSON, metavar="JSON", default=None, help="Metadata, as JSON text.")
@click.option("--idempotency-key", default=None, help="Publishing again with it is a no-op.")
@click.option(
    "--delay",
    type=DURATION,
    default=None,
    help="A queue's message: claimable only after this (30s, 5m, 2h...).",
)
@JSON_OPTION
def topic_publish(
    name: str,
    body: str,
    sender: str,
    subject: str,
    priority: str,
    metadata: Any,
    idempotency_key: str | None,
    delay: timedelta | None,
    as_json: bool,
) -> None:
    """Publish BODY (`-`: standard input) to topic NAME; print the mail id, then its offset."""
    payload = {
        "sender": sender,
        "topic": name,
        "subject": subject,
        "body": text_or_stdin(body),
        "priority": priority,
        "metadata": metadata,
    }
    if delay is not None:  # queued in the outbox, it counts from the delivery
        payload["delay"] = delay.total_seconds()
    sent = deliver_or_queue("publish", payload, idempotency_key)
    if isinstance(sent, Queued):
        echo_queued(sent, as_json)
        return
    if as_json:
        click.echo(json_text(sent, indent=2))
        return
    click.echo(str(sent.id))
    click.echo(f"offset {sent.log_offset} of {name}, to {', '.join(sent.to) or 'the queue'}")


@topic.command("publish-many", short_help="Publish one mail per line of standard input.")
@click.argument("name")
@click.option("--from", "sender", metavar="NAME", required=True, help="The sending identity.")
@click.option("--subject", "-s", default="", help="The subject line of every mail.")
@click.option(
    "--priority", "-p", type=click.Choice(PRIORITIES), default="normal", show_default=True
)
@click.option("--metadata", type=JSON, metavar="JSON", default=None, help="Metadata, as JSON text.")
@click.option(
    "--delay",
    type=DURATION,
    default=None,
    help="A queue's message: claimable only after this (30s, 5m, 2h...).",
)
@click.option(
    "--idempotency-key",
    default=None,
    help="Publishing the same batch again with it is a no-op; another batch with it, an error.",
)
@JSON_OPTION
def topic_publish_many(
    name: str,
    sender: str,
    subject: str,
    priority: str,
    metadata: Any,
    delay: timedelta | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Publish each line of standard input as one mail to topic NAME (blank lines are
    skipped), in one statement (all or nothing; not queued in the outbox when the database is
    down); print each mail's id and offset. With --idempotency-key, running it again with the
    same input prints the same mails and writes nothing."""
    bodies = [line for line in text_or_stdin("-").splitlines() if line.strip()]
    if not bodies:
        raise click.ClickException("standard input holds no lines to publish")
    with open_store() as store:
        mails = store.mail.publish_many(
            sender,
            name,
            bodies,
            subject=subject,
            priority=priority,
            metadata=metadata,
            delay=delay,
            idempotency_key=idempotency_key,
        )
    if as_json:
        click.echo(json_text(mails, indent=2))
        return
    for m in mails:
        click.echo(f"{m.id} offset {m.log_offset}")


@topic.command("poll", short_help="Unread inbox and new topic mail, in one round trip.")
@click.argument("identity")
@click.option("--limit", "-n", type=int, default=100, show_default=True, help="Per topic.")
@click.option("--commit", is_flag=True, help="Then commit each topic's last offset shown.")
@JSON_OPTION
def topic_poll(identity: str, limit: int, commit: bool, as_json: bool) -> None:
    """Show IDENTITY's unread inbox and, per subscribed broadcast topic, the mail after its
    stored offset (--commit moves the offsets past what was shown)."""
    with open_store() as store:
        polled = store.topics.poll(identity, limit=limit)
        if commit:
            for name, mails in polled.topics.items():
                if mails and mails[-1].log_offset is not None:
                    store.topics.commit(identity, name, mails[-1].log_offset)
    if as_json:
        click.echo(json_text(polled, indent=2))
        return
    click.echo(f"{identity}: {len(polled.inbox)} unread in the inbox")
    for name, mails in polled.topics.items():
        click.echo(f"{name}: {len(mails)} new after offset {polled.offsets[name]}")
        if mails:
            _echo_log(mails, "  ")


@topic.command("read", short_help="A topic's log by offset.")
@click.argument("name")
@click.option("--after", type=int, default=0, show_default=True, help="Start after OFFSET.")
@click.option("--limit", "-n", type=int, default=100, show_default=True)
@JSON_OPTION
def topic_read(name: str, after: int, limit: int, as_json: bool) -> None:
    """Print topic NAME's log after --after, in offset order."""
    with open_store() as store:
        mails = store.topics.read(name, after=after, limit=limit)
    if as_json:
        click.echo(json_text(mails, indent=2))
    elif mails:
        _echo_log(mails)
    else:
        click.echo(f"nothing after offset {after}")


@topic.command("commit", short_help="Store a consumer's offset (monotone).")
@click.argument("identity")
@click.argument("name")
@click.argument("offset", type=int)
def topic_commit(identity: str, name: str, offset: int) -> None:
    """Store that IDENTITY processed topic NAME up to OFFSET; print the stored offset."""
    with open_store() as store:
        click.echo(str(store.topics.commit(identity, name, offset)))


@topic.command("claim", short_help="Claim a queue message; print MAIL_ID TOKEN.")
@click.argument("identity")
@click.argument("name")
@click.option(
    "--ttl",
    "--lease",
    "lease",
    type=float,
    default=30.0,
    show_default=True,
    help="The lease length, in seconds (--lease: the 0.5 name).",
)
@click.option("--wait", type=float, default=0.0, show_default=True, help="Seconds to wait.")
@JSON_OPTION
def topic_claim(identity: str, name: str, lease: float, wait: float, as_json: bool) -> None:
    """Claim the oldest available message of queue NAME for IDENTITY. Prints MAIL_ID TOKEN on
    the first line, then the message. Exit status 1 when there is none (after --wait)."""
    with open_store() as store:
        held = store.topics.claim(identity, name, ttl=lease, wait=wait)
    if held is None:
        raise click.ClickException(f"nothing to claim in {name}")
    if as_json:
        click.echo(json_text(held, indent=2))
        return
    click.echo(f"{held.mail.id} {held.token}")
    click.echo(f"attempt {held.attempt}, lease until {iso(held.lease_until)}")
    click.echo(f"Subject: {held.mail.subject}")
    click.echo()
    click.echo(held.mail.body)


@topic.command("complete", short_help="Finish a claimed message.")
@click.argument("mail_id", type=int)
@click.argument("token")
def topic_complete(mail_id: int, token: str) -> None:
    """Finish the message MAIL_ID claimed with TOKEN."""
    with open_store() as store:
        store.topics.complete((mail_id, token))
    click.echo(f"completed {mail_id}")


@topic.command("release", short_help="Give a claimed message back.")
@click.argument("mail_id", type=int)
@click.argument("token")
@click.option("--error", default=None, help="Why it failed.")
@click.option(
    "--delay", type=DURATION, default=None, help="Claimable again only after this (a backoff)."
)
def topic_release(mail_id: int, token: str, error: str | None, delay: timedelta | None) -> None:
    """Release MAIL_ID (claimed with TOKEN): claimable again, or a dead letter."""
    with open_store() as store:
        state = store.topics.release((mail_id, token), error=error, delay=delay)
    click.echo(f"released {mail_id}: {state}")


@topic.command("extend", short_help="Renew a claim's lease.")
@click.argument("mail_id", type=int)
@click.argument("token")
@click.option(
    "--ttl",
    "--lease",
    "lease",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds from now (--lease: the 0.5 name).",
)
def topic_extend(mail_id: int, token: str, lease: float) -> None:
    """Renew the lease of MAIL_ID (claimed with TOKEN)."""
    with open_store() as store:
        held = store.topics.extend((mail_id, token), lease)
    click.echo(f"lease of {mail_id} until {iso(held.lease_until)}")


@topic.command("dead", short_help="A queue's dead letters.")
@click.argument("name")
@JSON_OPTION
def topic_dead(name: str, as_json: bool) -> None:
    """List queue NAME's dead letters (they used all their attempts)."""
    with open_store() as store:
        dead = store.topics.dead_letters(name)
    if as_json:
        click.echo(json_text(dead, indent=2))
    elif dead:
        echo_table(
            ("id", "attempts", "subject", "last error"),
            [
                (str(d.mail.id), str(d.attempts), subject_line(d.mail), d.last_error or "")
                for d in dead
            ],
            frozenset({"id", "attempts"}),
        )
    else:
        click.echo("no dead letters")


@topic.command("requeue", short_help="Make a dead letter claimable again.")
@click.argument("mail_id", type=int)
def topic_requeue(mail_id: int) -> None:
    """Make dead letter MAIL_ID claimable again."""
    with open_store() as store:
        store.topics.requeue(mail_id)
    click.echo(f"requeued {mail_id}")


@topic.command("retention", short_help="Apply every topic's retention now.")
@JSON_OPTION
def topic_retention(as_json: bool) -> None:
    """Delete topic mail older than its topic's retention (see the documentation's "Topics
    and work queues" for what is kept)."""
    with open_store() as store:
        deleted = store.topics.prune()
    if as_json:
        click.echo(json_text(deleted, indent=2))
    else:
        for name, count in deleted.items():
            click.echo(f"{name}: {count} deleted")
