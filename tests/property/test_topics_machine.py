"""Topics, consumer offsets and work queues through the real database agree with the model.

A Hypothesis state machine creates topics of both kinds (some with bad arguments or taken
names), subscribes and unsubscribes (also to missing topics, which creates them), publishes
single mails and batches with and without idempotency keys (reusing keys with the same or a
changed request, across single publishes and batches), sends direct
mail and reads or snoozes copies (so poll's inbox moves), reads logs, polls, commits offsets
(smaller, equal, larger, past the end, negative), claims queue messages with several lease
lengths, completes, releases and extends with current and stale claims (every ``Claim`` ever
returned is kept and replayed, as an object or a ``(mail_id, token)`` pair), requeues, applies
retention, retires identities and deletes topics, while a controllable clock (``ikigai.now``,
see tests/mailtools.py) advances past leases and retention periods. Every call is mirrored in
``RefTopicWorld`` (tests/reference_topics.py). A refusal must be the same ``ik`` error as the
model's, name what the model names, and write nothing. After each step the topic list
(``TopicInfo``), every topic's log, subscribers and dead letters, every identity's poll and
subscriptions, and one identity's offset of every topic (rotating) must equal the model.

Each example runs in a savepoint of the ``ikigai_store`` fixture's rolled-back transaction (on
each face), so examples do not see each other's topics, mail or clock.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ikigai_store as ik
from tests.mailtools import EPOCH, Clock
from tests.reference_mail import PRIORITIES, RefConflict, RefError, RefInvalid, RefNotFound
from tests.reference_topics import TOPIC_MAIL_FIELDS, RefClaim, RefTopicWorld

pytestmark = pytest.mark.db

#: Identities: the first three are registered at the start; "ghost" never is.
NAMES = ["ann", "bob", "cat", "dan", "eve"]
GHOST = "ghost"
#: Topic names: "news" (broadcast) and "jobs" (queue, 2 attempts) exist at the start.
TOPICS = ["news", "jobs", "ops", "q2"]
BAD_TOPICS = ["", "-x", "a b", "x" * 65]
KEYS = ["k1", "k2", "k3"]
LEASES = [0.5, 1, 10, 30.0, 3600]
#: Delays of publishes and releases (None: none; -1: refused).
DELAYS = [None, None, None, 0, 0.5, 10, 3600, -1]
BAD_LEASES = [0, -1, 86401, float("nan")]
RETENTIONS = [timedelta(hours=1), timedelta(days=1), timedelta(days=7)]
STEPS = [
    timedelta(milliseconds=500),
    timedelta(seconds=1),
    timedelta(seconds=10),
    timedelta(seconds=30),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=7),
    timedelta(days=8),
]
FAKE_TOKEN = "00000000-0000-4000-8000-000000000000"

subjects = st.sampled_from(["", "build", "it's %s ✓"])
bodies = st.sampled_from(["", "go", "line\nline"])
json_values = st.none() | st.sampled_from([{"a": 1}, [1, "x"], "text"])

ERRORS: dict[type[RefError], type[Exception]] = {
    RefInvalid: ik.InvalidArgument,
    RefNotFound: ik.NotFound,
    RefConflict: ik.Conflict,
}
STORE_ERRORS = (ik.InvalidArgument, ik.NotFound, ik.Conflict)

#: Everything a topics call may write, in one round trip (a refusal must change none of it).
FOOTPRINT = """
SELECT (SELECT count(*) FROM mail) AS mail,
       (SELECT count(*) FROM mail_recipients) AS copies,
       (SELECT string_agg(name || kind || next_offset, ',' ORDER BY name) FROM topics) AS topics,
       (SELECT count(*) FROM subscriptions) AS subscriptions,
       (SELECT string_agg(identity_id || ':' || topic_id || ':' || last_offset, ','
                          ORDER BY identity_id, topic_id) FROM consumer_offsets) AS offsets,
       (SELECT string_agg(mail_id || state || attempts || coalesce(token::text, '')
                          || coalesce(lease_until::text, ''), ',' ORDER BY mail_id)
        FROM queue_items) AS queue,
       (SELECT string_agg(mail_id || ':' || coalesce(log_offset::text, 'pending'), ','
                          ORDER BY mail_id) FROM topic_log) AS log
