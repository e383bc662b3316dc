"""Topics: broadcast logs read by offset, and work queues with leases (seed 004, wired).

Owns topics, subscriptions, consumer offsets, publishing and queue claims, for both faces (see
``ops``). Invariants:
- a topic's offsets start at 1 and are gapless and committed in order (migration 0028): each
  topic has a sequencer lock (a transaction-scoped advisory lock). ``publish`` takes it when it
  is free and no pending mail of the topic is visible, and gives its mail the next offset in
  the same statement (held to commit); otherwise it commits its mail *pending* (a
  ``topic_log`` row without an offset), side by side with the other publishes, and then runs
  the sequencer (``sequence_topic``), which waits for the lock and gives every committed
  pending mail of the topic the next offsets from ``next_offset``, in mail id order (one run
  sequences what every publisher committed meanwhile; a publisher whose mail a run sequenced
  only reads its offset). A rollback or a reused idempotency key writes no row, so it takes
  no offset; a consumer reading ``offset > N`` never skips a mail (one that gets an offset
  later gets one above every offset already committed), and reads never show a pending
  mail. Offsets follow commit order, not always mail id order. Inside ``store.transaction()``
  the lock is held to the caller's commit (publishes to that topic then wait for it, as
  before 0028). A publisher that dies between its commit and the sequencer leaves its mail
  pending until the next publish to the topic or the next ``read`` that reaches the end of
  its log (both see it, so sequence it) gives it one;
- a broadcast publish gives every current subscriber but the sender an unread copy (it shows in
  inboxes and wakes ``mail.wait``); a queue publish creates one queue row;
- a stored consumer offset only moves forward (``GREATEST``) and never past the topic's end;
- a queue message is held by at most one live lease: ``claim`` takes the most urgent, then
  oldest, available row
  ``FOR UPDATE SKIP LOCKED`` with a fresh token; ``complete``/``release``/``extend`` need that
  token, so a holder whose lease expired and was claimed again cannot act; a completed message
  is never handed out again; after ``max_attempts`` claims it is a dead letter until requeued.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from .errors import Conflict, IkigaiStoreError, InvalidArgument, NotFound
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
from .notify import QUEUE as QUEUE_CHANNEL
from .notify import listen_topics
from .ops import (
    Area,
    FaceT,
    Listen,
    Op,
    Sleep,
    atomic,
    many,
    one,
    operation,
    statement,
    value,
)
from .validate import (
    MAX_SUBJECT_CHARS,
    NAME_PATTERN,
    by_key,
    check_body,
    check_choice,
    check_duration,
    check_id,
    check_int,
    check_limit,
    check_str,
    dump_json,
    identity_name,
    request_hash,
    require,
)

__all__ = [
    "MAX_DELAY",
    "MAX_LEASE",
    "TopicCalls",
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
    "prune",
    "publish",
    "publish_many",
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
#: Longest delay of a queue message (``publish(..., delay=)``, ``release(..., delay=)``).
MAX_DELAY = timedelta(days=365)
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


_LONGEST = timedelta(seconds=MAX_LEASE)
#: Seconds a blocking claim registers its topic as listened for at a time (migration 0050):
#: a longer wait registers again before that runs out.
_LISTEN_SPAN = 600.0


def _check_delay(delay: object) -> float | None:
    """A delay in seconds (a timedelta or seconds in [0, ``MAX_DELAY``]), or None."""
    if delay is None:
        return None
    return check_duration(delay, "delay", maximum=MAX_DELAY).total_seconds()


def _check_lease(lease: object, what: str = "ttl") -> float:
    """A claim's lease length in seconds: a timedelta or seconds in (0, ``MAX_LEASE``]."""
    return check_duration(lease, what, maximum=_LONGEST, zero=False).total_seconds()


# ---------------------------------------------------------------- topics


