"""Agent mail: sends, replies, idempotency, the guarded state machine, snoozes, search."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store.mail import TRANSITIONS
from tests.mailtools import EPOCH, Clock, mail_rows

pytestmark = pytest.mark.db


@pytest.fixture
def people(ikigai_store: ik.Store) -> ik.Store:
    """alice, bob and carol registered."""
    for name in ("alice", "bob", "carol"):
        ikigai_store.identities.register(name)
    return ikigai_store


def _ids(items: list[ik.InboxItem]) -> list[int]:
    return [i.mail.id for i in items]


# ---------------------------------------------------------------- sending


def test_send_delivers_to_every_recipient(people: ik.Store) -> None:
    """One mail row, one unread recipient row each; names deduplicated and sorted."""
    mail = people.mail.send("alice", ["carol", "bob", "carol"], "Plan", "**go**")
    assert (mail.sender, mail.to, mail.subject, mail.body) == (
        "alice",
        ("bob", "carol"),
        "Plan",
        "**go**",
    )
    assert (mail.priority, mail.parent_id, mail.deleted_by_sender) == ("normal", None, False)
    assert mail_rows(people) == (1, 2)
    for name in ("bob", "carol"):
        [item] = people.mail.inbox(name)
        assert (item.mail, item.state, item.read_at) == (mail, "unread", None)
    assert people.mail.inbox("alice") == []


def test_send_accepts_one_name_identity_and_self(people: ik.Store) -> None:
    """to may be one name or an Identity; sending to yourself is allowed."""
    bob = people.identities.get("bob")
    assert people.mail.send("alice", "bob", "s", "b").to == ("bob",)
    assert people.mail.send(bob, bob, "s", "b").to == ("bob",)
    assert people.mail.send("alice", ["alice", bob], "s", "b").to == ("alice", "bob")


def test_send_fields_round_trip(people: ik.Store) -> None:
    """Priority, deadline, attachments, metadata and thread are stored as given."""
    deadline = EPOCH + timedelta(days=1)
    mail = people.mail.send(
        "alice",
        ["bob"],
        "s",
        "b",
        thread_id="review-1234abcd",
        priority="urgent",
        deadline_at=deadline,
        attachments=[{"path": "a.py", "lines": [1, 2]}],
        metadata={"pr": 7},
    )
    assert (mail.thread_id, mail.priority, mail.deadline_at) == (
        "review-1234abcd",
        "urgent",
        deadline,
    )
    assert (mail.attachments, mail.metadata) == ([{"path": "a.py", "lines": [1, 2]}], {"pr": 7})
    assert people.mail.thread("review-1234abcd") == [mail]


@pytest.mark.parametrize(
    ("to", "error", "match"),
    [
        (["bob", "nobody"], ik.NotFound, "unknown recipient.*nobody"),
        ([], ik.InvalidArgument, "at least one recipient"),
        (["bad name"], ik.InvalidArgument, "recipient must be a name"),
    ],
)
def test_bad_recipients_write_nothing(
    people: ik.Store, to: list[str], error: type[Exception], match: str
) -> None:
    """An unknown recipient is NotFound naming it (like an unknown sender, and like every
    other area's missing things), a malformed one InvalidArgument; nothing is written."""
    with pytest.raises(error, match=match):
        people.mail.send("alice", to, "s", "b")
    assert mail_rows(people) == (0, 0)


def test_retired_cannot_send_or_receive(people: ik.Store) -> None:
    """A retired recipient or sender is refused (nothing written); their mail is kept."""
    kept = people.mail.send("alice", ["carol"], "s", "b")
    people.identities.retire("carol")
    with pytest.raises(ik.InvalidArgument, match=r"retired recipient.*carol"):
        people.mail.send("alice", ["bob", "carol"], "s", "b")
    with pytest.raises(ik.InvalidArgument, match="'carol' is retired"):
        people.mail.send("carol", ["bob"], "s", "b")
    assert mail_rows(people) == (1, 1)
    assert _ids(people.mail.inbox("carol")) == [kept.id]


def test_unknown_sender_is_not_found(people: ik.Store) -> None:
    """An unknown sender is NotFound; nothing written."""
    with pytest.raises(ik.NotFound, match="ghost"):
        people.mail.send("ghost", ["bob"], "s", "b")
    assert mail_rows(people) == (0, 0)


def test_parent_sets_thread_and_must_belong_to_it(people: ik.Store) -> None:
    """parent_id alone joins the parent's thread; a parent of another thread is refused."""
    first = people.mail.send("alice", ["bob"], "s", "b")
    child = people.mail.send("bob", ["alice"], "s", "b", parent_id=first.id)
    assert (child.thread_id, child.parent_id) == (first.thread_id, first.id)
    with pytest.raises(ik.InvalidArgument, match="not 'other'"):
        people.mail.send("bob", ["alice"], "s", "b", parent_id=first.id, thread_id="other")
    with pytest.raises(ik.InvalidArgument, match="does not exist"):
        people.mail.send("bob", ["alice"], "s", "b", parent_id=first.id + 1000)
    assert mail_rows(people) == (2, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"subject": "a\x00b"}, "subject contains a NUL"),
        ({"body": "a\x00b"}, "body contains a NUL"),
        ({"body": None}, "body must be a string"),
        ({"subject": "x" * 1001}, "subject is 1001 characters"),
        ({"priority": "high"}, "priority must be one of"),
        ({"deadline_at": datetime(2030, 1, 1)}, "timezone-aware"),
        (
            {"deadline_at": datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))},
            "from the year 1 to before the year 9999",
        ),
        ({"deadline_at": datetime(9999, 12, 31, tzinfo=UTC)}, "before the year 9999"),
        ({"metadata": {1: "x"}}, "metadata has a int object key"),
        ({"attachments": [float("nan")]}, "attachments is not JSON"),
        ({"metadata": {"a": "\x00"}}, "metadata contains a NUL"),
        ({"thread_id": ""}, "thread_id must not be empty"),
        ({"parent_id": True}, "parent_id must be a positive integer"),
        ({"idempotency_key": 5}, "idempotency_key must be a string"),
        ({"sender": "\ud800"}, "sender must be a name"),
    ],
)
def test_bad_send_input_writes_nothing(
    people: ik.Store, kwargs: dict[str, Any], match: str
) -> None:
    """Each bad argument is InvalidArgument naming it, before anything is written."""
    args: dict[str, Any] = {"sender": "alice", "to": ["bob"], "subject": "s", "body": "b"}
    args.update(kwargs)
    with pytest.raises(ik.InvalidArgument, match=match):
        people.mail.send(**args)
    assert mail_rows(people) == (0, 0)