"""


class Refused(Exception):
    """Both store and model refused the call (the same way)."""


def mail_view(mail: ik.Mail) -> dict[str, Any]:
    return {f: getattr(mail, f) for f in TOPIC_MAIL_FIELDS}


def item_view(item: ik.InboxItem) -> tuple[Any, ...]:
    return (mail_view(item.mail), item.state, item.read_at, item.acked_at, item.snoozed_until)


def claim_view(claim: ik.Claim) -> tuple[Any, ...]:
    return (mail_view(claim.mail), claim.attempt, claim.lease_until, claim.token)


def topic_view(topic: ik.Topic) -> tuple[Any, ...]:
    return (topic.name, topic.kind, topic.retention, topic.max_attempts, topic.created_at)


def footprint(store: Any) -> dict[str, Any]:
    with store._connection() as conn:
        return dict(conn.execute(FOOTPRINT).fetchone())


class TopicsMachine(RuleBasedStateMachine):
    """Drives topics, offsets and queues through the store and checks them against the model."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefTopicWorld()
        self.scope = ExitStack()
        self.scope.enter_context(store.transaction(force_rollback=True))
        self.clock = Clock(store, EPOCH)
        self.claims: list[ik.Claim] = []
        self.keyed: list[tuple[str, dict[str, Any]]] = []
        self.keyed_batches: list[tuple[str, str, list[str], dict[str, Any]]] = []
        self.topic_ids: dict[str, int] = {}
        self.steps = 0

    def teardown(self) -> None:
        self.scope.close()

    # -- helpers -----------------------------------------------------------------------------

    def pick(self, data: st.DataObject, choices: list[Any], label: str) -> Any:
        return data.draw(st.sampled_from(choices), label=label)

    def known(self) -> list[str]:
        return list(self.model.mail.identities)

    def live(self) -> list[str]:
        return [n for n in self.known() if not self.model.mail.retired(n)]

    def anyone(self, data: st.DataObject, label: str) -> str:
        """Mostly a registered identity (retired or not), sometimes an unknown name."""
        if data.draw(st.integers(0, 5), label=f"{label} known?"):
            return str(self.pick(data, self.known(), label))
        return str(self.pick(data, [GHOST, *NAMES], label))

    def a_topic(self, data: st.DataObject, label: str = "topic") -> str:
        """Mostly an existing topic, sometimes a missing or an invalid name."""
        if self.model.topics and data.draw(st.integers(0, 5), label=f"{label} exists?") > 0:
            return str(self.pick(data, sorted(self.model.topics), label))
        return str(self.pick(data, [*TOPICS, *BAD_TOPICS[:2]], label))

    def queues(self) -> list[str]:
        return sorted(n for n, t in self.model.topics.items() if t.kind == "queue")

    def both(self, store_call: Callable[[], Any], model_call: Callable[[Any], Any]) -> Any:
        """Run the call on the store, then on the model (given the store's result).

        Either both succeed (the store's result is returned, with the model's), or both refuse
        with the matching ``ik`` error whose message contains what the model names; then nothing
        was written and ``Refused`` is raised.
        """
        before = footprint(self.store)
        try:
            got = store_call()
        except STORE_ERRORS as exc:
            try:
                model_call(None)
            except RefError as ref:
                wanted = ERRORS[type(ref)]
                assert type(exc) is wanted, f"store raised {exc!r}, model {ref!r}"
                for named in ref.named:
                    assert named in str(exc), f"{exc!r} does not name {named!r} ({ref!r})"
                assert footprint(self.store) == before, "a refused call wrote rows"
                raise Refused from exc
            raise AssertionError(f"store raised {exc!r}; the model accepted") from exc
        try:
            expected = model_call(got)
        except RefError as ref:
            raise AssertionError(f"store returned {got!r}; the model refused: {ref!r}") from ref
        return got, expected

    def check_claim(self, got: ik.Claim | None, expected: RefClaim | None) -> None:
        if expected is None:
            assert got is None
        else:
            assert got is not None
            assert claim_view(got) == expected.view()

    # -- rules: identities and topics ----------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """ann, bob and cat; 'news' (broadcast, all three) and 'jobs' (queue, 2 attempts: bob
        and cat), two mails published to each."""
        for name in NAMES[:3]:
            self.store.identities.register(name)
            self.model.mail.register(name)
        self.store.topics.create("news")
        self.model.create("news")
        self.store.topics.create("jobs", "queue", max_attempts=2)
        self.model.create("jobs", "queue", max_attempts=2)
        for who, topic in [("ann", "news"), ("bob", "news"), ("cat", "news")]:
            self.store.topics.subscribe(who, topic)
            self.model.subscribe(who, topic)
        for who in ("bob", "cat"):
            self.store.topics.subscribe(who, "jobs")
            self.model.subscribe(who, "jobs")
        for topic, subject in [("news", "n1"), ("news", "n2"), ("jobs", "j1"), ("jobs", "j2")]:
            self.do_publish("ann", {"topic": topic, "subject": subject, "body": "b"})

    @precondition(lambda self: len(self.model.mail.identities) < len(NAMES))
    @rule(data=st.data())
    def register(self, data: st.DataObject) -> None:
        """A late identity joins (it will read topics from offset 0)."""
        name = self.pick(data, [n for n in NAMES if n not in self.model.mail.identities], "name")
        self.store.identities.register(name)
        self.model.mail.register(name)

    @precondition(lambda self: len(self.live()) > 2)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """A retired identity keeps its subscriptions but gets no copies and cannot claim."""
        name = self.pick(data, self.live(), "name")
        self.store.identities.retire(name)
        self.model.mail.retire(name)

    @precondition(lambda self: len(self.model.topics) < 5)
    @rule(
        name=st.sampled_from([*TOPICS, *BAD_TOPICS]),
        kind=st.sampled_from(["broadcast", "queue", "queue", "fanout"]),
        retention=st.sampled_from([*RETENTIONS, timedelta(0)]),
        max_attempts=st.sampled_from([1, 2, 3, 0]),
    )
    def create(self, name: str, kind: str, retention: timedelta, max_attempts: int) -> None:
        """create makes a topic of either kind; bad arguments and taken names are refused."""
        try:
            got, expected = self.both(
                lambda: self.store.topics.create(
                    name, kind, retention=retention, max_attempts=max_attempts
                ),
                lambda _: self.model.create(
                    name, kind, retention=retention, max_attempts=max_attempts
                ),
            )
        except Refused:
            return
        assert topic_view(got) == expected.view()
        assert self.store.topics.get(name) == got

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        """delete removes a topic with its log, unless a queue still has open work."""
        if data.draw(st.integers(0, 3), label="a missing topic?"):  # keep most topics alive
            name = self.pick(data, [n for n in TOPICS if n not in self.model.topics] or TOPICS, "t")
        else:
            name = self.a_topic(data)
        try:
            self.both(lambda: self.store.topics.delete(name), lambda _: self.model.delete(name))
        except Refused:
            event("delete: refused")
            return
        event("delete: done")
        self.topic_ids.pop(name, None)

    @rule(data=st.data(), subscribe=st.booleans())
    def subscription(self, data: st.DataObject, subscribe: bool) -> None:
        """subscribe (creating a missing topic) and unsubscribe are idempotent."""
        who = self.anyone(data, "identity")
        name = self.a_topic(data)
        if subscribe:
            calls = (self.store.topics.subscribe, self.model.subscribe)
        else:
            calls = (self.store.topics.unsubscribe, self.model.unsubscribe)
        try:
            self.both(lambda: calls[0](who, name), lambda _: calls[1](who, name))
        except Refused:
            return

    # -- rules: mail ---------------------------------------------------------------------------

    def do_publish(self, sender: str, args: dict[str, Any]) -> None:
        try:
            got, expected = self.both(
                lambda: self.store.mail.publish(sender, **args),
                lambda got: self.model.publish(
                    sender,
                    **args,
                    id=None if got is None else got.id,
                    new_thread_id=None if got is None else got.thread_id,
                ),
            )
        except Refused:
            return
        assert mail_view(got) == self.model.view(expected)
        if args.get("idempotency_key") is not None:
            self.keyed.append((sender, args))

    @rule(data=st.data())
    def publish(self, data: st.DataObject) -> None:
        """A publish by a live (mostly), retired or unknown sender, to any topic."""
        if data.draw(st.integers(0, 5), label="live sender?"):
            sender = self.pick(data, self.live(), "sender")
        else:
            sender = self.anyone(data, "sender")
        queues = self.queues()
        how = data.draw(st.integers(0, 4), label="which topic")
        if how < 2 and queues:
            topic = self.pick(data, queues, "queue")
        elif how < 4 and self.model.topics:
            topic = self.pick(data, sorted(self.model.topics), "topic")
        else:
            topic = self.a_topic(data)
        args = {
            "topic": topic,
            "subject": data.draw(subjects, label="subject"),
            "body": data.draw(bodies, label="body"),
            "priority": self.pick(data, [*PRIORITIES, "normal", "now"], "priority"),
            "metadata": data.draw(json_values, label="metadata"),
            "attachments": data.draw(json_values, label="attachments"),
            "idempotency_key": data.draw(st.none() | st.sampled_from(KEYS), label="key"),
            "delay": data.draw(st.sampled_from(DELAYS), label="delay"),
        }
        self.do_publish(sender, args)

    @rule(data=st.data(), size=st.sampled_from([1, 3, 0, "x"]))
    def publish_many(self, data: st.DataObject, size: Any) -> None:
        """A batch by a live (mostly), retired or unknown sender, to any topic: the same mails
        and offsets as that many single publishes; a bad batch writes nothing."""
        if data.draw(st.integers(0, 5), label="live sender?"):
            sender = self.pick(data, self.live(), "sender")
        else:
            sender = self.anyone(data, "sender")
        topic = self.a_topic(data)
        batch: Any = (
            size
            if isinstance(size, str)
            else [data.draw(bodies, label="body") for _ in range(size)]
        )
        kwargs = {
            "subject": data.draw(subjects, label="subject"),
            "priority": self.pick(data, [*PRIORITIES, "now"], "priority"),
            "metadata": data.draw(json_values, label="metadata"),
            "delay": data.draw(st.sampled_from(DELAYS), label="delay"),
            "idempotency_key": data.draw(st.none() | st.sampled_from(KEYS), label="key"),
        }
        self.do_publish_many(sender, topic, batch, kwargs)

    def do_publish_many(self, sender: str, topic: str, batch: Any, kwargs: dict[str, Any]) -> None:
        try:
            got, expected = self.both(
                lambda: self.store.mail.publish_many(sender, topic, batch, **kwargs),
                lambda got: self.model.publish_many(
                    sender,
                    topic,
                    batch,
                    **kwargs,
                    ids=None if got is None else [m.id for m in got],
                    new_thread_ids=None if got is None else [m.thread_id for m in got],
                ),
            )
        except Refused:
            return
        assert [mail_view(m) for m in got] == [self.model.view(m) for m in expected]
        if kwargs.get("idempotency_key") is not None:
            self.keyed_batches.append((sender, topic, batch, kwargs))

    @precondition(lambda self: self.keyed_batches)
    @rule(data=st.data(), change=st.sampled_from([None, "body", "size", "topic", "subject"]))
    def publish_many_with_used_key(self, data: st.DataObject, change: str | None) -> None:
        """Repeating a keyed batch returns its mails as they are now and takes no offset
        (while its first mail is retained); changing it is a Conflict."""
        sender, topic, batch, kwargs = self.pick(data, self.keyed_batches, "batch")
        batch, kwargs = list(batch), dict(kwargs)
        if change == "body":
            batch[-1] += " (changed)"
        elif change == "size":
            batch = batch[:-1] if len(batch) > 1 else [*batch, "one more"]
        elif change == "topic":
            topic = self.a_topic(data)
        elif change == "subject":
            kwargs["subject"] += " (changed)"
        key = kwargs["idempotency_key"]
        kept = any(
            m.sender == sender and m.idempotency_key == key for m in self.model.mail.mails.values()
        )
        last = {n: t.last_offset for n, t in self.model.topics.items()}
        self.do_publish_many(sender, topic, batch, kwargs)
        if kept and change is None:
            assert {n: t.last_offset for n, t in self.model.topics.items()} == last

    @precondition(lambda self: self.keyed)
    @rule(data=st.data(), change=st.booleans())
    def publish_with_used_key(self, data: st.DataObject, change: bool) -> None:
        """Repeating a keyed publish returns the original and takes no offset (while the original
        is retained); changing it is a Conflict."""
        sender, args = self.pick(data, self.keyed, "request")
        args = dict(args)
        if change:
            field = self.pick(data, ["body", "topic", "priority"], "changed field")
            if field == "body":
                args["body"] += " (changed)"
            elif field == "topic":
                args["topic"] = self.a_topic(data)
            else:
                args["priority"] = self.pick(data, list(PRIORITIES), "priority")
        key = args["idempotency_key"]
        kept = any(
            m.sender == sender and m.idempotency_key == key for m in self.model.mail.mails.values()
        )  # retention or a topic's deletion frees the key with the mail
        last = {n: t.last_offset for n, t in self.model.topics.items()}
        self.do_publish(sender, args)
        if kept and not change:
            assert {n: t.last_offset for n, t in self.model.topics.items()} == last

    @precondition(lambda self: self.keyed)
    @rule(data=st.data())
    def publish_many_with_a_single_publish_s_key(self, data: st.DataObject) -> None:
        """A batch with the key of a single publish (while that mail is retained) is a
        Conflict: one key space per sender."""
        sender, args = self.pick(data, self.keyed, "request")
        kwargs = {"idempotency_key": args["idempotency_key"], "subject": args["subject"]}
        self.do_publish_many(sender, args["topic"], [args["body"]], kwargs)

    @rule(data=st.data())
    def send_direct(self, data: st.DataObject) -> None:
        """Direct mail shows in poll's inbox and is never touched by retention."""
        sender = self.pick(data, self.live(), "sender")
        to = self.pick(data, self.live(), "to")
        got = self.store.mail.send(sender, [to], "direct", "hi")
        expected = self.model.mail.send(
            sender, [to], "direct", "hi", id=got.id, new_thread_id=got.thread_id
        )
        assert mail_view(got) == self.model.view(expected)

    @precondition(lambda self: self.model.mail.copies)
    @rule(data=st.data(), snooze=st.booleans())
    def read_or_snooze_copy(self, data: st.DataObject, snooze: bool) -> None:
        """A recipient reads a copy, or snoozes it for a minute (it leaves poll's inbox until
        the snooze passes)."""
        name, mail_id = self.pick(data, list(self.model.mail.copies), "copy")
        until = timedelta(minutes=1)
        calls: tuple[Callable[[], Any], Callable[[Any], Any]] = (
            (
                lambda: self.store.mail.set_state(name, mail_id, "snoozed", snoozed_until=until),
                lambda _: self.model.mail.set_state(name, mail_id, "snoozed", snoozed_until=until),
            )
            if snooze
            else (
                lambda: self.store.mail.read(name, mail_id),
                lambda _: self.model.mail.read(name, mail_id),
            )
        )
        store_call, model_call = calls
        try:
            got, expected = self.both(store_call, model_call)
        except Refused:
            return
        assert item_view(got) == self.model.item_view(expected)

    # -- rules: reading and offsets ------------------------------------------------------------

    @rule(
        data=st.data(),
        after=st.sampled_from(["zero", "one", "last-1", "last", "past", -1]),
        limit=st.sampled_from([1, 2, 100, 0]),
    )
    def read(self, data: st.DataObject, after: Any, limit: int) -> None:
        """read pages a topic's log by offset."""
        name = self.a_topic(data)
        topic = self.model.topics.get(name)
        last = 0 if topic is None else topic.last_offset
        start = {"zero": 0, "one": 1, "last-1": max(last - 1, 0), "last": last}.get(
            after, last + 2 if after == "past" else after
        )
        try:
            got, expected = self.both(
                lambda: self.store.topics.read(name, after=start, limit=limit),
                lambda _: self.model.read(name, after=start, limit=limit),
            )
        except Refused:
            return
        assert [mail_view(m) for m in got] == [self.model.view(m) for m in expected]

    @rule(data=st.data(), limit=st.sampled_from([1, 2, 0]))
    def poll_with_limit(self, data: st.DataObject, limit: int) -> None:
        """poll's limit cuts the inbox and each topic's news."""
        who = self.anyone(data, "identity")
        try:
            got, expected = self.both(
                lambda: self.store.topics.poll(who, limit=limit),
                lambda _: self.model.poll(who, limit=limit),
            )
        except Refused:
            return
        self.check_poll(got, expected)

    @rule(
        data=st.data(),
        where=st.sampled_from(
            ["stored-1", "stored", "stored+1", "last", "last", "last", "last+1", "zero", -1]
        ),
    )
    def commit(self, data: st.DataObject, where: Any) -> None:
        """commit moves the stored offset forward only (mostly tried where one is stored), and
        never past the topic's end."""
        stored_at = sorted(k for k, v in self.model.offsets.items() if v > 0)
        if stored_at and data.draw(st.booleans(), label="where one is stored?") is True:
            who, name = self.pick(data, stored_at, "identity and topic")
        else:
            name = self.a_topic(data)
            members = [w for w, t in sorted(self.model.subs) if t == name]
            if members and data.draw(st.integers(0, 3), label="a subscriber?") > 0:
                who = self.pick(data, members, "identity")
            else:
                who = self.anyone(data, "identity")
        topic = self.model.topics.get(name)
        last = 0 if topic is None else topic.last_offset
        stored = self.model.offsets.get((who, name), 0)
        offset = {
            "stored-1": max(stored - 1, 0),
            "stored": stored,
            "stored+1": stored + 1,
            "last": last,
            "last+1": last + 1,
            "zero": 0,
        }.get(where, where)
        try:
            got, expected = self.both(
                lambda: self.store.topics.commit(who, name, offset),
                lambda _: self.model.commit(who, name, offset),
            )
        except Refused:
            event("commit: refused")
            return
        event(f"commit: {'moved' if got == offset else 'kept'}")
        assert got == expected

    @precondition(lambda self: self.model.subs)
    @rule(data=st.data())
    def consume(self, data: st.DataObject) -> None:
        """The consumer loop: a subscriber polls, then commits the last offset it saw of each
        topic."""
        who, _ = self.pick(data, sorted(self.model.subs), "subscription")
        got = self.store.topics.poll(who)
        self.check_poll(got, self.model.poll(who))
        for name, news in got.topics.items():
            if news:
                offset = news[-1].log_offset
                assert offset is not None
                assert self.store.topics.commit(who, name, offset) == offset
                assert self.model.commit(who, name, offset) == offset

    # -- rules: queues -------------------------------------------------------------------------

    @rule(data=st.data(), lease=st.sampled_from([*LEASES, *LEASES, *BAD_LEASES]))
    def claim(self, data: st.DataObject, lease: float) -> None:
        """claim takes the oldest available or expired message, or None; refusals match.
        Sometimes it completes a claim (current or stale) first, in the same call."""
        queues = self.queues()
        if queues and data.draw(st.integers(0, 4), label="a queue?") > 0:
            name = self.pick(data, queues, "queue")
            members = [w for w, t in sorted(self.model.subs) if t == name]
            if members and data.draw(st.integers(0, 4), label="a subscriber?") > 0:
                who = self.pick(data, members, "claimer")
            else:
                who = self.anyone(data, "claimer")
        else:
            name, who = self.a_topic(data), self.anyone(data, "claimer")
        value: Any = None
        done = None
        if self.claims and data.draw(st.integers(0, 2), label="complete one first?") == 0:
            value, *done = self.held(data)
        try:
            got, expected = self.both(
                lambda: self.store.topics.claim(who, name, ttl=lease, complete=value),
                lambda got: self.model.claim(
                    who,
                    name,
                    lease=lease,
                    complete=None if done is None else (done[0], done[1]),
                    token=None if got is None else got.token,
                ),
            )
        except Refused:
            return
        self.check_claim(got, expected)
        event(f"claim: {'none' if got is None else f'attempt {got.attempt}'}")
        if got is not None:
            self.claims.append(got)

    def held(self, data: st.DataObject) -> tuple[Any, int, str]:
        """A claim ever made (current or stale) as a Claim or a pair, or a made-up one."""
        if data.draw(st.integers(0, 6), label="made up?") == 0:
            mail_id = self.pick(data, [*self.model.mail.mails, 10**9], "mail id")
            return (mail_id, FAKE_TOKEN), mail_id, FAKE_TOKEN
        if data.draw(st.booleans(), label="the latest claim?"):
            claim = self.claims[-1]
        else:
            claim = self.pick(data, self.claims, "claim")
        if data.draw(st.booleans(), label="as pair?"):
            return (claim.mail.id, claim.token), claim.mail.id, claim.token
        return claim, claim.mail.id, claim.token

    @precondition(lambda self: self.claims)
    @rule(
        data=st.data(),
        action=st.sampled_from(["complete", "release", "extend"]),
        error=st.none() | st.sampled_from(["flaky", ""]),
        lease=st.sampled_from([*LEASES, 0]),
        delay=st.sampled_from(DELAYS),
    )
    def finish(
        self, data: st.DataObject, action: str, error: str | None, lease: float, delay: Any
    ) -> None:
        """complete, release (with a backoff delay, or none) and extend work with the current
        token only; stale claims (their lease taken over, or already finished) are refused."""
        value, mail_id, token = self.held(data)
        calls: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {
            "complete": (
                lambda: self.store.topics.complete(value),
                lambda _: self.model.complete(mail_id, token),
            ),
            "release": (
                lambda: self.store.topics.release(value, error=error, delay=delay),
                lambda _: self.model.release(mail_id, token, error, delay),
            ),
            "extend": (
                lambda: self.store.topics.extend(value, lease),
                lambda _: self.model.extend(mail_id, token, lease),
            ),
        }
        store_call, model_call = calls[action]
        try:
            got, expected = self.both(store_call, model_call)
        except Refused:
            event(f"{action}: refused")
            return
        event(f"{action}: done")
        if action == "extend":
            self.check_claim(got, expected)
            self.claims.append(got)
        else:
            assert got == expected

    @rule(data=st.data())
    def requeue(self, data: st.DataObject) -> None:
        """requeue revives a dead letter; other messages are refused."""
        dead = [w.mail_id for w in self.model.work.values() if w.state == "dead"]
        if dead and data.draw(st.integers(0, 2), label="a dead letter?") > 0:
            mail_id = self.pick(data, dead, "mail id")
        else:
            mail_id = self.pick(data, [*self.model.mail.mails, 10**9], "mail id")
        try:
            self.both(
                lambda: self.store.topics.requeue(mail_id),
                lambda _: self.model.requeue(mail_id),
            )
        except Refused:
            event("requeue: refused")
            return
        event("requeue: done")

    # -- rules: time ---------------------------------------------------------------------------

    @precondition(lambda self: any(w.state == "claimed" for w in self.model.work.values()))
    @rule(data=st.data(), extra=st.sampled_from([timedelta(0), timedelta(microseconds=1)]))
    def lease_runs_out(self, data: st.DataObject, extra: timedelta) -> None:
        """The clock moves to the end of a held lease (exactly, or just past it), and a
        subscriber of that queue claims: it takes the message over (a next attempt) or, after
        the last attempt, the message becomes a dead letter."""
        held = [w for w in self.model.work.values() if w.state == "claimed"]
        work = self.pick(data, sorted(held, key=lambda w: w.mail_id), "held")
        assert work.lease_until is not None
        if work.lease_until + extra > self.model.now:
            self.clock.set(self.model.mail.advance(work.lease_until + extra - self.model.now))
        members = [w for w, t in sorted(self.model.subs) if t == work.topic]
        live = [w for w in members if not self.model.mail.retired(w)]
        if live:
            who = self.pick(data, live, "claimer")
            got = self.store.topics.claim(who, work.topic, ttl=10)
            self.check_claim(
                got,
                self.model.claim(
                    who, work.topic, lease=10, token=None if got is None else got.token
                ),
            )
            event(f"lease_runs_out: {'none' if got is None else f'attempt {got.attempt}'}")
            if got is not None:
                self.claims.append(got)

    @rule(delta=st.sampled_from(STEPS))
    def advance_clock(self, delta: timedelta) -> None:
        """Time passes (leases run out, snoozes wake, mail ages)."""
        self.clock.set(self.model.mail.advance(delta))

    @rule(data=st.data(), wait=st.booleans())
    def apply_retention(self, data: st.DataObject, wait: bool) -> None:
        """apply_retention deletes exactly the model's old, passed, finished topic mail;
        sometimes the clock first moves to when a topic's oldest mail reaches its retention
        (exactly: kept, or just past it)."""
        logs = [t for _, t in sorted(self.model.topics.items()) if t.log]
        if wait and logs:
            topic = self.pick(data, logs, "topic")
            oldest = self.model.mail.mails[topic.log[min(topic.log)]].created_at
            extra = self.pick(data, [timedelta(0), timedelta(microseconds=1)], "extra")
            if oldest + topic.retention + extra > self.model.now:
                self.clock.set(
                    self.model.mail.advance(oldest + topic.retention + extra - self.model.now)
                )
        got = self.store.topics.prune()
        assert got == self.model.apply_retention()
        event(f"retention: {'deleted' if any(got.values()) else 'kept all'}")

    # -- invariants ----------------------------------------------------------------------------

    def check_poll(self, got: ik.Poll, expected: Any) -> None:
        inbox, news, offsets = expected
        assert [item_view(i) for i in got.inbox] == [self.model.item_view(i) for i in inbox]
        assert {n: [mail_view(m) for m in ms] for n, ms in got.topics.items()} == {
            n: [self.model.view(m) for m in ms] for n, ms in news.items()
        }
        assert got.offsets == offsets

    @invariant()
    def topics_match(self) -> None:
        """The topic list, every topic's log, subscribers and dead letters, every identity's
        poll and subscriptions, and one identity's offsets equal the model's."""
        self.steps += 1
        self.model.check()
        listed = self.store.topics.list()
        assert [
            (
                topic_view(i.topic),
                i.subscribers,
                i.messages,
                i.last_offset,
                i.available,
                i.claimed,
                i.dead,
            )
            for i in listed
        ] == self.model.list_topics()
        for info in listed:
            known = self.topic_ids.setdefault(info.topic.name, info.topic.id)
            assert info.topic.id == known, "a topic's id changed"
        for name in self.model.topics:
            got = self.store.topics.read(name, limit=1000)
            assert [mail_view(m) for m in got] == [
                self.model.view(m) for m in self.model.read(name)
            ]
            assert [i.name for i in self.store.topics.subscribers(name)] == (
                self.model.subscribers(name)
            )
            dead = self.store.topics.dead_letters(name)
            if dead:
                event("invariant: a dead letter")
            assert [(mail_view(d.mail), d.attempts, d.last_error) for d in dead] == (
                self.model.dead_letters(name)
            )
        names = self.known()
        for who in names:
            self.check_poll(self.store.topics.poll(who), self.model.poll(who))
            got_subs = self.store.topics.subscriptions(who)
            assert [topic_view(t) for t in got_subs] == self.model.subscriptions(who)
        who = names[self.steps % len(names)]
        for name in self.model.topics:
            assert self.store.topics.offset(who, name) == self.model.offset(who, name)


def test_topics_machine(ikigai_store: ik.Store) -> None:
    """Topics, subscriptions, offsets, queue claims, leases and retention equal the model after
    every step."""

    class OnThisStore(TopicsMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