def create(
    name: str,
    kind: str = "broadcast",
    *,
    retention: timedelta | float = timedelta(days=7),
    max_attempts: int = 5,
    searchable: bool = True,
) -> Op[Topic]:
    """Create a topic: ``"broadcast"`` (every subscriber reads every mail) or ``"queue"``
    (each mail is processed by one subscriber). ``InvalidArgument`` for a bad name or kind,
    ``Conflict`` for a name already taken.

    ``searchable=False``: the topic's mail is not indexed for full-text search (``search``
    never finds it; everything else reads it as usual). Its subject and body are then not
    parsed at publish, which for a 1 KB body was more than half of the mail row's insert: for
    a queue of job payloads nobody searches. Fixed at creation."""
    topic = topic_name(name)
    check_choice(kind, "kind", TOPIC_KINDS)
    retention = check_duration(retention, "retention", maximum=_MAX_RETENTION, zero=False)
    check_int(max_attempts, "max_attempts", minimum=1, maximum=1000)
    if not isinstance(searchable, bool):
        raise InvalidArgument(f"searchable must be a bool, got {searchable!r}")
    row = yield one(
        "create_topic",
        name=topic,
        kind=kind,
        retention=retention,
        max_attempts=max_attempts,
        searchable=searchable,
    )
    if row is None:
        raise Conflict(
            f"topic {topic!r} already exists", constraint="topics_name_key", sqlstate=None
        )
    return Topic.from_row(row)


def get(name: str | Topic) -> Op[Topic]:
    """One topic; ``NotFound`` if there is none of that name."""
    return (yield from _require_topic(topic_name(name)))


def list_topics() -> Op[list[TopicInfo]]:
    """Every topic with subscriber count, retained message count, last offset and, for a
    queue, how many messages are available, claimed and dead (one query), by name."""
    rows = yield many("list_topics")
    return [TopicInfo.from_row(r) for r in rows]


def delete(name: str | Topic) -> Op[None]:
    """Delete a topic and its whole log (its mail leaves the inboxes too). Refused
    (``InvalidArgument``) while a queue topic has available or claimed messages."""
    topic = topic_name(name)
    row = yield one("delete_topic", name=topic)
    if row is None:
        yield from _require_topic(topic)
        work = yield one("open_work", name=topic)
        raise InvalidArgument(
            f"topic {topic!r} has {work['n']} unfinished queue message(s): complete them first"
        )


@atomic
def subscribe(identity: str | Identity, topic: str | Topic) -> Op[None]:
    """Subscribe (idempotent). A missing topic is created as a broadcast topic. A new
    subscriber's offset is 0: it can read the topic's whole retained log."""
    name, t = identity_name(identity), topic_name(topic)
    yield statement("ensure_topic", name=t)
    row = yield one("subscribe", identity=name, topic=t)
    if row is None:
        found = yield from require(name)
        raise InvalidArgument(f"identity {found.name!r} is retired: it cannot subscribe")


def unsubscribe(identity: str | Identity, topic: str | Topic) -> Op[None]:
    """Unsubscribe (idempotent); the stored offset is kept for a later re-subscribe."""
    name, t = identity_name(identity), topic_name(topic)
    count = yield statement("unsubscribe", identity=name, topic=t)
    if count == 0:
        yield from require(name)
        yield from _require_topic(t)


def subscribers(topic: str | Topic) -> Op[list[Identity]]:
    """The identities subscribed to a topic, by name."""
    t = topic_name(topic)
    rows = yield many("topic_subscribers", topic=t)
    if not rows:
        yield from _require_topic(t)
    return [Identity.from_row(r) for r in rows]


def subscriptions(identity: str | Identity) -> Op[list[Topic]]:
    """The topics an identity is subscribed to, by name."""
    name = identity_name(identity)
    rows = yield many("identity_subscriptions", identity=name)
    if not rows:
        yield from require(name)
    return [Topic.from_row(r) for r in rows]


# ---------------------------------------------------------------- publishing and reading