# ---------------------------------------------------------------- idempotency


def test_same_key_same_request_returns_original(people: ik.Store) -> None:
    """Resending with a used key returns the original mail and writes nothing."""
    first = people.mail.send(
        "alice", ["bob"], "s", "b", metadata={"a": 1, "b": 2}, idempotency_key="k"
    )
    again = people.mail.send(
        "alice", ["bob"], "s", "b", metadata={"b": 2, "a": 1}, idempotency_key="k"
    )
    assert again == first
    assert mail_rows(people) == (1, 1)


@pytest.mark.parametrize(
    "change",
    [{"to": ["carol"]}, {"subject": "other"}, {"body": "other"}, {"priority": "low"}],
)
def test_same_key_other_request_is_conflict(people: ik.Store, change: dict[str, Any]) -> None:
    """A used key with different recipients, subject, body or priority raises Conflict."""
    args: dict[str, Any] = {"to": ["bob"], "subject": "s", "body": "b", "idempotency_key": "k"}
    people.mail.send("alice", **args)
    with pytest.raises(ik.Conflict, match="different request") as caught:
        people.mail.send("alice", **{**args, **change})
    assert caught.value.constraint == "mail_idempotency_key"
    assert mail_rows(people) == (1, 1)


def test_keys_are_per_sender_and_shared_with_replies(people: ik.Store) -> None:
    """Two senders may use one key; a sender's send key reused for a reply is a Conflict."""
    a = people.mail.send("alice", ["bob"], "s", "b", idempotency_key="k")
    b = people.mail.send("bob", ["alice"], "s", "b", idempotency_key="k")
    assert a.id != b.id
    with pytest.raises(ik.Conflict):
        people.mail.reply("bob", a.id, "r", idempotency_key="k")
    r = people.mail.reply("bob", a.id, "r", idempotency_key="r1")
    assert people.mail.reply("bob", a.id, "r", idempotency_key="r1") == r
    assert mail_rows(people) == (3, 3)


