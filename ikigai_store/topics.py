"""Topics: broadcast logs read by offset, and work queues with leases (seed 004, wired).

Owns topics, subscriptions, consumer offsets, publishing and queue claims, for both faces (see
``ops``). Invariants:
- a topic's offsets start at 1 and are gapless and committed in order: ``publish`` takes
  ``next_offset`` under the topic row's lock, held to commit, and advances it only when the mail
  was written (a reused idempotency key or a rollback leaves no gap); so a consumer reading
  ``offset > N`` never skips a row that commits later with a smaller offset;
- a broadcast publish gives every current subscriber but the sender an unread copy (it shows in
  inboxes and wakes ``mail.wait``); a queue publish creates one queue row;
- a stored consumer offset only moves forward (``GREATEST``) and never past the topic's end;
- a queue message is held by at most one live lease: ``claim`` takes the oldest available row
  ``FOR UPDATE SKIP LOCKED`` with a fresh token; ``complete``/``release``/``extend`` need that
  token, so a holder whose lease expired and was claimed again cannot act; a completed message
  is never handed out again; after ``max_attempts`` claims it is a dead letter until requeued.
"""

from __future__ import annotations

import math
import uuid
from datetime import timedelta
from typing import Any

from .errors import InvalidArgument, NotFound
from .identities import NAME_PATTERN, identity_name, require
from .mail import MAX_SUBJECT_CHARS, by_key, check_body, check_choice, check_str, request_hash
from .models import (
    PRIORITIES,
    TOPIC_KINDS,
    Claim,
    DeadLetter,
    Identity,
    InboxItem,
    Mail,
    Poll,
    Topic,
    TopicInfo,
)
from .ops import Op, atomic, many, one, statement
from .validate import check_id, check_int, check_limit, dump_json

__all__ = [
    "MAX_LEASE",
    "apply_retention",
    "claim",
    "claim_state",
    "commit",
    "complete",
    "create",
    "dead_letters",
    "delete",
    "extend",
    "get",
    "list_topics",
    "offset",
    "poll",
    "publish",
    "read",
    "release",
    "requeue",
    "subscribe",
    "subscribers",
    "subscriptions",
    "unsubscribe",
]

#: Longest lease a claim may take or extend to, in seconds (one day).
MAX_LEASE = 86400.0
_MAX_RETENTION = timedelta(days=36500)
_MAX_ERROR_CHARS = 10_000


def topic_name(topic: object) -> str:
    """The name of ``topic`` (a name or a ``Topic``); ``InvalidArgument`` otherwise."""
    if isinstance(topic, Topic):
        return topic.name
    if not isinstance(topic, str) or NAME_PATTERN.fullmatch(topic) is None:
        raise InvalidArgument(
            "topic must be a name of 1-64 letters, digits, '.', '_' or '-' not starting with "
            f"punctuation, got {topic!r}"
        )
    return topic


def _require_topic(name: str) -> Op[Topic]:
    row = yield one("get_topic", name=name)
    if row is None:
        raise NotFound(f"topic {name!r} does not exist")
    return Topic.from_row(row)


def _check_lease(lease: object, what: str = "lease") -> float:
    if (
        isinstance(lease, bool)
        or not isinstance(lease, (int, float))
        or not math.isfinite(lease)
        or not 0 < lease <= MAX_LEASE
    ):
        raise InvalidArgument(f"{what} must be a number of seconds in (0, {MAX_LEASE:g}]")
    return float(lease)


# ---------------------------------------------------------------- topics


def create(name: object, kind: object, retention: object, max_attempts: object) -> Op[Topic]:
    topic = topic_name(name)
    check_choice(kind, "kind", TOPIC_KINDS)
    if not isinstance(retention, timedelta) or not timedelta(0) < retention <= _MAX_RETENTION:
        raise InvalidArgument(f"retention must be a positive timedelta, got {retention!r}")
    check_int(max_attempts, "max_attempts", minimum=1)
    assert isinstance(max_attempts, int)
    if max_attempts > 1000:
        raise InvalidArgument(f"max_attempts must be at most 1000, got {max_attempts}")
    row = yield one(
        "create_topic", name=topic, kind=kind, retention=retention, max_attempts=max_attempts
    )
    if row is None:
        raise InvalidArgument(f"topic {topic!r} already exists")
    return Topic.from_row(row)


def get(name: object) -> Op[Topic]:
    return (yield from _require_topic(topic_name(name)))


def list_topics() -> Op[list[TopicInfo]]:
    rows = yield many("list_topics")
    return [TopicInfo.from_row(r) for r in rows]


def delete(name: object) -> Op[None]:
    topic = topic_name(name)
    row = yield one("delete_topic", name=topic)
    if row is None:
        yield from _require_topic(topic)
        work = yield one("open_work", name=topic)
        raise InvalidArgument(
            f"topic {topic!r} has {work['n']} unfinished queue message(s): complete them first"
        )