def publish(
    sender: str | Identity,
    topic: str | Topic,
    subject: str,
    body: str,
    *,
    priority: str = "normal",
    metadata: Any = None,
    attachments: Any = None,
    idempotency_key: str | None = None,
    wait_for_offset: bool = True,
    delay: timedelta | float | None = None,
) -> Op[Mail]:
    """Append a mail to a topic at its next offset (``Mail.topic``, ``Mail.log_offset``).

    Offsets are gapless and commit in order: a reader that read up to offset N never later
    sees a new mail at N or below. Publishes to one topic commit side by side; the offset is
    given right after the commit (see the module docstring). A broadcast topic gives every
    current subscriber but the sender an unread copy; a queue topic makes the mail claimable.
    ``NotFound`` for a missing topic or sender. Idempotency keys as for ``send`` (one key
    space per sender): a repeated publish returns the original and takes no offset.

    ``wait_for_offset=False`` returns once the mail is committed, without running the
    sequencer when other publishes kept it busy: the mail is then returned with
    ``log_offset`` None (pending) and gets its offset from the next publish that waits for
    its own, or the next ``read`` that reaches the end of the log. Readers see the same
    gapless log, in commit order; the publisher saves a transaction (concurrent publishers to
    one topic: 1.4-1.5x the throughput, ``scripts/bench_peers_pgmq.py``). For producers that
    do not need the offset: a queue's, typically (claims do not use offsets).

    ``delay`` (a timedelta or seconds, up to a year): a queue message is claimable only
    once it passed (a scheduled job); it is in the log, and counted available, at once.
    ``InvalidArgument`` for a delay to a broadcast topic.
    """
    sender_name = identity_name(sender, "sender")
    t = topic_name(topic)
    if not isinstance(wait_for_offset, bool):
        raise InvalidArgument("wait_for_offset must be a bool")
    subject = check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    check_body(body)
    check_choice(priority, "priority", PRIORITIES)
    delay_s = _check_delay(delay)
    key = None
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=200)
    attachments_json = dump_json(attachments, "attachments")
    metadata_json = dump_json(metadata, "metadata")
    hashed = None  # what a retry with the key must repeat (only a key's mail is compared)
    if key is not None:
        request: tuple[Any, ...] = ("publish", t, subject, body, priority, attachments, metadata)
        if delay_s is not None:  # an undelayed publish hashes as before: stored keys match
            request += (delay_s,)
        hashed = request_hash(*request)
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
        delay=delay_s,
    )
    if row is not None:
        if not wait_for_offset:
            return Mail.from_row(row)
        (mail,) = yield from _sequenced(int(row["topic_id"]), [Mail.from_row(row)])
        return mail
    if key is not None and hashed is not None:
        existing = yield from by_key(sender_name, key, hashed)
        if existing is not None:
            if existing.log_offset is None and wait_for_offset:  # not sequenced (yet)
                found = yield from _require_topic(t)
                (existing,) = yield from _sequenced(found.id, [existing])
            return existing
    raise (yield from _refusal(sender_name, t, delay_s is not None))


def _refusal(sender: str, topic: str, delayed: bool) -> Op[IkigaiStoreError]:
    """Why a publish to ``topic`` (``delayed``: with a delay) wrote nothing (a used key
    aside)."""
    why = yield one("publish_refusal", sender=sender, topic=topic)
    if why["sender_state"] is None:
        return NotFound(f"identity {sender!r} does not exist")
    if why["sender_state"] == "retired":
        return InvalidArgument(f"identity {sender!r} is retired: it cannot publish")
    if why["topic_kind"] is None:
        return NotFound(f"topic {topic!r} does not exist")
    if delayed and why["topic_kind"] != "queue":
        return InvalidArgument(
            f"topic {topic!r} is a {why['topic_kind']} topic: only a queue's messages can be "
            "delayed"
        )
    # Nothing else refuses a publish; the mail holding its key was deleted meanwhile (retention)?
    return Conflict(
        f"the publish to topic {topic!r} wrote nothing and no reason was found (was the mail "
        "holding its idempotency key deleted meanwhile?): try again",
        constraint=None,
        sqlstate=None,
    )