# ---------------------------------------------------------------- replies and threads


def test_reply_addresses_thread_participants(people: ik.Store) -> None:
    """A reply goes to every participant of the thread but the replier, with Re: once."""
    people.identities.register("dave")
    first = people.mail.send("alice", ["bob"], "Plan", "b")
    r1 = people.mail.reply("bob", first.id, "ok")
    assert (r1.to, r1.subject, r1.parent_id, r1.thread_id) == (
        ("alice",),
        "Re: Plan",
        first.id,
        first.thread_id,
    )
    cc = people.mail.send("alice", ["carol"], "Plan", "cc", thread_id=first.thread_id)
    r2 = people.mail.reply("carol", cc.id, "me too")
    assert (r2.to, r2.subject) == (("alice", "bob"), "Re: Plan")
    r3 = people.mail.reply("alice", r2.id, "fine", subject="New subject", priority="urgent")
    assert (r3.to, r3.subject, r3.priority) == (("bob", "carol"), "New subject", "urgent")
    assert [m.id for m in people.mail.thread(first.thread_id)] == sorted(
        [first.id, r1.id, cc.id, r2.id, r3.id]
    )


def test_reply_rules(people: ik.Store) -> None:
    """Only a participant may reply; retired participants are skipped; none left is refused."""
    first = people.mail.send("alice", ["bob"], "s", "b")
    with pytest.raises(ik.NotFound, match="neither sent nor received"):
        people.mail.reply("carol", first.id, "x")
    with pytest.raises(ik.NotFound, match="mail 999999"):
        people.mail.reply("bob", 999999, "x")
    people.mail.send("alice", ["carol"], "s", "b", thread_id=first.thread_id)
    people.identities.retire("alice")
    assert people.mail.reply("bob", first.id, "x").to == ("carol",)
    people.identities.retire("carol")
    with pytest.raises(ik.InvalidArgument, match="no one to reply to"):
        people.mail.reply("bob", first.id, "x")


def test_thread_view_per_identity(people: ik.Store) -> None:
    """thread(identity=) keeps only the mails that identity sent or received."""
    first = people.mail.send("alice", ["bob"], "s", "b")
    second = people.mail.send("alice", ["carol"], "s", "b", thread_id=first.thread_id)
    assert people.mail.thread(first.thread_id, identity="bob") == [first]
    assert people.mail.thread(first.thread_id, identity="alice") == [first, second]
    assert people.mail.thread("no-such-thread") == []
    with pytest.raises(ik.NotFound):
        people.mail.thread(first.thread_id, identity="ghost")


def test_sent_and_delete_sent(people: ik.Store) -> None:
    """sent lists newest first; delete_sent hides a mail from the sender only."""
    a = people.mail.send("alice", ["bob"], "1", "b")
    b = people.mail.send("alice", ["bob"], "2", "b")
    assert [m.id for m in people.mail.sent("alice")] == [b.id, a.id]
    people.mail.delete_sent("alice", a.id)
    people.mail.delete_sent("alice", a.id)  # idempotent
    assert [m.id for m in people.mail.sent("alice")] == [b.id]
    assert _ids(people.mail.inbox("bob")) == [b.id, a.id]
    with pytest.raises(ik.NotFound, match="did not send"):
        people.mail.delete_sent("bob", a.id)


# ---------------------------------------------------------------- inbox, counts, states


