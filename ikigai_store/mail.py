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
- order is ``mail.id``, never a timestamp; thread operations and counts are single statements.
"""

from __future__ import annotations

import hashlib
import json
import math
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from .errors import Conflict, InvalidArgument, NotFound
from .identities import identity_name, require
from .models import MAIL_STATES, PRIORITIES, InboxItem, Mail, MailCounts, MailHit
from .ops import Op, atomic, many, one, statement
from .search import MAX_SEARCH_LIMIT, Queries, check_before, check_order, check_query, ranked
from .validate import (
    check_content,
    check_id,
    check_limit,
    check_text,
    dump_json,
)

__all__ = [
    "MAX_DURATION",
    "MAX_RECIPIENTS",
    "MAX_SUBJECT_CHARS",
    "TRANSITIONS",
    "ack",
    "claim_next",
    "counts",
    "delete_sent",
    "inbox",
    "purge_trash",
    "read",
    "reply",
    "search",
    "send",
    "sent",
    "set_state",
    "set_thread_state",
    "thread",
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

#: Longest duration accepted (a snooze, a purge age): 100 years.
MAX_DURATION = timedelta(days=36500)
#: Longest subject, in characters.
MAX_SUBJECT_CHARS = 1000
#: Most recipients of one mail.
MAX_RECIPIENTS = 10_000
_MAX_KEY_CHARS = 200
#: How often set_state tries again when a concurrent change made its refused move legal.
_RACE_RETRIES = 3


# ---------------------------------------------------------------- validation


def check_str(value: object, what: str, *, max_chars: int, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if not empty and not value:
        raise InvalidArgument(f"{what} must not be empty")
    if len(value) > max_chars:
        raise InvalidArgument(f"{what} is {len(value)} characters; at most {max_chars}")
    check_text(value, what)
    return value


def check_body(body: object, what: str = "body") -> None:
    """A long text (a mail body, a summary, a description): a string PostgreSQL can store;
    ``what`` names the argument in the error."""
    if not isinstance(body, str):
        raise InvalidArgument(f"{what} must be a string, got {type(body).__name__}")
    check_content(body, what)


def check_choice(value: object, what: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise InvalidArgument(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def _check_when(value: object, what: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise InvalidArgument(f"{what} must be a timezone-aware datetime, got {value!r}")
    try:
        if value.astimezone(UTC).year >= 9999:
            raise OverflowError
    except OverflowError:
        raise InvalidArgument(f"{what} must be before the year 9999, got {value!r}") from None
    return value


def _check_duration(value: object, what: str) -> timedelta:
    if not isinstance(value, timedelta) or not timedelta(0) <= value <= MAX_DURATION:
        raise InvalidArgument(
            f"{what} must be a timedelta from zero to {MAX_DURATION.days} days, got {value!r}"
        )
    return value


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


def request_hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- sending


def send(
    sender: object,
    to: object,
    subject: object,
    body: object,
    thread_id: object,
    parent_id: object,
    priority: object,
    deadline_at: object,
    attachments: Any,
    metadata: Any,
    idempotency_key: object,
) -> Op[Mail]:
    sender_name = identity_name(sender, "sender")
    names = _recipients(to)
    subject = check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_body(body)
    if thread_id is not None:
        check_str(thread_id, "thread_id", max_chars=_MAX_KEY_CHARS)
    if parent_id is not None:
        check_id(parent_id, "parent_id")
    check_choice(priority, "priority", PRIORITIES)
    deadline = _check_when(deadline_at, "deadline_at")
    if idempotency_key is not None:
        check_str(idempotency_key, "idempotency_key", max_chars=_MAX_KEY_CHARS)
    attachments_json = dump_json(attachments, "attachments")
    metadata_json = dump_json(metadata, "metadata")
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
        raise InvalidArgument(f"unknown recipient(s): {', '.join(why['missing'])}")
    if why["retired"]:
        raise InvalidArgument(f"retired recipient(s) cannot receive: {', '.join(why['retired'])}")
    parent = fields["parent_id"]
    if not why["parent_exists"]:
        raise InvalidArgument(f"parent mail {parent} does not exist")
    raise InvalidArgument(
        f"parent mail {parent} is in thread {why['parent_thread']!r}, not {fields['thread_id']!r}"
    )


def by_key(sender: str, key: str, hashed: str) -> Op[Mail | None]:
    """The mail ``sender`` sent with ``key`` when the request is the same; ``Conflict`` when
    the key was used for another request; None when the key is unused."""
    row = yield one("mail_by_key", sender=sender, idempotency_key=key)
    if row is None:
        return None
    if row["request_hash"] != hashed:
        raise Conflict(
            f"idempotency key {key!r} of {sender!r} was used for a different request "
            f"(mail {row['id']})",
            constraint="mail_idempotency_key",
            sqlstate=None,
        )
    return Mail.from_row(row)


@atomic
def reply(
    sender: object,
    mail_id: object,
    body: object,
    subject: object,
    priority: object,
    metadata: Any,
    idempotency_key: object,
) -> Op[Mail]:
    sender_name = identity_name(sender, "sender")
    check_id(mail_id, "mail_id")
    check_body(body)
    if subject is not None:
        check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_choice(priority, "priority", PRIORITIES)
    key = None
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=_MAX_KEY_CHARS)
    metadata_json = dump_json(metadata, "metadata")
    hashed = request_hash("reply", mail_id, body, subject, priority, metadata)
    if key is not None:
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
    identity: object, state: object, priority: object, limit: object, before_id: object
) -> Op[list[InboxItem]]:
    name = identity_name(identity)
    if state is not None:
        check_choice(state, "state", MAIL_STATES)
    if priority is not None:
        check_choice(priority, "priority", PRIORITIES)
    check_limit(limit)
    if before_id is not None:
        check_id(before_id, "before_id")
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


def read(identity: object, mail_id: object) -> Op[InboxItem]:
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("read_mail", identity=name, mail_id=mail_id)
    if row is None:
        raise (yield from _missing(name, mail_id))  # type: ignore[arg-type]
    return InboxItem.from_row(row)


def ack(identity: object, mail_id: object) -> Op[InboxItem]:
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("ack_mail", identity=name, mail_id=mail_id)
    if row is None:
        raise (yield from _missing(name, mail_id))  # type: ignore[arg-type]
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
        return None, _check_duration(snoozed_until, "snoozed_until")
    when = _check_when(snoozed_until, "snoozed_until")
    return when, None


def set_state(
    identity: object, mail_id: object, state: object, snoozed_until: object
) -> Op[InboxItem]:
    """The guarded transition. Refusals, in this order: bad arguments (before any query); a
    ``snoozed_until`` that is not after the database's now (``InvalidArgument``, whoever asks
    and whatever the mail's state: it is a bad argument, like a negative ``timedelta``); an
    unknown identity or a mail it did not receive (``NotFound``); a move the table forbids
    (``InvalidArgument`` naming both states)."""
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


def set_thread_state(identity: object, thread_id: object, state: object) -> Op[int]:
    name = identity_name(identity)
    check_str(thread_id, "thread_id", max_chars=_MAX_KEY_CHARS)
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


def thread(thread_id: object, identity: object) -> Op[list[Mail]]:
    check_str(thread_id, "thread_id", max_chars=_MAX_KEY_CHARS)
    name = None if identity is None else identity_name(identity)
    rows = yield many("thread_mail", thread_id=thread_id, identity=name)
    if not rows and name is not None:
        yield from require(name)
    return [Mail.from_row(r) for r in rows]


def sent(identity: object, limit: object) -> Op[list[Mail]]:
    name = identity_name(identity)
    check_limit(limit)
    rows = yield many("sent_mail", identity=name, limit=limit)
    if not rows:
        yield from require(name)
    return [Mail.from_row(r) for r in rows]


def delete_sent(identity: object, mail_id: object) -> Op[None]:
    name = identity_name(identity)
    check_id(mail_id, "mail_id")
    row = yield one("delete_sent", identity=name, mail_id=mail_id)
    if row is None:
        yield from require(name)
        raise NotFound(f"identity {name!r} did not send mail {mail_id}")


def counts(identity: object) -> Op[MailCounts]:
    name = identity_name(identity)
    row = yield one("mail_counts", identity=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    return MailCounts.from_row(row)


def search(
    query: object, identity: object, limit: object, *, order: object = "rank", before: object = None
) -> Op[list[MailHit]]:
    """Mail search with the strategy of ``search.search`` (see ``ikigai_store.search``)."""
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
    count: int = yield statement("wake_snoozed")
    return count


def purge_trash(older_than: object) -> Op[int]:
    age = _check_duration(older_than, "older_than")
    count: int = yield statement("purge_trash", older_than=age)
    return count


# ---------------------------------------------------------------- wait (driven by the faces)


def check_wait_timeout(timeout: object) -> float:
    """A number of seconds in [0, 86400]."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not math.isfinite(timeout)
        or not 0 <= timeout <= 86400
    ):
        raise InvalidArgument(f"timeout must be a number of seconds in [0, 86400], got {timeout!r}")
    return float(timeout)


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