def _sequenced(topic_id: int, mails: list[Mail]) -> Op[list[Mail]]:
    """``mails`` (committed, of topic ``topic_id``) with their offsets: those that have one
    already (their publish took the sequencer lock), else sequence the topic, which gives
    every committed pending mail of it the next offsets (the sequencer)."""
    if all(m.log_offset is not None for m in mails):
        return mails
    rows = yield many("sequence_mail", topic_id=topic_id, mail_ids=[m.id for m in mails])
    offsets = {int(r["mail_id"]): int(r["log_offset"]) for r in rows}
    return [dataclasses.replace(m, log_offset=offsets[m.id]) for m in mails]


#: The namespace of a keyed batch's thread ids (uuid5 of sender, key and position).
_BATCH_THREADS = uuid.UUID("5b0c6f2e-7d3a-4c1e-9f57-2a8d1e6b4c90")

#: Most mails one ``publish_many`` call appends.
MAX_BATCH = 10_000


def publish_many(
    sender: str | Identity,
    topic: str | Topic,
    bodies: Sequence[str],
    *,
    subject: str = "",
    priority: str = "normal",
    metadata: Any = None,
    idempotency_key: str | None = None,
    wait_for_offset: bool = True,
    delay: timedelta | float | None = None,
) -> Op[list[Mail]]:
    """Append a batch of mails to a topic in one statement, one per element of ``bodies``
    (at most ``MAX_BATCH``), all with the same ``subject``, ``priority`` and ``metadata``;
    return them in that order with their offsets, which are gapless and commit in order as
    ``publish``'s (a batch's mails get increasing offsets, not always consecutive ones: other
    publishes committed beside it may fall between them). All or nothing: one bad body and
    nothing is written. ``NotFound`` for a missing topic or sender. ``wait_for_offset=False``:
    as ``publish``'s (mails returned pending, ``log_offset`` None, when the sequencer was
    busy). ``delay``: as ``publish``'s, for every mail of the batch (a queue topic's).

    ``idempotency_key`` (1-200 characters; the sender's key space, shared with ``publish`` and
    ``send``): a retried batch is stored once. The key is stored on the batch's first mail
    (the others carry none; their thread ids derive from the sender, key and position); when
    the sender's mail already holds the key for this batch (same topic, bodies, subject,
    priority, metadata and delay), its mails are returned as they are now (those retention
    deleted are missing) and nothing is written, even if the sender has retired since;
    ``Conflict`` when the key holds another request. Retry a keyed batch that raised
    ``ConnectionLost`` with the same arguments."""
    sender_name = identity_name(sender, "sender")
    t = topic_name(topic)
    if not isinstance(wait_for_offset, bool):
        raise InvalidArgument("wait_for_offset must be a bool")
    if isinstance(bodies, str) or not isinstance(bodies, Sequence):
        raise InvalidArgument(f"bodies must be a list of strings, got {type(bodies).__name__}")
    if not 1 <= len(bodies) <= MAX_BATCH:
        raise InvalidArgument(f"bodies must hold 1 to {MAX_BATCH} mails, got {len(bodies)}")
    subject = check_str(subject, "subject", max_chars=MAX_SUBJECT_CHARS, empty=True)
    for body in bodies:
        check_body(body)
    check_choice(priority, "priority", PRIORITIES)
    delay_s = _check_delay(delay)
    key = None
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=200)
    metadata_json = dump_json(metadata, "metadata")
    n = len(bodies)
    hashed = None
    if key is None:
        thread_ids = [str(uuid.uuid4()) for _ in range(n)]
    else:
        request: tuple[Any, ...] = ("publish_many", t, list(bodies), subject, priority, metadata)
        if delay_s is not None:
            request += (delay_s,)
        hashed = request_hash(*request)
        thread_ids = [
            str(uuid.uuid5(_BATCH_THREADS, f"{sender_name}\0{key}\0{k}")) for k in range(n)
        ]
    rows = yield many(
        "publish_mails",
        sender=sender_name,
        topic=t,
        subjects=[subject] * n,
        bodies=list(bodies),
        priorities=[priority] * n,
        attachments=[None] * n,
        metadata=[metadata_json] * n,
        request_hashes=[hashed] + [None] * (n - 1),  # the first mail's: the batch's
        new_thread_ids=thread_ids,
        delay=delay_s,
        idempotency_key=key,
    )
    if rows:
        mails = [Mail.from_row(r) for r in rows]
        topic_id = int(rows[0]["topic_id"])
    elif key is not None and hashed is not None:
        found = yield many(
            "published_batch", sender=sender_name, idempotency_key=key, thread_ids=thread_ids
        )
        if not found:
            # The key may hold a single send or publish (not on the batch's threads): by_key
            # raises Conflict for it; no mail holds the key: why nothing was written.
            yield from by_key(sender_name, key, hashed)
            raise (yield from _refusal(sender_name, t, delay_s is not None))
        if found[0]["batch_hash"] != hashed:
            raise Conflict(
                f"idempotency key {key!r} of {sender_name!r} was used for a different request "
                f"(mail {found[0]['id']})",
                constraint="mail_idempotency_key",
                sqlstate=None,
            )
        mails = [Mail.from_row(r) for r in found]
        topic_id = (yield from _require_topic(t)).id
    else:
        raise (yield from _refusal(sender_name, t, delay_s is not None))
    if not wait_for_offset:
        return mails
    return (yield from _sequenced(topic_id, mails))