def test_inbox_filters_and_pagination(people: ik.Store) -> None:
    """Newest first, by state and priority, keyset pages by before (the item or its id)."""
    sent = [
        people.mail.send("alice", ["bob"], str(n), "b", priority="urgent" if n % 2 else "normal")
        for n in range(7)
    ]
    ids = [m.id for m in reversed(sent)]
    assert _ids(people.mail.inbox("bob")) == ids
    page = people.mail.inbox("bob", limit=3)
    assert _ids(page) == ids[:3]
    assert _ids(people.mail.inbox("bob", limit=3, before=page[-1].mail.id)) == ids[3:6]
    assert _ids(people.mail.inbox("bob", limit=3, before=page[-1])) == ids[3:6]  # the item
    assert all(i.mail.priority == "urgent" for i in people.mail.inbox("bob", priority="urgent"))
    people.mail.set_state("bob", sent[0].id, "archived")
    people.mail.set_state("bob", sent[1].id, "trash")
    assert sent[0].id not in _ids(people.mail.inbox("bob"))
    assert _ids(people.mail.inbox("bob", state="archived")) == [sent[0].id]
    assert _ids(people.mail.inbox("bob", state="trash")) == [sent[1].id]
    with pytest.raises(ik.NotFound):
        people.mail.inbox("ghost")


def _put_in(store: ik.Store, mail_id: int, state: str) -> None:
    """Move bob's copy of an unread mail to ``state`` along legal moves."""
    path = {
        "unread": [],
        "read": ["read"],
        "starred": ["starred"],
        "snoozed": ["snoozed"],
        "archived": ["archived"],
        "trash": ["trash"],
    }[state]
    for step in path:
        until = timedelta(hours=1) if step == "snoozed" else None
        store.mail.set_state("bob", mail_id, step, snoozed_until=until)


@pytest.mark.parametrize("source", ik.MAIL_STATES)
def test_transition_table(people: ik.Store, source: str) -> None:
    """Every move allowed by the table works; every other one raises naming both states and
    changes nothing."""
    for target in ik.MAIL_STATES:
        mail = people.mail.send("alice", ["bob"], f"{source}->{target}", "b")
        _put_in(people, mail.id, source)
        until = timedelta(hours=2) if target == "snoozed" else None
        before = people.mail.counts("bob")
        if target in TRANSITIONS[source]:
            item = people.mail.set_state("bob", mail.id, target, snoozed_until=until)
            assert item.state == target
        else:
            with pytest.raises(ik.InvalidArgument, match=f"from {source} to {target}"):
                people.mail.set_state("bob", mail.id, target, snoozed_until=until)
            assert people.mail.counts("bob") == before


def test_state_changes_for_strangers_are_not_found(people: ik.Store) -> None:
    """Changing a mail one did not receive, or as an unknown identity, is NotFound."""
    mail = people.mail.send("alice", ["bob"], "s", "b")
    for call in (
        lambda: people.mail.set_state("carol", mail.id, "read"),
        lambda: people.mail.read("carol", mail.id),
        lambda: people.mail.ack("alice", mail.id),
        lambda: people.mail.set_state("ghost", mail.id, "read"),
    ):
        with pytest.raises(ik.NotFound):
            call()


def test_read_at_once_and_ack_idempotent(people: ik.Store) -> None:
    """read_at is set the first time only; ack reads an unread mail and is idempotent."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob"], "s", "b")
    first = people.mail.read("bob", mail.id)
    assert (first.state, first.read_at) == ("read", clock.now)
    clock.advance(minutes=1)
    people.mail.set_state("bob", mail.id, "unread")
    assert people.mail.set_state("bob", mail.id, "read").read_at == first.read_at
    other = people.mail.send("alice", ["bob"], "s", "b")
    acked = people.mail.ack("bob", other.id)
    assert (acked.state, acked.acked_at, acked.read_at) == ("read", clock.now, clock.now)
    clock.advance(minutes=1)
    assert people.mail.ack("bob", other.id) == acked
    starred = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", starred.id, "starred")
    assert people.mail.read("bob", starred.id).state == "starred"


def test_counts(people: ik.Store) -> None:
    """counts: unread, urgent unread, starred, snoozed, archived, trash in one call."""
    made = [people.mail.send("alice", ["bob"], "s", "b", priority="urgent") for _ in range(2)]
    made += [people.mail.send("alice", ["bob"], "s", "b") for _ in range(5)]
    people.mail.set_state("bob", made[2].id, "starred")
    people.mail.set_state("bob", made[3].id, "snoozed", snoozed_until=timedelta(hours=1))
    people.mail.set_state("bob", made[4].id, "archived")
    people.mail.set_state("bob", made[5].id, "trash")
    assert people.mail.counts("bob") == ik.MailCounts(
        unread=3, urgent_unread=2, starred=1, snoozed=1, archived=1, trash=1
    )
    assert people.mail.counts("carol") == ik.MailCounts(0, 0, 0, 0, 0, 0)
    with pytest.raises(ik.NotFound):
        people.mail.counts("ghost")


def test_snooze_rules(people: ik.Store) -> None:
    """A snooze needs a future time (aware datetime or timedelta) and only for snoozed."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob"], "s", "b")
    for until in (clock.now, clock.now - timedelta(seconds=1)):
        with pytest.raises(ik.InvalidArgument, match="in the future"):
            people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=until)
    for bad in (None, datetime(2031, 1, 1), timedelta(0), "tomorrow"):
        with pytest.raises(ik.InvalidArgument):
            people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=bad)
    with pytest.raises(ik.InvalidArgument, match="only for the snoozed state"):
        people.mail.set_state("bob", mail.id, "read", snoozed_until=timedelta(hours=1))
    item = people.mail.set_state(
        "bob", mail.id, "snoozed", snoozed_until=clock.now + timedelta(hours=1)
    )
    assert (item.state, item.snoozed_until) == ("snoozed", clock.now + timedelta(hours=1))
    again = people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=timedelta(hours=3))
    assert again.snoozed_until == clock.now + timedelta(hours=3)  # re-snooze
    assert people.mail.set_state("bob", mail.id, "unread").snoozed_until is None  # wake early


