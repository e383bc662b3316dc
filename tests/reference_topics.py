"""In-memory reference model of topics, consumer offsets and work queues: the store's oracle.

Written from issue 9 ("Topics and offsets", "API") and the README's "Topics and work queues", not
from the SQL; it imports nothing from ``ikigai_store``. It composes the mail model
(``RefMailWorld`` in tests/reference_mail.py): identities, mail rows, recipient copies, the
shared idempotency-key space and the clock (``mail.now``) live there; this module adds what a
topic adds. Everything is kept in plain dicts and recomputed on every read.

Topics: a name matches ``NAME`` and is unique; ``kind`` is ``broadcast`` or ``queue``;
``retention`` a timedelta or seconds in (0, 36500 days]; ``max_attempts`` an int in [1, 1000]
(not a bool). ``created_at`` is ``now``. Bad arguments are ``RefInvalid``, a taken name
``RefConflict``. A topic has a log
(offset -> mail id) of its retained mail, and ``last_offset``, the highest offset ever given
(0 at first). ``list_topics`` (``topics.list``) is by name: (topic, subscriber count,
retained mail, last offset). ``delete`` removes the topic with its log (the mails, their
inbox copies, queue work), its subscriptions and offsets; refused (``RefInvalid``, naming the
count) while a queue message is available or claimed; a missing topic is ``RefNotFound``. A new
topic of an old name starts again at offset 1.

Subscriptions: a set of (identity, topic). ``subscribe`` is idempotent; a missing identity is
``RefNotFound``, a retired one ``RefInvalid``; a missing topic is created as a broadcast topic
with the defaults (only when the subscription is made). ``unsubscribe`` is idempotent (also for
retired identities); it keeps the stored offset; with no subscription, a missing identity or
topic is ``RefNotFound``. ``subscribers`` (identity names, sorted; retired ones too) and
``subscriptions`` (topics by name) need the topic / identity.

Publishing: checks in order: arguments; the idempotency key (the mail model's rule: the same
request, ``("publish", topic, subject, body, priority, attachments, metadata)``, returns the
original as it is now, writing nothing and taking no offset; any other request with the key is
``RefConflict``); a missing sender ``RefNotFound``; a retired sender ``RefInvalid``; a missing
topic ``RefNotFound``. The mail gets offset ``last_offset + 1`` (gapless from 1), a new thread,
no parent; on a broadcast topic its recipients are the current subscribers that are not retired,
minus the sender, each with an unread copy; on a queue topic it has no recipients and one
available queue message (0 attempts).

Reading: ``read(topic, after, limit)`` the log with offset > ``after`` in offset order, at most
``limit`` (``after`` >= 0, ``limit`` >= 1). ``poll(identity, limit)``: the identity's effective
unread copies (the mail model's ``inbox(state="unread")``: newest first, at most ``limit``), and
for every subscribed *broadcast* topic its stored offset and up to ``limit`` mails after it;
any existing identity may poll (retired too). ``offset`` is the stored offset (0 if none).
``commit(identity, topic, offset)``: ``offset`` >= 0; missing identity, then missing topic
``RefNotFound``; an offset past ``last_offset`` is ``RefInvalid``; otherwise the stored offset
becomes ``max(stored, offset)`` and is returned. Subscribing is not required to commit.

Queues: a message is ``available``, ``claimed`` (a token, a lease end, a holder), ``done`` or
``dead``, with ``attempts`` and ``last_error``. ``claim(identity, topic, lease)``: ``lease`` in
(0, 86400] seconds; refusals in order: missing identity, missing topic (``RefNotFound``), retired
identity, not a queue, not subscribed (``RefInvalid``). A claim walks the topic's messages that
are available or whose lease expired (``lease_until <= now``), by their mail's priority (urgent,
normal, low) and within one lowest id first: an expired lease
that used its last attempt becomes a dead letter with ``last_error = "lease expired"`` and the
walk goes on; the first other one is taken: ``attempts + 1``, a new token, ``lease_until = now +
lease`` (an expired lease taken over records ``"lease expired"``); None when the walk ends.
``complete``, ``release`` and ``extend`` need the message's current claim token (else
``RefConflict``); ``claim(..., complete=(mail id, token))`` completes that claim first, as
``complete`` would, once the claim itself is known to be allowed (a refused claim completes
nothing; a lost lease refuses the claim and claims nothing): ``complete`` makes it ``done`` (never
handed out again); ``release(error)`` makes it ``available``, or ``dead`` when it used
``max_attempts``, and stores ``error`` (None included) as ``last_error``; ``extend`` moves
``lease_until`` to ``now + lease``. ``dead_letters(topic)`` lists dead messages by id (a
broadcast topic has none); ``requeue(mail_id)``: no queue message ``RefNotFound``, not dead
``RefInvalid``; else available with 0 attempts, due at once.

Delays: ``publish(..., delay=s)`` (and ``publish_many``'s), ``s`` seconds in [0, 365 days]
(else ``RefInvalid``, checked first), to a queue topic makes its message ``available`` but due
only at ``now + s`` (``available_at``); to a broadcast topic it is ``RefInvalid`` (after the
sender and topic checks; a publish returning the original of a used key is not refused). A
claim's walk passes an available message whose ``available_at`` is after ``now``.
``release(..., delay=s)`` makes a message that goes back to ``available`` due at ``now + s``
(without a delay: at once). A keyed publish's request includes its delay when one is given.

Retention: ``apply_retention()`` returns ``{topic: deleted}`` for every topic. A topic's mail is
deleted when it was created more than ``retention`` ago (``created_at < now - retention``),
unless it is a queue message not ``done``, or a broadcast mail whose offset is above the stored
offset (0 if none) of some current subscriber (retired or not). Direct mail is never deleted.
``last_offset`` never goes back. A deleted mail frees its idempotency key (the mail is gone).

Decisions where the issue and README are silent (the reading a demanding user expects): a lease
that expired is only acted on by a later claim of its topic that walks to it (one taking a
message with a lower id stops before it): until then its holder may still complete, release or
extend it, and a last attempt's expired lease shows as a dead letter only after that claim (the
issue guards only "work that someone else now holds");
commits need no subscription and retired identities may commit; queue topics are not in
``poll``; retention of queue mail ignores consumer offsets.

Invariants: offsets in a log are within 1..last_offset and increase with mail id (serial
publishes only: concurrent ones are sequenced after their commits, so in commit order, which
tests/property/test_topics_publishers.py checks); a claimed
message has a token and a lease, no other has either; attempts never exceed max_attempts while
claimed; every stored offset is at most its topic's last offset.
"""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.reference_mail import (
    MAIL_FIELDS,
    NAME,
    PRIORITIES,
    RefConflict,
    RefInvalid,
    RefItem,
    RefMail,
    RefMailWorld,
    RefNotFound,
)

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_RETENTION",
    "LEASE_EXPIRED",
    "MAX_LEASE",
    "TOPIC_KINDS",
    "TOPIC_MAIL_FIELDS",
    "RefClaim",
    "RefTopic",
    "RefTopicWorld",
    "RefWork",
]