def read(topic: str | Topic, *, after: int = 0, limit: int = 100) -> Op[list[Mail]]:
    """A topic's log after offset ``after``, in offset order."""
    t = topic_name(topic)
    check_int(after, "after", minimum=0)
    check_limit(limit)
    rows = yield many("read_topic", topic=t, after=after, limit=limit)
    if len(rows) < limit and (yield value("sequence_pending", topic=t)):
        # At the end of the log, mail committed without an offset (its publisher died
        # between its commit and the sequencer) gets one now: nothing stays out of the log.
        rows = yield many("read_topic", topic=t, after=after, limit=limit)
    if not rows:
        yield from _require_topic(t)
    return [Mail.from_row(r) for r in rows]


def commit(identity: str | Identity, topic: str | Topic, offset: int) -> Op[int]:
    """Store that ``identity`` has processed ``topic`` up to ``offset``; return the stored
    offset. Monotone: a smaller, late commit never moves it back. An offset past the
    topic's last is ``InvalidArgument``."""
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


def offset(identity: str | Identity, topic: str | Topic) -> Op[int]:
    """The identity's stored offset of a topic (0 if it never committed)."""
    name, t = identity_name(identity), topic_name(topic)
    row = yield one("stored_offset", identity=name, topic=t)
    if row is None:
        yield from require(name)
        yield from _require_topic(t)
    return int(row["last_offset"])


