"""Agent mail: direct mail with threads and a guarded per-recipient state machine (seed 004).

Owns sending, replying, mailboxes, state changes, threads, search and the building blocks of
``wait``, for both faces (see ``ops``). Invariants:
- a send is one statement: the mail row and every recipient row, or nothing; an unknown or
  retired sender or recipient writes nothing;
- an idempotency key is unique per sender: the same request again returns the original mail
  and writes nothing, a different request with a used key raises ``Conflict`` (compared by a
  hash of the request stored with the mail), all inside the insert's own statement;
- a recipient's state moves only along ``TRANSITIONS``, checked by the UPDATE itself (``WHERE
  state = ANY(allowed sources)``), so two racing callers cannot both make an illegal move;
  illegal moves raise ``InvalidArgument`` and change nothing;
- a snooze whose time has passed is unread everywhere (inbox, counts, wait, transitions) with no
  background job (the ``mailbox`` view); ``wake_snoozed`` only materialises it;
- order is ``mail.id``, never a timestamp; thread operations and counts are single statements;
- ``wait`` (outside ``store.transaction()``, with a timeout) registers in ``mail_waiters``
  (migration 0026) once it found nothing, and a send hands its mail to the oldest live waiter of
  each recipient in the send's own statement (the row is inserted read: one durable commit, the
  sender's); whoever deletes a registration owns its hand-off: the waiter returns it, or the
  reaper (the start of ``wait``, ``prune``) makes it unread again once the registration is dead
  (its store's listener connection gone, or expired). A mail ``wait`` returns was marked read by
  a durable commit; one handed to a process that dies before taking it becomes unread again.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from . import topics
from .errors import IkigaiStoreError, InvalidArgument, NotFound
from .models import (
    MAIL_STATES,
    PRIORITIES,
    Identity,
    InboxItem,
    Mail,
    MailCounts,
    MailHit,
)
from .notify import MAIL as MAIL_CHANNEL
from .notify import Handoff
from .ops import (
    Area,
    Collect,
    Expect,
    FaceT,
    Listen,
    Liveness,
    Op,
    Sleep,
    atomic,
    many,
    one,
    operation,
    queued,
    statement,
)
from .search import MAX_SEARCH_LIMIT, Queries, check_before, check_order, check_query, ranked
from .validate import (
    MAX_DURATION,
    MAX_SUBJECT_CHARS,
    by_key,
    check_body,
    check_choice,
    check_cursor,
    check_duration,
    check_id,
    check_key,
    check_limit,
    check_str,
    check_when,
    dump_json,
    identity_name,
    request_hash,
    require,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "MAX_DURATION",
    "MAX_RECIPIENTS",
    "MAX_SUBJECT_CHARS",
    "MAX_WAIT",
    "TRANSITIONS",
    "MailCalls",
    "ack",
    "claim_next",
    "counts",
    "delete_sent",
    "inbox",
    "prune",
    "read",
    "reply",
    "search",
    "send",
    "send_or_queue",
    "sent",
    "set_state",
    "set_thread_state",
    "thread",
    "wait",
    "wait_target",
    "wake_snoozed",
]

#: Where a recipient's mail may move from each state. Moving to the same state is refused,
#: except re-snoozing a sleeping snooze.
TRANSITIONS: dict[str, frozenset[str]] = {
    "unread": frozenset({"read", "starred", "snoozed", "archived", "trash"}),
    "read": frozenset({"unread", "starred", "snoozed", "archived", "trash"}),
    "starred": frozenset({"read", "archived", "trash"}),
    "snoozed": frozenset({"unread", "read", "snoozed", "trash"}),
    "archived": frozenset({"read", "trash"}),
    "trash": frozenset({"unread"}),
}
_SOURCES = {to: [s for s in MAIL_STATES if to in TRANSITIONS[s]] for to in MAIL_STATES}

#: Longest ``wait`` (a day).
MAX_WAIT = timedelta(days=1)
#: Most recipients of one mail.
MAX_RECIPIENTS = 10_000
#: How often set_state tries again when a concurrent change made its refused move legal.
_RACE_RETRIES = 3


# ---------------------------------------------------------------- validation


def _recipients(to: object) -> list[str]:
    """Distinct recipient names, sorted; a single name (or Identity) is one recipient."""
    if isinstance(to, str) or not isinstance(to, Iterable):
        items: list[object] = [to]
    else:
        items = list(to)
    if not items:
        raise InvalidArgument("to must name at least one recipient")
    if len(items) > MAX_RECIPIENTS:
        raise InvalidArgument(f"a mail has at most {MAX_RECIPIENTS} recipients (MAX_RECIPIENTS)")
    return sorted({identity_name(item, "recipient") for item in items})


# ---------------------------------------------------------------- sending


def send(
    sender: str | Identity,
    to: Sequence[str | Identity] | str | Identity,
    subject: str,
    body: str,
    *,
    thread_id: str | None = None,
    parent_id: int | None = None,
    priority: str = "normal",
    deadline_at: datetime | None = None,
    attachments: Any = None,
    metadata: Any = None,
    idempotency_key: str | None = None,
) -> Op[Mail]:
    """Send a mail to every identity in ``to`` (atomically: all recipients or none).

    Starts a new thread unless ``thread_id`` or ``parent_id`` (a mail of that thread) is
    given. ``NotFound`` (nothing written) for an unknown sender or recipient (naming the
    unknown recipients); ``InvalidArgument`` for a retired recipient or sender, bad priority, a
    naive ``deadline_at``, JSON that jsonb cannot hold. With ``idempotency_key`` (unique per
    sender), the same request again returns the original mail and writes nothing, while a
    different request with a used key raises ``Conflict``.
    """
    sender_name = identity_name(sender, "sender")
    names = _recipients(to)
    subject = check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_body(body)
    if thread_id is not None:
        check_key(thread_id, "thread_id")
    if parent_id is not None:
        check_id(parent_id, "parent_id")
    check_choice(priority, "priority", PRIORITIES)
    deadline = check_when(deadline_at, "deadline_at")
    if idempotency_key is not None:
        check_key(idempotency_key, "idempotency_key")
    attachments_json = dump_json(attachments, "attachments")
    metadata_json = dump_json(metadata, "metadata")
    hashed = None  # what a retry with the key must repeat (only a key's mail is compared)
    if idempotency_key is not None:
        hashed = request_hash(
            "send",
            names,
            subject,
            body,
            thread_id,
            parent_id,
            priority,
            None if deadline is None else deadline.timestamp(),
            attachments,
            metadata,
        )
    return (
        yield from _insert(
            sender_name,
            names,
            subject,
            body,
            thread_id=thread_id,
            parent_id=parent_id,
            priority=priority,
            deadline_at=deadline,
            attachments=attachments_json,
            metadata=metadata_json,
            idempotency_key=idempotency_key,
            request_hash=hashed,
        )
    )


def _insert(sender: str, names: list[str], subject: str, body: object, **fields: Any) -> Op[Mail]:
    row = yield one(
        "send_mail",
        sender=sender,
        recipients=names,
        subject=subject,
        body=body,
        new_thread_id=str(uuid.uuid4()),
        **fields,
    )
    if row is not None:
        return Mail.from_row(row)
    key = fields["idempotency_key"]
    if key is not None:
        existing = yield from by_key(sender, key, fields["request_hash"])
        if existing is not None:
            return existing
    why = yield one(
        "send_refusal",
        sender=sender,
        recipients=names,
        parent_id=fields["parent_id"],
    )
    if why["sender_state"] is None:
        raise NotFound(f"identity {sender!r} does not exist")
    if why["sender_state"] == "retired":
        raise InvalidArgument(f"identity {sender!r} is retired: it cannot send")
    if why["missing"]:
        raise NotFound(f"unknown recipient(s): {', '.join(why['missing'])}")
    if why["retired"]:
        raise InvalidArgument(f"retired recipient(s) cannot receive: {', '.join(why['retired'])}")
    parent = fields["parent_id"]
    if not why["parent_exists"]:
        raise InvalidArgument(f"parent mail {parent} does not exist")
    raise InvalidArgument(
        f"parent mail {parent} is in thread {why['parent_thread']!r}, not {fields['thread_id']!r}"
    )


@atomic
def reply(
    sender: str | Identity,
    mail_id: int,
    body: str,
    *,
    subject: str | None = None,
    priority: str = "normal",
    metadata: Any = None,
    idempotency_key: str | None = None,
) -> Op[Mail]:
    """Reply in the mail's thread (``parent_id=mail_id``) to every participant of the
    thread (senders and recipients) except the replier and retired identities.

    The subject defaults to ``Re: <subject>`` (never ``Re: Re:``). ``NotFound`` unless the
    sender sent or received ``mail_id``; ``InvalidArgument`` when no one is left to reply
    to. Idempotency keys as for ``send``.
    """
    sender_name = identity_name(sender, "sender")
    check_id(mail_id, "mail_id")
    check_body(body)
    if subject is not None:
        check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_choice(priority, "priority", PRIORITIES)
    key = None
    if idempotency_key is not None:
        key = check_key(idempotency_key, "idempotency_key")
    metadata_json = dump_json(metadata, "metadata")
    hashed = None
    if key is not None:
        hashed = request_hash("reply", mail_id, body, subject, priority, metadata)
        existing = yield from by_key(sender_name, key, hashed)
        if existing is not None:
            return existing
    ctx = yield one("reply_context", mail_id=mail_id, replier=sender_name)
    if ctx is None:
        raise NotFound(f"mail {mail_id} does not exist")
    if not ctx["participant"]:
        yield from require(sender_name)
        raise NotFound(f"identity {sender_name!r} neither sent nor received mail {mail_id}")
    names = list(ctx["participants"])
    if not names:
        raise InvalidArgument(
            f"mail {mail_id} has no one to reply to: every other participant is retired"
        )
    if subject is None:
        original: str = ctx["subject"]
        subject = original if original.startswith("Re: ") else f"Re: {original}"
    return (
        yield from _insert(
            sender_name,
            names,
            str(subject),
            body,
            thread_id=ctx["thread_id"],
            parent_id=mail_id,
            priority=priority,
            deadline_at=None,
            attachments=None,
            metadata=metadata_json,
            idempotency_key=idempotency_key,
            request_hash=hashed,
        )
    )


# ---------------------------------------------------------------- mailboxes


def inbox(
    identity: str | Identity,
    *,
    state: str | None = None,
    priority: str | None = None,
    limit: int = 50,
    before: InboxItem | int | None = None,
) -> Op[list[InboxItem]]:
    """An identity's mail, newest first: by default unread, read and starred (archived,
    trash and sleeping snoozes hidden); ``state`` picks one state (``"snoozed"``: the
    sleeping ones). Pass the last item of a page (or its ``mail.id``) as ``before`` for the
    next page."""
    name = identity_name(identity)
    if state is not None:
        check_choice(state, "state", MAIL_STATES)
    if priority is not None:
        check_choice(priority, "priority", PRIORITIES)
    check_limit(limit)
    before_id = check_cursor(before, InboxItem, lambda item: item.mail.id)
    rows = yield many(
        "inbox", identity=name, state=state, priority=priority, before_id=before_id, limit=limit
    )
    if not rows:
        yield from require(name)
    return [InboxItem.from_row(r) for r in rows]


def _missing(name: str, mail_id: int) -> Op[NotFound]:
    """Why a recipient row was not found: no such identity, or it did not receive the mail."""
    yield from require(name)
    return NotFound(f"identity {name!r} did not receive mail {mail_id}")


def read(identity: str | Identity, mail_id: int) -> Op[InboxItem]:
    """Open a mail: unread becomes read (other states stay); ``read_at`` is set the first
    time. ``NotFound`` unless the identity received it."""
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("read_mail", identity=name, mail_id=mail_id)
    if row is None:
        raise (yield from _missing(name, mail_id))
    return InboxItem.from_row(row)


def ack(identity: str | Identity, mail_id: int) -> Op[InboxItem]:
    """Acknowledge a mail: ``acked_at`` is set once, an unread mail becomes read.
    Idempotent."""
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("ack_mail", identity=name, mail_id=mail_id)
    if row is None:
        raise (yield from _missing(name, mail_id))
    return InboxItem.from_row(row)


def _snooze(state: str, snoozed_until: object) -> tuple[datetime | None, timedelta | None]:
    if state != "snoozed":
        if snoozed_until is not None:
            raise InvalidArgument(f"snoozed_until is only for the snoozed state, not {state!r}")
        return None, None
    if snoozed_until is None:
        raise InvalidArgument("snoozing needs snoozed_until (a datetime or a timedelta)")
    if isinstance(snoozed_until, timedelta):
        if snoozed_until <= timedelta(0):
            raise InvalidArgument(f"snoozed_until must be in the future, got {snoozed_until!r}")
        return None, check_duration(snoozed_until, "snoozed_until")
    when = check_when(snoozed_until, "snoozed_until")
    return when, None


def set_state(
    identity: str | Identity,
    mail_id: int,
    state: str,
    *,
    snoozed_until: datetime | timedelta | None = None,
) -> Op[InboxItem]:
    """Move the identity's copy of a mail to ``state`` along the allowed transitions
    (``mail.TRANSITIONS``); anything else, including staying in the same state (except
    re-snoozing), raises ``InvalidArgument`` naming both states and changes nothing.

    ``"snoozed"`` needs ``snoozed_until`` in the future: an aware datetime, or a timedelta
    from now. A snooze that has passed counts as unread everywhere.
    """
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    to = check_choice(state, "state", MAIL_STATES)
    snooze_at, snooze_for = _snooze(to, snoozed_until)
    for _ in range(_RACE_RETRIES):
        row = yield one(
            "set_mail_state",
            identity=name,
            mail_id=mail_id,
            state=to,
            from_states=_SOURCES[to],
            snooze_at=snooze_at,
            snooze_for=snooze_for,
        )
        if row is not None:
            return InboxItem.from_row(row)
        # Rare path: why. The database's clock only moves forward, so a snooze time after its
        # now here was after it in the UPDATE too: the time is to blame only if it is not.
        entry = yield one("mailbox_entry", identity=name, mail_id=mail_id)
        if snooze_at is not None and snooze_at <= entry["now"]:
            raise InvalidArgument(
                f"snoozed_until must be in the future, got {snooze_at.isoformat()} "
                f"(the database's time is {entry['now'].isoformat()})"
            )
        if entry["identity_id"] is None:
            raise NotFound(f"identity {name!r} does not exist")
        current = entry["state"]
        if current is None:
            raise NotFound(f"identity {name!r} did not receive mail {mail_id}")
        if current not in _SOURCES[to]:
            allowed = ", ".join(s for s in MAIL_STATES if s in TRANSITIONS[current]) or "nothing"
            raise InvalidArgument(
                f"mail {mail_id} cannot move from {current} to {to} (from {current}: {allowed})"
            )
        # The move is legal now: another caller changed the state in between. Try again.
    raise InvalidArgument(
        f"mail {mail_id} of {name!r} kept changing state concurrently; nothing was changed"
    )


def set_thread_state(identity: str | Identity, thread_id: str, state: str) -> Op[int]:
    """Apply a transition to each of the identity's mails in a thread where it is allowed,
    in one statement; return how many moved. (``"snoozed"`` is refused: snooze one mail.)"""
    name = identity_name(identity)
    check_key(thread_id, "thread_id")
    to = check_choice(state, "state", MAIL_STATES)
    if to == "snoozed":
        raise InvalidArgument("a thread cannot be snoozed at once: snooze its mails one by one")
    count: int = yield statement(
        "set_thread_state",
        identity=name,
        thread_id=thread_id,
        state=to,
        from_states=_SOURCES[to],
    )
    if count == 0:
        yield from require(name)
    return count


def thread(thread_id: str, *, identity: str | Identity | None = None) -> Op[list[Mail]]:
    """Every mail of a thread in id order (only those ``identity`` sent or received, when
    given); ``[]`` for an unknown thread."""
    check_key(thread_id, "thread_id")
    name = None if identity is None else identity_name(identity)
    rows = yield many("thread_mail", thread_id=thread_id, identity=name)
    if not rows and name is not None:
        yield from require(name)
    return [Mail.from_row(r) for r in rows]


def sent(identity: str | Identity, *, limit: int = 50) -> Op[list[Mail]]:
    """What the identity sent, newest first (without those removed by ``delete_sent``)."""
    name = identity_name(identity)
    check_limit(limit)
    rows = yield many("sent_mail", identity=name, limit=limit)
    if not rows:
        yield from require(name)
    return [Mail.from_row(r) for r in rows]


def delete_sent(identity: str | Identity, mail_id: int) -> Op[None]:
    """Hide a sent mail from the sender's ``sent`` view only (recipients keep it)."""
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("delete_sent", identity=name, mail_id=mail_id)
    if row is None:
        yield from require(name)
        raise NotFound(f"identity {name!r} did not send mail {mail_id}")