TOPIC_KINDS = ("broadcast", "queue")
DEFAULT_RETENTION = timedelta(days=7)
DEFAULT_MAX_ATTEMPTS = 5
MAX_RETENTION = timedelta(days=36500)
MAX_LEASE = 86400.0
MAX_DELAY = timedelta(days=365)
#: The claim order of priorities (migration 0048): urgent first.
RANKS = {"urgent": 0, "normal": 1, "low": 2}
LEASE_EXPIRED = "lease expired"
TOPIC_MAIL_FIELDS = (*MAIL_FIELDS, "topic", "log_offset")
#: Queue states that are unfinished work (a topic with any cannot be deleted).
OPEN_STATES = frozenset({"available", "claimed"})


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise RefInvalid(f"bad {what} name {value!r}")
    return value


def _int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value < 2**63:
        raise RefInvalid(f"{what} must be an integer >= {minimum}, got {value!r}")
    return value


def _lease(value: object) -> timedelta:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not 0 < value <= MAX_LEASE
    ):
        raise RefInvalid(f"lease must be seconds in (0, {MAX_LEASE:g}], got {value!r}")
    return timedelta(seconds=value)


def _delay(value: object) -> timedelta | None:
    """A delay: None, or a timedelta / finite seconds (not a bool) in [0, ``MAX_DELAY``]."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        length = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        length = timedelta(seconds=value)
    else:
        raise RefInvalid(f"delay must be a timedelta or seconds, got {value!r}")
    if not timedelta(0) <= length <= MAX_DELAY:
        raise RefInvalid(f"delay must be from 0 to {MAX_DELAY}, got {value!r}")
    return length


def _claim_arg(mail_id: object, token: object) -> None:
    _int(mail_id, "claim mail id", 1)
    try:
        uuid.UUID(str(token))
    except ValueError:
        raise RefInvalid(f"not a claim token: {token!r}") from None


@dataclass
class RefTopic:
    name: str
    kind: str
    retention: timedelta
    max_attempts: int
    created_at: datetime
    last_offset: int = 0
    log: dict[int, int] = field(default_factory=dict)  # offset -> mail id

    def view(self) -> tuple[Any, ...]:
        """A store ``Topic`` without its id."""
        return (self.name, self.kind, self.retention, self.max_attempts, self.created_at)


@dataclass
class RefWork:
    """One queue message's processing state."""

    mail_id: int
    topic: str
    state: str = "available"
    attempts: int = 0
    holder: str | None = None
    token: str | None = None
    lease_until: datetime | None = None
    last_error: str | None = None
    available_at: datetime | None = None