def poll(identity: str | Identity, *, limit: int = 100) -> Op[Poll]:
    """In one round trip: the unread inbox (newest first) and, per subscribed broadcast
    topic, up to ``limit`` mails after the stored offset, with that offset. Reading does
    not move the offset: ``commit`` does."""
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
    identity: str | Identity,
    topic: str | Topic,
    *,
    ttl: timedelta | float = 30.0,
    wait: timedelta | float = 0.0,
    complete: Claim | tuple[int, str] | None = None,
) -> Op[Claim | None]:
    """Claim the first available message of a queue topic the identity subscribes to (the
    most urgent first: ``urgent``, ``normal``, ``low``; within a priority, the oldest),
    for ``ttl`` (a timedelta or seconds); wait up to ``wait`` for one (woken by the publishing
    commit, or by a lease running out or a delayed message falling due). None when there is
    none. A delayed message (``publish(..., delay=)``, ``release(..., delay=)``) is passed
    over until it is due.

    A message whose lease expired is claimable again (its next attempt); one that used
    ``max_attempts`` becomes a dead letter when a claim's walk (in that order) reaches it. No
    message is held by two live leases.

    ``complete``: a claim (``Claim`` or ``(mail_id, token)``) to complete first, in the
    same statement, so a worker's loop (``held = claim(..., complete=held)``) is one round
    trip per message. If its lease was lost, ``Conflict`` and nothing is claimed.
    """
    name, t, seconds, wait_s, done = check_claim_args(identity, topic, ttl, wait, complete)
    deadline = time.monotonic() + wait_s
    listening = False
    heard_until = 0.0  # when the topic's registration (queue_listen) runs out, by this clock
    while True:
        held = yield from claim_once(name, t, seconds, done)
        done = None  # completed by the first attempt (which raised if it could not)
        if held is not None:
            return held
        topic_id, expiry = yield from claim_state(name, t)
        now = time.monotonic()
        remaining = deadline - now
        if remaining <= 0:
            return None
        if not listening:  # listen first, then look once more: no lost wake-up
            yield Listen((QUEUE_CHANNEL, topic_id))
            listening = True
        if heard_until - now < min(remaining, 1.0):
            # Publishes notify only topics someone waits on (migration 0050): register (for
            # the wait, up to _LISTEN_SPAN at a time), after the LISTEN, then look once more.
            span = min(remaining, _LISTEN_SPAN) + 1.0
            registered = yield from listen_topics(
                [topic_id], timedelta(seconds=span), patience=remaining
            )
            if not registered:  # publishes in flight past the deadline
                deadline = now
            heard_until = now + span
            continue
        sleep = remaining if expiry is None else min(remaining, expiry + 0.001)
        yield Sleep(max(0.0, min(sleep, heard_until - now - 1.0)))


def claim_once(
    identity: str, topic: str, lease: float, done: tuple[int, str] | None = None
) -> Op[Claim | None]:
    """One claim attempt (``store.topics.claim`` repeats it while it may wait), completing the
    ``done`` claim (mail id, token) first in the same statement: if the claim is refused, that
    refusal and nothing completed; if that lease was lost, ``InvalidArgument`` and nothing is
    claimed."""
    done_id, done_token = done if done is not None else (None, None)
    while True:
        rows = yield many(
            "claim_queue_item",
            identity=identity,
            topic=topic,
            lease=lease,
            done_id=done_id,
            done_token=done_token,
        )
        claimed = None
        completed = settled = False
        for row in rows:  # at most two: the claim completed, the row claimed (or settled)
            act = row["act"]
            if act == "claimed":
                claimed = row
            elif act == "done":
                completed = True
            else:
                settled = True
        if done_id is not None and not completed:
            yield from claim_state(identity, topic)  # a refused claim completes nothing: say why
            raise _lost(done_id)
        if not settled:
            return None if claimed is None else Claim.from_row(claimed)
        # The walk met an expired last attempt first and made it a dead letter (rare): the
        # next statement's walk goes past it. The claim to complete was completed.
        done_id = done_token = None


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
        raise InvalidArgument(
            f"identity {identity!r} is not subscribed to queue {topic!r}: a worker subscribes "
            "to a queue before it claims (topics.subscribe; CLI: topic subscribe)"
        )
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
    wait_s = check_duration(wait, "wait", maximum=_LONGEST).total_seconds()
    return name, t, seconds, wait_s, done


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


def _lost(mail_id: int) -> Conflict:
    return Conflict(
        f"the lease on mail {mail_id} was lost: it was completed, released, claimed again "
        "after it expired, or dead-lettered after its last attempt expired",
        constraint=None,
        sqlstate=None,
    )


def complete(claim: Claim | tuple[int, str]) -> Op[None]:
    """Finish a claimed message: it is never handed out again. ``Conflict`` when
    the claim's lease was lost (completed, released or claimed again by someone else).

    ``claim`` is a ``Claim`` or a ``(mail_id, token)`` pair (e.g. handed to another
    process), here and in ``release`` and ``extend``."""
    mail_id, token = _check_claim(claim)
    row = yield one("complete_claim", mail_id=mail_id, token=token)
    if row is None:
        raise _lost(mail_id)