def counts(identity: str | Identity) -> Op[MailCounts]:
    """The identity's mailbox counts, in one query."""
    name = identity_name(identity)
    row = yield one("mail_counts", identity=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    return MailCounts.from_row(row)


def search(
    query: str,
    *,
    identity: str | Identity | None = None,
    limit: int = 50,
    order: str = "rank",
    before: MailHit | None = None,
) -> Op[list[MailHit]]:
    """Full-text search of subjects (weighted higher) and bodies, in web-search syntax
    (quotes, ``or``, ``-term``); any text is accepted. With ``identity``: only mail it sent
    or received. Orders, the bounded candidates, exact-phrase matches first and ``before=``
    pages work as in ``Store.search``. ``limit`` is capped at ``MAX_SEARCH_LIMIT``. The mail
    of a topic created ``searchable=False`` is never found."""
    check_query(query)
    assert isinstance(query, str)
    name = None if identity is None else identity_name(identity)
    check_limit(limit)
    assert isinstance(limit, int)
    by_rank = check_order(order)
    page = check_before(before, MailHit)
    plan = Queries(
        start="search_mail_start",
        estimate="search_mail_estimate",
        walk="search_mail_walk",
        probe="search_mail_probe",
        probe_index="search_mail_probe_range",
        hits="search_mail",
        filters={"identity": name},
    )
    rows, horizon = yield from ranked(
        plan, query=query, by_rank=by_rank, limit=min(limit, MAX_SEARCH_LIMIT), before=page
    )
    if not rows and name is not None:
        yield from require(name)
    return [MailHit.from_row(r, horizon) for r in rows]


def wake_snoozed() -> Op[int]:
    """Turn every passed snooze into unread (they already count as unread); return how
    many."""
    count: int = yield statement("wake_snoozed")
    return count


def prune(*, older_than: timedelta | float = timedelta(days=30)) -> Op[int]:
    """Delete recipient copies that have been in trash longer than ``older_than`` (a
    timedelta or seconds); return how many. Also reaps every identity's dead ``wait``
    registrations (their waiting process or its listener connection is gone, or they
    expired): a mail handed to one and never taken becomes unread again."""
    age = check_duration(older_than, "older_than")
    count: int = yield statement("purge_trash", older_than=age)
    yield one("mail_waiters_reap_all")
    return count


# ---------------------------------------------------------------- wait (driven by the faces)


def wait_target(identity: object) -> Op[int]:
    """The identity's id (what the NOTIFY payload names); ``NotFound`` if there is none."""
    name = identity_name(identity)
    row = yield one("wait_target", identity=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    return int(row["id"])


def claim_next(identity: str) -> Op[tuple[InboxItem | None, float | None]]:
    """Take the oldest unread mail (marked read), or (None, seconds until the next snooze of
    the identity wakes, or None when it has no sleeping snooze)."""
    row = yield one("claim_unread", identity=identity)
    if row is not None:
        return InboxItem.from_row(row), None
    target = yield one("wait_target", identity=identity)
    if target is None:
        raise NotFound(f"identity {identity!r} does not exist")
    wake = target["next_wake"]
    return None, None if wake is None else max(0.0, float(wake))


def _new_waiter_id() -> int:
    """A random positive bigint: the id of a ``mail_waiters`` registration, chosen before
    registering (withdrawing an id never registered is a no-op)."""
    return secrets.randbits(63) or 1


def _handed(handoff: Handoff) -> InboxItem:
    """The mail a hand-off's payload carried, as ``mail_wait_take`` would have returned it."""
    row, tz = dict(handoff.item), handoff.tz
    for column in ("deadline_at", "created_at", "read_at", "acked_at", "snoozed_until"):
        value = row.get(column)
        if value is not None:
            row[column] = datetime.fromisoformat(value).astimezone(tz)
    return InboxItem.from_row(row)


def _take(waiter_id: int) -> Op[InboxItem | None]:
    """The mail handed to our registration, if any, deleting the registration: from the
    listener (no round trip) or by our own take (a hand-off the listener left to us)."""
    handoff = yield Collect(waiter_id)
    if handoff is not None:
        return _handed(handoff)
    row = yield one("mail_wait_take", waiter_id=waiter_id)
    if row is not None:
        yield Collect(waiter_id, stop=True)  # the same mail, if the listener got it too
        return InboxItem.from_row(row)
    # Not handed over, or the listener deleted the registration meanwhile (given first).
    handoff = yield Collect(waiter_id)
    return None if handoff is None else _handed(handoff)


def _withdraw(waiter_id: int) -> Op[None]:
    """Delete our registration without returning its hand-off: the mail becomes unread again."""
    handoff = yield Collect(waiter_id, stop=True)
    if handoff is None:
        yield one("mail_wait_cancel", waiter_id=waiter_id)
        return
    yield one(
        "mail_wait_give_back",
        waiter_id=waiter_id,
        identity_id=handoff.identity_id,
        mail_id=handoff.item["id"],
        handed_at=handoff.item["read_at"],
    )


def _leave(waiter_id: int) -> Op[InboxItem | None]:
    """Delete our registration; the mail handed to it, if any (then it is ours to return)."""
    handoff = yield Collect(waiter_id, stop=True)
    if handoff is not None:
        return _handed(handoff)
    left = yield one("mail_wait_leave", waiter_id=waiter_id)
    if left is not None:
        return None
    row = yield one("mail_wait_take", waiter_id=waiter_id)  # handed over (or reaped: None)
    return None if row is None else InboxItem.from_row(row)


def wait(identity: str | Identity, timeout: timedelta | float) -> Op[InboxItem | None]:
    """The identity's oldest unread mail, marked read, waiting up to ``timeout`` (a timedelta
    or seconds, at most a day; 0: do not wait) for one to arrive; None if none did.

    Wakes within milliseconds of the sending commit (LISTEN/NOTIFY on one extra connection
    per store, not a pooled one; no polling). Concurrent waiters never get the same mail.
    Inside ``store.transaction()`` the mail is marked read in that transaction.

    Outside a transaction, a waiter that found nothing registers, and a ``send`` to the
    identity hands its mail over in the send's own transaction, telling the waiter's store
    the mail itself (when it fits in a notification's payload): the mail returned was marked
    read by a durable commit either way, and the waiter returns it without a round trip of its
    own. The registration is deleted right after (by the store's listener); if the waiting
    process dies (or is interrupted) before that, the mail becomes unread again: it may be
    delivered again, it is never lost.
    """
    seconds = check_duration(timeout, "timeout", maximum=MAX_WAIT).total_seconds()
    deadline = time.monotonic() + seconds
    name = identity_name(identity)
    start = yield one("mail_wait_start", identity=name)  # reaps the dead registrations first
    if start is None:
        raise NotFound(f"identity {name!r} does not exist")
    key = int(start["id"])
    if seconds > 0:
        yield Listen((MAIL_CHANNEL, key))  # before looking: no wake-up is lost
    waiter: tuple[int, int] | None = None  # our registration (id, the liveness key it names)
    try:
        while True:
            if waiter is not None:  # the hand-off, if a send made one: no flush of our own
                item = yield from _take(waiter[0])
                if item is not None:
                    waiter = None
                    return item
            item, wake = yield from claim_next(name)
            if item is not None:
                if waiter is not None:  # a mail handed over meanwhile becomes unread again
                    yield from _withdraw(waiter[0])
                    waiter = None
                return item
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if waiter is None:
                    return None
                item = yield from _leave(waiter[0])
                waiter = None
                return item
            live = yield Liveness()
            if waiter is not None and waiter[1] != live:
                # The listener's connection was replaced: the registration is dead. Ours to
                # take back (with what it holds) unless the reaper already did.
                item = yield from _leave(waiter[0])
                waiter = None
                if item is not None:
                    return item
            while waiter is None and live is not None:
                # A send that commits before this is seen by the next look (its notification
                # wakes the Sleep below); one after it hands its mail over. The id is ours
                # before the call, so an interruption inside it can still withdraw it; the
                # listener expects it first, so it can give us the mail as soon as it is sent.
                waiter = (_new_waiter_id(), live)
                yield Expect(waiter[0])
                reg = yield one(
                    "mail_wait_register",
                    waiter_id=waiter[0],
                    identity_id=key,
                    liveness=live,
                    seconds=remaining,
                )
                if reg is None:  # the id is taken (63 random bits: in theory only)
                    yield Collect(waiter[0], stop=True)
                    waiter = None
            yield Sleep(remaining if wake is None else min(remaining, wake + 0.001))
    except GeneratorExit:
        raise  # closed without being driven: no step can run (liveness and expiry cover it)
    except BaseException:
        # Interrupted (KeyboardInterrupt, cancellation) or failed: withdraw the registration,
        # even one whose register call was interrupted (committed or not: its id is ours); a
        # mail handed to it becomes unread again. If even that fails, the registration dies
        # with the listener's connection or at its expiry, and the reaper undoes it then
        # (unless the listener had given us the mail and deleted it: then it stays read).
        if waiter is not None:
            with contextlib.suppress(IkigaiStoreError):
                yield from _withdraw(waiter[0])
        raise


send_or_queue = queued("send", send)


class MailCalls(Area[FaceT]):
    """``store.mail``: direct mail between identities (see ``ikigai_store.mail``).

    Wherever an identity is expected, its name or an ``Identity`` is accepted.
    """

    send = operation(send)
    reply = operation(reply)
    inbox = operation(inbox)
    read = operation(read)
    set_state = operation(set_state)
    ack = operation(ack)
    set_thread_state = operation(set_thread_state)
    thread = operation(thread)
    sent = operation(sent)
    delete_sent = operation(delete_sent)
    counts = operation(counts)
    search = operation(search)
    publish = operation(topics.publish)
    publish_many = operation(topics.publish_many)
    wait = operation(wait)
    send_or_queue = operation(send_or_queue)
    wake_snoozed = operation(wake_snoozed)
    prune = operation(prune)