@atomic
def subscribe(identity: object, topic: object) -> Op[None]:
    name, t = identity_name(identity), topic_name(topic)
    yield statement("ensure_topic", name=t)
    row = yield one("subscribe", identity=name, topic=t)
    if row is None:
        found = yield from require(name)
        raise InvalidArgument(f"identity {found.name!r} is retired: it cannot subscribe")


def unsubscribe(identity: object, topic: object) -> Op[None]:
    name, t = identity_name(identity), topic_name(topic)
    count = yield statement("unsubscribe", identity=name, topic=t)
    if count == 0:
        yield from require(name)
        yield from _require_topic(t)


def subscribers(topic: object) -> Op[list[Identity]]:
    t = topic_name(topic)
    rows = yield many("topic_subscribers", topic=t)
    if not rows:
        yield from _require_topic(t)
    return [Identity.from_row(r) for r in rows]


def subscriptions(identity: object) -> Op[list[Topic]]:
    name = identity_name(identity)
    rows = yield many("identity_subscriptions", identity=name)
    if not rows:
        yield from require(name)
    return [Topic.from_row(r) for r in rows]


# ---------------------------------------------------------------- publishing and reading


def publish(
    sender: object,
    topic: object,
    subject: object,
    body: object,
    priority: object,
    metadata: Any,
    attachments: Any,
    idempotency_key: object,
) -> Op[Mail]:
    sender_name = identity_name(sender, "sender")
    t = topic_name(topic)
    subject = check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_body(body)
    check_choice(priority, "priority", PRIORITIES)
    key = None
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=200)
    attachments_json = dump_json(attachments, "attachments")
    metadata_json = dump_json(metadata, "metadata")
    hashed = request_hash("publish", t, subject, body, priority, attachments, metadata)
    row = yield one(
        "publish_mail",
        sender=sender_name,
        topic=t,
        subject=subject,
        body=body,
        priority=priority,
        attachments=attachments_json,
        metadata=metadata_json,
        idempotency_key=key,
        request_hash=hashed,
        new_thread_id=str(uuid.uuid4()),
    )
    if row is not None:
        return Mail.from_row(row)
    if key is not None:
        existing = yield from by_key(sender_name, key, hashed)
        if existing is not None:
            return existing
    why = yield one("publish_refusal", sender=sender_name, topic=t)
    if why["sender_state"] is None:
        raise NotFound(f"identity {sender_name!r} does not exist")
    if why["sender_state"] == "retired":
        raise InvalidArgument(f"identity {sender_name!r} is retired: it cannot publish")
    raise NotFound(f"topic {t!r} does not exist")


def read(topic: object, after: object, limit: object) -> Op[list[Mail]]:
    t = topic_name(topic)
    check_int(after, "after", minimum=0)
    check_limit(limit)
    rows = yield many("read_topic", topic=t, after=after, limit=limit)
    if not rows:
        yield from _require_topic(t)
    return [Mail.from_row(r) for r in rows]


def commit(identity: object, topic: object, offset: object) -> Op[int]:
    name, t = identity_name(identity), topic_name(topic)
    check_int(offset, "offset", minimum=0)
    row = yield one("commit_offset", identity=name, topic=t, offset=offset)
    if row is None:
        stored = yield one("stored_offset", identity=name, topic=t)
        if stored is None:
            yield from require(name)
            yield from _require_topic(t)
        raise InvalidArgument(
            f"offset {offset} is past the last offset of topic {t!r} ({stored['topic_last']})"
        )
    return int(row["last_offset"])


def offset(identity: object, topic: object) -> Op[int]:
    name, t = identity_name(identity), topic_name(topic)
    row = yield one("stored_offset", identity=name, topic=t)
    if row is None:
        yield from require(name)
        yield from _require_topic(t)
    return int(row["last_offset"])


def poll(identity: object, limit: object) -> Op[Poll]:
    name = identity_name(identity)
    check_limit(limit)
    rows = yield many("poll", identity=name, limit=limit)
    if not rows:
        yield from require(name)
    inbox: list[InboxItem] = []
    topics: dict[str, list[Mail]] = {}
    offsets: dict[str, int] = {}
    for row in rows:
        if row["part"] == "inbox":
            inbox.append(InboxItem.from_row(row))
            continue
        topic = row["topic_name"]
        offsets[topic] = int(row["stored"])
        news = topics.setdefault(topic, [])
        if row["id"] is not None:
            news.append(Mail.from_row(row))
    return Poll(inbox=inbox, topics=topics, offsets=offsets)


# ---------------------------------------------------------------- queues