def release(
    claim: Claim | tuple[int, str],
    *,
    error: str | None = None,
    delay: timedelta | float | None = None,
) -> Op[str]:
    """Give a claimed message back (with the reason in ``error``): it becomes claimable
    again, or a dead letter when it used its last attempt; return which (``"available"``
    or ``"dead"``). ``Conflict`` when the lease was lost.

    ``delay`` (a timedelta or seconds, up to a year): claimable again only once it
    passed, a retry's backoff (the caller picks it, e.g. from ``claim.attempt``)."""
    mail_id, token = _check_claim(claim)
    if error is not None:
        check_str(error, "error", max_chars=_MAX_ERROR_CHARS, empty=True)
    delay_s = _check_delay(delay)
    row = yield one("release_claim", mail_id=mail_id, token=token, error=error, delay=delay_s)
    if row is None:
        raise _lost(mail_id)
    state: str = row["state"]
    return state


def extend(claim: Claim | tuple[int, str], ttl: timedelta | float) -> Op[Claim]:
    """Renew a claim's lease to end ``ttl`` (a timedelta or seconds) from now; return the
    updated claim. ``Conflict`` when the lease was lost."""
    mail_id, token = _check_claim(claim)
    seconds = _check_lease(ttl)
    row = yield one("extend_claim", mail_id=mail_id, token=token, lease=seconds)
    if row is None:
        raise _lost(mail_id)
    return Claim.from_row(row)


def dead_letters(topic: str | Topic) -> Op[list[DeadLetter]]:
    """A queue topic's dead letters, oldest first, with attempts and last error."""
    t = topic_name(topic)
    rows = yield many("dead_letters", topic=t)
    if not rows:
        yield from _require_topic(t)
    return [DeadLetter.from_row(r) for r in rows]


def requeue(mail_id: int) -> Op[None]:
    """Make a dead letter claimable again (its attempts start over)."""
    check_id(mail_id, "mail_id")
    row = yield one("requeue", mail_id=mail_id)
    if row is None:
        found = yield one("queue_item_state", mail_id=mail_id)
        if not found["mail_exists"]:
            raise NotFound(f"mail {mail_id} does not exist")
        if found["state"] is None:
            raise NotFound(f"mail {mail_id} is not a queue message")
        raise InvalidArgument(f"mail {mail_id} is {found['state']}, not a dead letter")


def prune(*, older_than: timedelta | float | None = None) -> Op[dict[str, int]]:
    """Delete topic mail older than its topic's retention (or, when given, than
    ``older_than``, a timedelta or seconds, for every topic) and return
    ``{topic: deleted}``.

    Kept regardless of age: queue messages not completed (available, claimed, dead) and
    broadcast mail that a subscriber has not passed by its stored offset. Direct mail is
    never removed by retention.
    """
    age = None if older_than is None else check_duration(older_than, "older_than")
    rows = yield many("apply_retention", older_than=age)
    return {r["name"]: int(r["deleted"]) for r in rows}


class TopicCalls(Area[FaceT]):
    """``store.topics``: broadcast topics read by offset, and work queues (see
    ``ikigai_store.topics``). Topics and identities may be passed by name or as objects."""

    create = operation(create)
    get = operation(get)
    list = operation(list_topics)
    delete = operation(delete)
    subscribe = operation(subscribe)
    unsubscribe = operation(unsubscribe)
    subscribers = operation(subscribers)
    subscriptions = operation(subscriptions)
    poll = operation(poll)
    read = operation(read)
    commit = operation(commit)
    offset = operation(offset)
    claim = operation(claim)
    complete = operation(complete)
    release = operation(release)
    extend = operation(extend)
    dead_letters = operation(dead_letters)
    requeue = operation(requeue)
    prune = operation(prune)