def test_past_snooze_time_is_refused_before_existence(people: ik.Store) -> None:
    """A snoozed_until that is not after the database's now is a bad argument: refused as
    InvalidArgument whoever asks (a stranger, an unknown identity, a mail that does not
    exist) and whatever the state, as a negative timedelta is; a future one is NotFound."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", mail.id, "archived")  # archived -> snoozed is not allowed
    past = (clock.now - timedelta(minutes=1)).astimezone(timezone(timedelta(hours=-8)))
    for who, mail_id in (("carol", mail.id), ("ghost", mail.id), ("bob", mail.id + 1000)):
        for until in (past, clock.now, timedelta(minutes=-1)):
            with pytest.raises(ik.InvalidArgument, match="in the future"):
                people.mail.set_state(who, mail_id, "snoozed", snoozed_until=until)
        with pytest.raises(ik.NotFound):
            people.mail.set_state(who, mail_id, "snoozed", snoozed_until=timedelta(hours=1))
    with pytest.raises(ik.InvalidArgument, match="in the future"):
        people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=past)
    with pytest.raises(ik.InvalidArgument, match="from archived to snoozed"):
        people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=timedelta(hours=1))


def test_passed_snooze_is_unread_everywhere(people: ik.Store) -> None:
    """After snoozed_until, the mail is unread in inbox, counts, transitions and wait, with no
    background job; wake_snoozed materialises it."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", mail.id, "snoozed", snoozed_until=timedelta(minutes=10))
    assert people.mail.inbox("bob") == []
    assert _ids(people.mail.inbox("bob", state="snoozed")) == [mail.id]
    assert people.mail.counts("bob").snoozed == 1
    assert people.mail.wait("bob", 0) is None
    clock.advance(minutes=10)
    [item] = people.mail.inbox("bob")
    assert (item.state, item.snoozed_until) == ("unread", None)
    assert people.mail.inbox("bob", state="snoozed") == []
    assert _ids(people.mail.inbox("bob", state="unread")) == [mail.id]
    assert (people.mail.counts("bob").unread, people.mail.counts("bob").snoozed) == (1, 0)
    with pytest.raises(ik.InvalidArgument, match="from unread to unread"):
        people.mail.set_state("bob", mail.id, "unread")
    assert people.mail.wake_snoozed() == 1
    assert people.mail.wake_snoozed() == 0
    got = people.mail.wait("bob", 0)
    assert got is not None and (got.mail.id, got.state) == (mail.id, "read")