def claim(
    identity: str, topic: str, lease: float, done: tuple[int, str] | None = None
) -> Op[Claim | None]:
    """One claim attempt (``store.topics.claim`` repeats it while it may wait), completing the
    ``done`` claim (mail id, token) first in the same statement: if the claim is refused, that
    refusal and nothing completed; if that lease was lost, ``InvalidArgument`` and nothing is
    claimed."""
    done_id, done_token = done if done is not None else (None, None)
    row = yield one(
        "claim_queue_item",
        identity=identity,
        topic=topic,
        lease=lease,
        done_id=done_id,
        done_token=done_token,
    )
    if done_id is not None and not row["completed"]:
        yield from claim_state(identity, topic)  # a refused claim completes nothing: say why
        raise _lost(done_id)
    return None if row["id"] is None else Claim.from_row(row)


def claim_state(identity: str, topic: str) -> Op[tuple[int, float | None]]:
    """Why a claim found nothing: ``InvalidArgument``/``NotFound`` when it never can, else
    (topic id, seconds until the topic's next lease expires or None)."""
    row = yield one("claim_refusal", identity=identity, topic=topic)
    if row["identity_state"] is None:
        raise NotFound(f"identity {identity!r} does not exist")
    if row["topic_id"] is None:
        raise NotFound(f"topic {topic!r} does not exist")
    if row["identity_state"] == "retired":
        raise InvalidArgument(f"identity {identity!r} is retired: it cannot claim")
    if row["kind"] != "queue":
        raise InvalidArgument(f"topic {topic!r} is a {row['kind']} topic, not a queue")
    if not row["subscribed"]:
        raise InvalidArgument(f"identity {identity!r} is not subscribed to queue {topic!r}")
    expiry = row["next_expiry"]
    return int(row["topic_id"]), None if expiry is None else max(0.0, float(expiry))


def check_claim_args(
    identity: object, topic: object, lease: object, wait: object, complete: object = None
) -> tuple[str, str, float, float, tuple[int, str] | None]:
    """Validated (identity name, topic name, lease seconds, wait seconds, the claim to complete
    first as (mail id, token), or None)."""
    name, t = identity_name(identity), topic_name(topic)
    done = None if complete is None else _check_claim(complete)
    seconds = _check_lease(lease)
    if (
        isinstance(wait, bool)
        or not isinstance(wait, (int, float))
        or not math.isfinite(wait)
        or not 0 <= wait <= 86400
    ):
        raise InvalidArgument(f"wait must be a number of seconds in [0, 86400], got {wait!r}")
    return name, t, seconds, float(wait), done


def _check_claim(value: object) -> tuple[int, str]:
    """(mail id, token) of a ``Claim`` or of a ``(mail_id, token)`` pair."""
    if isinstance(value, Claim):
        mail_id, token = value.mail.id, value.token
    elif isinstance(value, tuple) and len(value) == 2:
        mail_id, token = value
    else:
        raise InvalidArgument(
            f"expected a Claim (from store.topics.claim) or (mail_id, token), got {value!r}"
        )
    check_id(mail_id, "claim mail id")
    try:
        uuid.UUID(token)
    except (ValueError, TypeError, AttributeError):
        raise InvalidArgument(f"not a claim token: {token!r}") from None
    return mail_id, token


def _lost(mail_id: int) -> InvalidArgument:
    return InvalidArgument(
        f"the lease on mail {mail_id} was lost: it was completed, released, or claimed "
        "again after it expired"
    )


def complete(value: object) -> Op[None]:
    mail_id, token = _check_claim(value)
    row = yield one("complete_claim", mail_id=mail_id, token=token)
    if row is None:
        raise _lost(mail_id)


def release(value: object, error: object) -> Op[str]:
    mail_id, token = _check_claim(value)
    if error is not None:
        check_str(error, "error", max_chars=_MAX_ERROR_CHARS, empty=True)
    row = yield one("release_claim", mail_id=mail_id, token=token, error=error)
    if row is None:
        raise _lost(mail_id)
    state: str = row["state"]
    return state


def extend(value: object, lease: object) -> Op[Claim]:
    mail_id, token = _check_claim(value)
    seconds = _check_lease(lease)
    row = yield one("extend_claim", mail_id=mail_id, token=token, lease=seconds)
    if row is None:
        raise _lost(mail_id)
    return Claim.from_row(row)


def dead_letters(topic: object) -> Op[list[DeadLetter]]:
    t = topic_name(topic)
    rows = yield many("dead_letters", topic=t)
    if not rows:
        yield from _require_topic(t)
    return [DeadLetter.from_row(r) for r in rows]


def requeue(mail_id: object) -> Op[None]:
    check_id(mail_id, "mail_id")
    row = yield one("requeue", mail_id=mail_id)
    if row is None:
        found = yield one("queue_item_state", mail_id=mail_id)
        if found is None:
            raise NotFound(f"mail {mail_id} is not a queue message")
        raise InvalidArgument(f"mail {mail_id} is {found['state']}, not a dead letter")


def apply_retention() -> Op[dict[str, int]]:
    rows = yield many("apply_retention")
    return {r["name"]: int(r["deleted"]) for r in rows}