@dataclass(frozen=True)
class RefClaim:
    mail: dict[str, Any]
    attempt: int
    lease_until: datetime
    token: str

    def view(self) -> tuple[Any, ...]:
        return (self.mail, self.attempt, self.lease_until, self.token)


@dataclass
class RefTopicWorld:
    """Topics, subscriptions, offsets and queue work on top of a ``RefMailWorld``."""

    mail: RefMailWorld = field(default_factory=RefMailWorld)
    topics: dict[str, RefTopic] = field(default_factory=dict)
    subs: set[tuple[str, str]] = field(default_factory=set)  # (identity, topic)
    offsets: dict[tuple[str, str], int] = field(default_factory=dict)
    work: dict[int, RefWork] = field(default_factory=dict)
    placed: dict[int, tuple[str, int]] = field(default_factory=dict)  # mail id -> (topic, off)
    batches: dict[int, list[int]] = field(default_factory=dict)  # keyed batch: first id -> ids

    # -- helpers -------------------------------------------------------------------------------

    @property
    def now(self) -> datetime:
        return self.mail.now

    def view(self, mail: RefMail) -> dict[str, Any]:
        """The fields a store ``Mail`` must have (topic and offset None for direct mail)."""
        topic, offset = self.placed.get(mail.id, (None, None))
        return mail.view() | {"topic": topic, "log_offset": offset}

    def item_view(self, item: RefItem) -> tuple[Any, ...]:
        return (self.view(item.mail), item.state, item.read_at, item.acked_at, item.snoozed_until)

    def topic(self, name: object) -> RefTopic:
        """The topic of that (valid) name; ``RefNotFound`` otherwise."""
        found = self.topics.get(_name(name, "topic"))
        if found is None:
            raise RefNotFound(f"topic {name!r} does not exist", str(name))
        return found

    def _live(self, name: str, action: str) -> None:
        if self.mail.identity(name).retired_at is not None:
            raise RefInvalid(f"identity {name!r} is retired: it cannot {action}", name)

    def _subscribers(self, topic: str) -> list[str]:
        return sorted(who for who, t in self.subs if t == topic)

    def _drop_mail(self, mail_id: int) -> None:
        del self.mail.mails[mail_id]
        for key in [k for k in self.mail.copies if k[1] == mail_id]:
            del self.mail.copies[key]
        self.placed.pop(mail_id, None)
        self.work.pop(mail_id, None)

    # -- topics --------------------------------------------------------------------------------

    def create(
        self,
        name: object,
        kind: object = "broadcast",
        *,
        retention: object = DEFAULT_RETENTION,
        max_attempts: object = DEFAULT_MAX_ATTEMPTS,
    ) -> RefTopic:
        """A new topic (see the module docstring)."""
        name = _name(name, "topic")
        if kind not in TOPIC_KINDS:
            raise RefInvalid(f"bad kind {kind!r}")
        if isinstance(retention, (int, float)) and not isinstance(retention, bool):
            retention = timedelta(seconds=retention) if abs(retention) < 1e12 else MAX_RETENTION * 2
        if not isinstance(retention, timedelta) or not timedelta(0) < retention <= MAX_RETENTION:
            raise RefInvalid(f"bad retention {retention!r}")
        attempts = _int(max_attempts, "max_attempts", 1)
        if attempts > 1000:
            raise RefInvalid(f"max_attempts {attempts} is above 1000")
        if name in self.topics:
            raise RefConflict(f"topic {name!r} already exists", name)
        self.topics[name] = RefTopic(name, str(kind), retention, attempts, self.now)
        return self.topics[name]

    def list_topics(self) -> list[tuple[tuple[Any, ...], int, int, int, int, int, int]]:
        """``TopicInfo`` as (topic view, subscribers, messages, last offset, available,
        claimed, dead), by name."""
        states = [(w.topic, w.state) for w in self.work.values()]
        return [
            (
                t.view(),
                len(self._subscribers(n)),
                len(t.log),
                t.last_offset,
                *(states.count((n, state)) for state in ("available", "claimed", "dead")),
            )
            for n, t in sorted(self.topics.items())
        ]

    def delete(self, name: object) -> None:
        """Delete a topic and everything of it, unless a queue message is still open."""
        topic = self.topic(name)
        open_work = [
            w for w in self.work.values() if w.topic == topic.name and w.state in OPEN_STATES
        ]
        if open_work:
            raise RefInvalid(
                f"topic has {len(open_work)} unfinished", f"{len(open_work)} unfinished"
            )
        for mail_id in list(topic.log.values()):
            self._drop_mail(mail_id)
        del self.topics[topic.name]
        self.subs = {s for s in self.subs if s[1] != topic.name}
        self.offsets = {k: v for k, v in self.offsets.items() if k[1] != topic.name}

    # -- subscriptions -------------------------------------------------------------------------

    def subscribe(self, identity: object, topic: object) -> None:
        """Idempotent; a missing topic is created as broadcast."""
        who, name = _name(identity, "identity"), _name(topic, "topic")
        self._live(who, "subscribe")
        if name not in self.topics:
            self.create(name)
        self.subs.add((who, name))

    def unsubscribe(self, identity: object, topic: object) -> None:
        """Idempotent; the stored offset stays."""
        who, name = _name(identity, "identity"), _name(topic, "topic")
        if (who, name) in self.subs:
            self.subs.remove((who, name))
            return
        self.mail.identity(who)
        self.topic(name)

    def subscribers(self, topic: object) -> list[str]:
        return self._subscribers(self.topic(topic).name)

    def subscriptions(self, identity: object) -> list[tuple[Any, ...]]:
        who = _name(identity, "identity")
        self.mail.identity(who)
        return [self.topics[t].view() for w, t in sorted(self.subs, key=lambda s: s[1]) if w == who]

    # -- publishing and reading ----------------------------------------------------------------

    def publish(
        self,
        sender: object,
        topic: object,
        subject: str,
        body: str,
        *,
        priority: str = "normal",
        metadata: Any = None,
        attachments: Any = None,
        idempotency_key: str | None = None,
        id: int | None = None,
        new_thread_id: str | None = None,
        delay: object = None,
    ) -> RefMail:
        """Append a mail to a topic (see the module docstring). ``id`` and ``new_thread_id``:
        what the store chose, as for ``RefMailWorld.send``."""
        who, name = _name(sender, "sender"), _name(topic, "topic")
        if priority not in PRIORITIES:
            raise RefInvalid(f"bad priority {priority!r}", priority)
        wait = _delay(delay)
        if idempotency_key is not None and not 0 < len(idempotency_key) <= 200:
            raise RefInvalid("idempotency_key must have 1 to 200 characters")
        request: tuple[Any, ...] = ("publish", name, subject, body, priority, attachments, metadata)
        if wait is not None:
            request += (wait,)
        original = self.mail._replay(who, idempotency_key, request)
        if original is not None:
            return original
        self._live(who, "publish")
        target = self.topic(name)
        if wait is not None and target.kind != "queue":
            raise RefInvalid(f"topic {name!r} is a {target.kind} topic: no delays", name)
        to: tuple[str, ...] = ()
        if target.kind == "broadcast":
            to = tuple(n for n in self._subscribers(name) if n != who and not self.mail.retired(n))
        mail = RefMail(
            self.mail._next_id(id),
            new_thread_id if new_thread_id is not None else str(uuid.uuid4()),
            None,
            who,
            to,
            subject,
            body,
            priority,
            None,
            attachments,
            metadata,
            idempotency_key,
            False,
            self.now,
            request,
        )
        self.mail._deliver(mail)
        target.last_offset += 1
        target.log[target.last_offset] = mail.id
        self.placed[mail.id] = (name, target.last_offset)
        if target.kind == "queue":
            due = None if wait is None else self.now + wait
            self.work[mail.id] = RefWork(mail.id, name, available_at=due)
        return mail

    def publish_many(
        self,
        sender: object,
        topic: object,
        bodies: Any,
        *,
        subject: str = "",
        priority: str = "normal",
        metadata: Any = None,
        idempotency_key: str | None = None,
        ids: list[int] | None = None,
        new_thread_ids: list[str] | None = None,
        delay: object = None,
    ) -> list[RefMail]:
        """A batch: ``bodies`` a list (not a string) of 1 to 10,000 bodies, each published as
        ``publish`` would (no attachments), in order, all or nothing: the arguments are
        checked (priority, then each body, then the key) before anything is written. ``ids``
        and ``new_thread_ids``: what the store chose.

        ``idempotency_key``: the sender's key space, shared with ``publish`` and ``send``.
        The batch's first mail carries the key and the batch's request (topic, bodies,
        subject, priority, metadata, and the delay when given); the others carry none. A
        batch whose key the sender's mail already holds is that batch again: its mails are
        returned as they are now (even if the sender has retired since) and nothing is
        written; ``RefConflict`` when the key holds another request (a single publish or
        send's, or another batch's)."""
        who, name = _name(sender, "sender"), _name(topic, "topic")
        if isinstance(bodies, str) or not isinstance(bodies, list | tuple):
            raise RefInvalid("bodies must be a list of strings")
        if not 1 <= len(bodies) <= 10_000:
            raise RefInvalid("bodies must hold 1 to 10000 mails")
        if priority not in PRIORITIES:
            raise RefInvalid(f"bad priority {priority!r}", priority)
        wait = _delay(delay)
        if idempotency_key is not None and not 0 < len(idempotency_key) <= 200:
            raise RefInvalid("idempotency_key must have 1 to 200 characters")
        request: tuple[Any, ...] = (
            "publish_many",
            name,
            tuple(bodies),
            subject,
            priority,
            metadata,
        )
        if wait is not None:
            request += (wait,)
        original = self.mail._replay(who, idempotency_key, request)
        if original is not None:
            return [self.mail.mails[i] for i in self.batches[original.id] if i in self.mail.mails]
        self._live(who, "publish")
        target = self.topic(name)
        if wait is not None and target.kind != "queue":
            raise RefInvalid(f"topic {name!r} is a {target.kind} topic: no delays", name)
        mails = [
            self.publish(
                who,
                name,
                subject,
                body,
                priority=priority,
                metadata=metadata,
                id=None if ids is None else ids[k],
                new_thread_id=None if new_thread_ids is None else new_thread_ids[k],
                delay=delay,
            )
            for k, body in enumerate(bodies)
        ]
        if idempotency_key is not None:
            mails[0].idempotency_key, mails[0].request = idempotency_key, request
            self.batches[mails[0].id] = [m.id for m in mails]
        return mails

    def read(self, topic: object, *, after: object = 0, limit: object = 100) -> list[RefMail]:
        """The log after ``after``, by offset."""
        start = _int(after, "after", 0)
        most = _int(limit, "limit", 1)
        log = self.topic(topic).log
        return [self.mail.mails[log[o]] for o in sorted(log) if o > start][:most]

    def poll(
        self, identity: object, *, limit: object = 100
    ) -> tuple[list[RefItem], dict[str, list[RefMail]], dict[str, int]]:
        """(unread inbox, {topic: mails after the stored offset}, {topic: stored offset})."""
        who = _name(identity, "identity")
        most = _int(limit, "limit", 1)
        inbox = self.mail.inbox(who, state="unread", limit=most)
        news: dict[str, list[RefMail]] = {}
        offsets: dict[str, int] = {}
        for w, name in sorted(self.subs, key=lambda s: s[1]):
            if w != who or self.topics[name].kind != "broadcast":
                continue
            offsets[name] = self.offsets.get((who, name), 0)
            news[name] = self.read(name, after=offsets[name], limit=most)
        return inbox, news, offsets

    def offset(self, identity: object, topic: object) -> int:
        who = _name(identity, "identity")
        name = _name(topic, "topic")
        self.mail.identity(who)
        self.topic(name)
        return self.offsets.get((who, name), 0)

    def commit(self, identity: object, topic: object, offset: object) -> int:
        """Monotone advance, never past the topic's last offset."""
        who, name = _name(identity, "identity"), _name(topic, "topic")
        to = _int(offset, "offset", 0)
        stored = self.offset(who, name)
        last = self.topics[name].last_offset
        if to > last:
            raise RefInvalid(f"offset {to} is past the last offset ({last})", "past")
        self.offsets[(who, name)] = max(stored, to)
        return self.offsets[(who, name)]

    # -- queues --------------------------------------------------------------------------------

    def _claim_view(self, work: RefWork) -> RefClaim:
        assert work.lease_until is not None and work.token is not None
        return RefClaim(
            self.view(self.mail.mails[work.mail_id]), work.attempts, work.lease_until, work.token
        )

    def _expired(self, work: RefWork) -> bool:
        return (
            work.state == "claimed"
            and work.lease_until is not None
            and work.lease_until <= self.now
        )

    def claim(
        self,
        identity: object,
        topic: object,
        *,
        lease: object = 30.0,
        complete: tuple[object, object] | None = None,
        token: str | None = None,
    ) -> RefClaim | None:
        """Take the first claimable message (by priority, urgent first, then id), after
        completing ``complete`` (mail id, token);
        ``token``: the one the store made."""
        who, name = _name(identity, "identity"), _name(topic, "topic")
        if complete is not None:
            _claim_arg(*complete)
        seconds = _lease(lease)
        self.mail.identity(who)
        target = self.topic(name)
        self._live(who, "claim")
        if target.kind != "queue":
            raise RefInvalid(f"topic {name!r} is not a queue", name)
        if (who, name) not in self.subs:
            raise RefInvalid(f"identity {who!r} is not subscribed to {name!r}", who)
        if complete is not None:
            self.complete(*complete)
        mine = sorted(
            (w for w in self.work.values() if w.topic == name),
            key=lambda w: (RANKS[self.mail.mails[w.mail_id].priority], w.mail_id),
        )
        for work in mine:
            if work.state == "available" and work.available_at is not None:
                if work.available_at > self.now:
                    continue  # delayed: not due yet
            elif work.state != "available" and not self._expired(work):
                continue
            if work.state == "available" or work.attempts < target.max_attempts:
                break
            self._settle(work, "dead", LEASE_EXPIRED)  # an expired last attempt, walked past
        else:
            return None
        if work.state == "claimed":
            work.last_error = LEASE_EXPIRED
        work.state = "claimed"
        work.attempts += 1
        work.holder = who
        work.token = token if token is not None else str(uuid.uuid4())
        work.lease_until = self.now + seconds
        return self._claim_view(work)

    def _settle(self, work: RefWork, state: str, error: str | None) -> None:
        work.state, work.last_error = state, error
        work.holder = work.token = work.lease_until = None

    def _held(self, mail_id: object, token: object) -> RefWork:
        """The message under this claim; ``RefConflict`` when the token is not its current one
        (the lease was lost: someone else's state now)."""
        _claim_arg(mail_id, token)
        assert isinstance(mail_id, int)
        work = self.work.get(mail_id)
        if work is None or work.state != "claimed" or work.token != token:
            raise RefConflict(f"the lease on mail {mail_id} was lost", f"lease on mail {mail_id}")
        return work

    def complete(self, mail_id: object, token: object) -> None:
        self._settle(self._held(mail_id, token), "done", None)

    def release(
        self, mail_id: object, token: object, error: str | None = None, delay: object = None
    ) -> str:
        """Give the message back; ``"available"`` (due after ``delay``), or ``"dead"`` after
        its last attempt. The claim is checked before the delay (as the store does)."""
        _claim_arg(mail_id, token)
        wait = _delay(delay)
        work = self._held(mail_id, token)
        dead = work.attempts >= self.topics[work.topic].max_attempts
        self._settle(work, "dead" if dead else "available", error)
        work.available_at = None if dead or wait is None else self.now + wait
        return work.state

    def extend(self, mail_id: object, token: object, lease: object) -> RefClaim:
        """Renew the lease to ``now + lease`` (arguments are checked before the claim)."""
        _claim_arg(mail_id, token)
        seconds = _lease(lease)
        work = self._held(mail_id, token)
        work.lease_until = self.now + seconds
        return self._claim_view(work)

    def dead_letters(self, topic: object) -> list[tuple[dict[str, Any], int, str | None]]:
        """(mail view, attempts, last error) of the topic's dead messages, by id."""
        name = self.topic(topic).name
        return [
            (self.view(self.mail.mails[w.mail_id]), w.attempts, w.last_error)
            for w in sorted(self.work.values(), key=lambda w: w.mail_id)
            if w.topic == name and w.state == "dead"
        ]

    def requeue(self, mail_id: object) -> None:
        key = _int(mail_id, "mail_id", 1)
        work = self.work.get(key)
        if work is None:
            raise RefNotFound(f"mail {key} is not a queue message")
        if work.state != "dead":
            raise RefInvalid(f"mail {key} is {work.state}, not a dead letter", work.state)
        work.state, work.attempts, work.available_at = "available", 0, None

    # -- retention -----------------------------------------------------------------------------

    def _kept(self, topic: RefTopic, offset: int, mail_id: int) -> bool:
        if not self.mail.mails[mail_id].created_at < self.now - topic.retention:
            return True
        if topic.kind == "queue":
            return self.work[mail_id].state != "done"
        return any(
            self.offsets.get((who, topic.name), 0) < offset for who in self._subscribers(topic.name)
        )

    def apply_retention(self) -> dict[str, int]:
        """Delete old topic mail no one still needs; ``{topic: deleted}`` for every topic."""
        deleted: dict[str, int] = {}
        for name, topic in self.topics.items():
            doomed = [o for o, m in topic.log.items() if not self._kept(topic, o, m)]
            for offset in doomed:
                self._drop_mail(topic.log.pop(offset))
            deleted[name] = len(doomed)
        return deleted

    # -- invariants ----------------------------------------------------------------------------

    def check(self) -> None:
        """Assert the model's own invariants (see the module docstring)."""
        self.mail.check()
        for name, topic in self.topics.items():
            offsets = sorted(topic.log)
            assert all(0 < o <= topic.last_offset for o in offsets)
            ids = [topic.log[o] for o in offsets]
            assert ids == sorted(ids)
            for offset, mail_id in topic.log.items():
                assert self.placed[mail_id] == (name, offset)
                assert (mail_id in self.work) == (topic.kind == "queue")
        for work in self.work.values():
            claimed = work.state == "claimed"
            assert claimed == (work.token is not None) == (work.lease_until is not None)
            assert not claimed or work.attempts <= self.topics[work.topic].max_attempts
        for (_, name), stored in self.offsets.items():
            assert 0 <= stored <= self.topics[name].last_offset