def test_set_thread_state(people: ik.Store) -> None:
    """One call moves every mail of the thread where the move is legal and says how many."""
    first = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.send("alice", ["bob"], "s", "b", thread_id=first.thread_id)
    third = people.mail.send("alice", ["bob"], "s", "b", thread_id=first.thread_id)
    people.mail.send("alice", ["bob"], "elsewhere", "b")
    people.mail.set_state("bob", third.id, "trash")
    assert people.mail.set_thread_state("bob", first.thread_id, "archived") == 2
    assert people.mail.set_thread_state("bob", first.thread_id, "archived") == 0
    assert people.mail.counts("bob") == ik.MailCounts(1, 0, 0, 0, 2, 1)
    assert people.mail.set_thread_state("bob", first.thread_id, "read") == 2
    with pytest.raises(ik.InvalidArgument, match="snooze"):
        people.mail.set_thread_state("bob", first.thread_id, "snoozed")
    with pytest.raises(ik.NotFound):
        people.mail.set_thread_state("ghost", first.thread_id, "read")


def test_purge_trash(people: ik.Store) -> None:
    """prune deletes recipient rows that stayed in trash longer than older_than."""
    clock = Clock(people)
    old = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", old.id, "trash")
    clock.advance(days=20)
    new = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", new.id, "trash")
    clock.advance(days=15)
    assert people.mail.prune() == 1
    assert _ids(people.mail.inbox("bob", state="trash")) == [new.id]
    assert people.mail.prune(older_than=timedelta(0)) == 1
    with pytest.raises(ik.InvalidArgument):
        people.mail.prune(older_than=timedelta(days=-1))


def test_purge_trash_needs_strictly_longer_than(people: ik.Store) -> None:
    """ "In trash longer than older_than" is strict: a copy trashed exactly older_than ago (or,
    with 0, at this very instant) stays; a microsecond later it goes."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob"], "s", "b")
    people.mail.set_state("bob", mail.id, "trash")
    assert people.mail.prune(older_than=timedelta(0)) == 0
    clock.advance(days=30)
    assert people.mail.prune() == 0
    assert people.mail.prune(older_than=timedelta(days=30)) == 0
    assert _ids(people.mail.inbox("bob", state="trash")) == [mail.id]
    clock.advance(microseconds=1)
    assert people.mail.prune() == 1
    assert people.mail.inbox("bob", state="trash") == []


def test_purge_trash_keeps_who_a_mail_was_sent_to(people: ik.Store) -> None:
    """Purging one recipient's copy removes it from that recipient's mailbox only: the mail's
    `to` (for the sender, the other recipients and every view), the thread as that recipient
    sees it, its search and the participants a reply goes to stay as sent."""
    clock = Clock(people)
    mail = people.mail.send("alice", ["bob", "carol"], "Plan", "go")
    people.mail.set_state("bob", mail.id, "trash")
    clock.advance(microseconds=1)
    assert people.mail.prune(older_than=timedelta(0)) == 1
    assert mail_rows(people) == (1, 1)
    assert people.mail.inbox("bob", state="trash") == []
    with pytest.raises(ik.NotFound):
        people.mail.read("bob", mail.id)
    [item] = people.mail.inbox("carol")
    assert item.mail == mail and item.mail.to == ("bob", "carol")
    assert people.mail.sent("alice") == [mail]
    assert people.mail.thread(mail.thread_id) == [mail]
    assert people.mail.thread(mail.thread_id, identity="bob") == [mail]
    assert [h.mail for h in people.mail.search("Plan", identity="bob")] == [mail]
    answer = people.mail.reply("carol", mail.id, "ok")
    assert answer.to == ("alice", "bob")
    assert people.mail.reply("bob", mail.id, "still here").to == ("alice", "carol")


# ---------------------------------------------------------------- search


def test_search_weights_subject_over_body(people: ik.Store) -> None:
    """A word in the subject ranks above the same word in a body; identity filters."""
    in_body = people.mail.send("alice", ["bob"], "notes", "the migration is slow")
    in_subject = people.mail.send("alice", ["carol"], "Migration plan", "details later")
    hits = people.mail.search("migration")
    assert [h.mail.id for h in hits] == [in_subject.id, in_body.id]
    assert hits[0].rank > hits[1].rank
    assert "[migration]" in people.mail.search("migration", identity="bob")[0].snippet
    assert [h.mail.id for h in people.mail.search("migration", identity="carol")] == [in_subject.id]


@pytest.mark.parametrize(
    "query",
    ['"unclosed', "foo-bar", "a & b | !c", "the", "", "!!!", "(((", "x" * 10_000, "or -", "'"],
)
def test_hostile_search_never_raises(people: ik.Store, query: str) -> None:
    """Web-search syntax, operators, stop words and long queries return a list, never raise."""
    people.mail.send("alice", ["bob"], "foo-bar", "a b c")
    assert isinstance(people.mail.search(query), list)


def test_search_refuses_nul(people: ik.Store) -> None:
    """A NUL in the query is one clear InvalidArgument."""
    with pytest.raises(ik.InvalidArgument, match="NUL"):
        people.mail.search("a\x00b")


def test_schema_checks_match_python_constants(ikigai_store: ik.Store) -> None:
    """MAIL_STATES and PRIORITIES equal the CHECK lists of migration 0007."""
    with ikigai_store._connection() as conn:
        checks = {
            r["conname"]: r["def"]
            for r in conn.execute(
                "SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint "
                "WHERE conname IN ('mail_recipients_state_check', 'mail_priority_check')"
            ).fetchall()
        }
    for name, values in (
        ("mail_recipients_state_check", ik.MAIL_STATES),
        ("mail_priority_check", ik.PRIORITIES),
    ):
        assert sorted(v for v in checks[name].split("'")[1::2] if v.isalpha()) == sorted(values)


BIG = 2**63
BAD = "\ud800"


def test_hostile_arguments_on_every_mail_and_identity_call(people: ik.Store) -> None:
    """Every identities/mail call refuses out-of-range ints, non-UTF-8 text, bad choices and bad
    types with InvalidArgument, and nothing is written."""
    mail = people.mail.send("alice", ["bob"], "s", "b")
    i, m = people.identities, people.mail
    calls: list[Any] = [
        lambda: i.register(BAD),
        lambda: i.register("ok", project_key="a\x00"),
        lambda: i.register("ok", agent_uuid=BAD),
        lambda: i.get(None),
        lambda: i.list(project_key=BAD),
        lambda: i.list(include_retired="yes"),
        lambda: i.for_session(""),
        lambda: i.for_session("k", git_branch=BAD),
        lambda: i.for_agent("a" * 65),
        lambda: i.heartbeat(3),
        lambda: i.retire("a b"),
        lambda: i.discover(project_key="\x00"),
        lambda: m.send("alice", ["bob"], BAD, "b"),
        lambda: m.send("alice", ["bob"], "s", "b", parent_id=BIG),
        lambda: m.send("alice", ["bob"], "s", "b", attachments={"a": {1, 2}}),
        lambda: m.send("alice", [None], "s", "b"),
        lambda: m.reply("bob", BIG, "x"),
        lambda: m.reply("bob", mail.id, BAD),
        lambda: m.reply("bob", mail.id, "x", priority="URGENT"),
        lambda: m.reply("bob", mail.id, "x", metadata=[math_nan()]),
        lambda: m.inbox("bob", state="new"),
        lambda: m.inbox("bob", limit=0),
        lambda: m.inbox("bob", limit=BIG),
        lambda: m.inbox("bob", before=-1),
        lambda: m.inbox("bob", priority=1),
        lambda: m.read("bob", 0),
        lambda: m.ack("bob", 1.0),
        lambda: m.set_state("bob", mail.id, "deleted"),
        lambda: m.set_state("bob", mail.id, "snoozed", snoozed_until=timedelta(days=10**6)),
        lambda: m.set_thread_state("bob", "x" * 201, "read"),
        lambda: m.thread(BAD),
        lambda: m.sent("alice", limit=-5),
        lambda: m.delete_sent("alice", BIG),
        lambda: m.counts(""),
        lambda: m.search(BAD),
        lambda: m.search("x", limit=BIG),
        lambda: m.wait("bob", -0.5),
        lambda: m.prune(older_than="30 days"),
    ]
    before = (mail_rows(people), people.mail.counts("bob"), people.identities.list())
    for n, call in enumerate(calls):
        with pytest.raises(ik.InvalidArgument):
            call()
            pytest.fail(f"call {n} was accepted")
    assert (mail_rows(people), people.mail.counts("bob"), people.identities.list()) == before


def math_nan() -> float:
    return float("nan")
