"""Hand-checked cases for the mail reference model (tests/reference_mail.py); no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.reference_mail import (
    EPOCH,
    TRANSITIONS,
    RefConflict,
    RefInvalid,
    RefMailWorld,
    RefNotFound,
    status_of,
)

MINUTE = timedelta(minutes=1)


def world(*names: str) -> RefMailWorld:
    """A model with these identities registered."""
    w = RefMailWorld()
    for name in names:
        w.register(name)
    return w


def states(w: RefMailWorld, name: str, **kw: object) -> list[tuple[int, str]]:
    return [(i.mail.id, i.state) for i in w.inbox(name, **kw)]  # type: ignore[arg-type]


# -- identities ------------------------------------------------------------------------------


def test_register_validates_names() -> None:
    """Names must match the pattern as a whole (no trailing newline); a taken one is a
    conflict."""
    w = world("ann")
    for bad in ["", "-x", ".x", "a b", "a\n", "x" * 65, "é"]:
        with pytest.raises(RefInvalid):
            w.register(bad)
    with pytest.raises(RefConflict):
        w.register("ann")
    w.register("Ann")
    w.register("a" * 64)
    w.register("0._-")
    assert w.names() == {"ann", "Ann", "a" * 64, "0._-"}


def test_register_sets_times_and_generated_names_are_checked() -> None:
    """created_at = last_active_at = now; a generated name must be AdjectiveNoun and free."""
    w = RefMailWorld()
    w.advance(MINUTE)
    ident = w.register("ann")
    assert (ident.created_at, ident.last_active_at, ident.retired_at) == (EPOCH + MINUTE,) * 2 + (
        None,
    )
    w.register_generated("BraveOtter")
    w.register_generated("BraveOtter2")
    for bad in ["braveotter", "Brave", "BraveOtter", "Brave-Otter"]:
        with pytest.raises(ValueError):
            w.register_generated(bad)


def test_retire_is_idempotent_and_heartbeat_refuses_retired() -> None:
    """retire keeps the first retired_at; heartbeat moves last_active_at until retired."""
    w = world("ann")
    w.advance(MINUTE)
    assert w.heartbeat("ann").last_active_at == EPOCH + MINUTE
    assert w.retire("ann").retired_at == EPOCH + MINUTE
    w.advance(MINUTE)
    assert w.retire("ann").retired_at == EPOCH + MINUTE
    with pytest.raises(RefInvalid):
        w.heartbeat("ann")
    for call in (w.retire, w.heartbeat, w.identity):
        with pytest.raises(RefNotFound):
            call("nobody")
    assert w.names() == set()
    assert w.names(include_retired=True) == {"ann"}


def test_status_boundaries() -> None:
    """active below 5 minutes, idle below 30, offline from 30 on."""
    assert status_of(EPOCH + 5 * MINUTE - timedelta(microseconds=1), EPOCH) == "active"
    assert status_of(EPOCH + 5 * MINUTE, EPOCH) == "idle"
    assert status_of(EPOCH + 30 * MINUTE - timedelta(microseconds=1), EPOCH) == "idle"
    assert status_of(EPOCH + 30 * MINUTE, EPOCH) == "offline"


def test_clock_only_moves_forward() -> None:
    """advance refuses a negative delta."""
    w = RefMailWorld()
    with pytest.raises(ValueError):
        w.advance(-MINUTE)
    assert w.advance(timedelta(0)) == EPOCH


# -- sending ---------------------------------------------------------------------------------


def test_send_delivers_sorted_distinct_recipients() -> None:
    """One mail, one unread copy per distinct recipient, names sorted; self-send allowed."""
    w = world("ann", "bob", "cat")
    mail = w.send("ann", ["cat", "bob", "cat", "ann"], "s", "b", new_thread_id="t")
    assert (mail.id, mail.to, mail.thread_id, mail.created_at) == (
        1,
        ("ann", "bob", "cat"),
        "t",
        EPOCH,
    )
    for name in ("ann", "bob", "cat"):
        assert states(w, name) == [(1, "unread")]
    assert w.send("ann", "bob", "s", "b").to == ("bob",)
    assert w.thread("t") == [mail]


def test_send_refusals_write_nothing() -> None:
    """Unknown sender or recipients NotFound (naming the unknown ones); retired sender or
    recipients InvalidArgument."""
    w = world("ann", "bob", "old")
    w.retire("old")
    with pytest.raises(RefNotFound):
        w.send("zed", ["nobody"], "s", "b")
    with pytest.raises(RefInvalid):
        w.send("old", ["bob"], "s", "b")
    with pytest.raises(RefNotFound) as unknown:
        w.send("ann", ["bob", "nobody", "old"], "s", "b")
    assert unknown.value.named == ("nobody",)
    with pytest.raises(RefInvalid) as retired:
        w.send("ann", ["bob", "old"], "s", "b")
    assert retired.value.named == ("old",)
    for bad in [[], "x"]:
        with pytest.raises(RefInvalid):
            w.send("ann", bad, "s", "b", priority="high" if bad else "normal")
    with pytest.raises(RefInvalid):
        w.send("ann", ["bob"], "s", "b", deadline_at=datetime(2030, 1, 1))
    with pytest.raises(RefInvalid):
        w.send("ann", ["bob"], "s", "b", thread_id="")
    assert (w.mails, w.copies, w.last_id) == ({}, {}, 0)


def test_parent_decides_or_must_match_thread() -> None:
    """parent_id puts the mail in the parent's thread; a missing or foreign parent is invalid."""
    w = world("ann", "bob")
    first = w.send("ann", ["bob"], "s", "b", thread_id="t1")
    other = w.send("ann", ["bob"], "s", "b", thread_id="t2")
    child = w.send("bob", ["ann"], "s", "b", parent_id=first.id)
    assert (child.thread_id, child.parent_id) == ("t1", first.id)
    assert w.send("bob", ["ann"], "s", "b", thread_id="t2", parent_id=other.id).thread_id == "t2"
    for parent, thread in [(99, None), (first.id, "t2"), (first.id, "t9")]:
        with pytest.raises(RefInvalid):
            w.send("bob", ["ann"], "s", "b", thread_id=thread, parent_id=parent)
    assert [m.id for m in w.thread("t1")] == [first.id, child.id]


def test_store_ids_and_new_threads_are_checked() -> None:
    """Ids from the store must increase; a 'new' thread must not already exist."""
    w = world("ann")
    assert w.send("ann", ["ann"], "s", "b", id=10, new_thread_id="t").id == 10
    with pytest.raises(ValueError):
        w.send("ann", ["ann"], "s", "b", id=10)
    with pytest.raises(ValueError):
        w.send("ann", ["ann"], "s", "b", id=11, new_thread_id="t")
    assert w.send("ann", ["ann"], "s", "b", thread_id="t", id=12).thread_id == "t"


def test_idempotent_send() -> None:
    """Same key and request: the original, nothing written; another request: Conflict."""
    w = world("ann", "bob", "cat")
    first = w.send("ann", ["bob", "cat"], "s", "b", idempotency_key="k", metadata={"a": 1})
    again = w.send("ann", ["cat", "bob", "bob"], "s", "b", idempotency_key="k", metadata={"a": 1})
    assert again is first and w.last_id == 1
    for change in [
        {"to": ["bob"]},
        {"subject": "t"},
        {"body": "c"},
        {"priority": "urgent"},
        {"metadata": {"a": 2}},
        {"thread_id": first.thread_id},
    ]:
        args = {"to": ["bob", "cat"], "subject": "s", "body": "b", "metadata": {"a": 1}} | change
        with pytest.raises(RefConflict):
            w.send("ann", idempotency_key="k", **args)  # type: ignore[arg-type]
    with pytest.raises(RefConflict):
        w.reply("ann", first.id, "b", idempotency_key="k")
    assert w.send("bob", ["ann"], "s", "b", idempotency_key="k").id == 2
    assert w.last_id == 2


def test_idempotent_send_survives_retirement() -> None:
    """A repeated request returns the original even after a recipient or the sender retired."""
    w = world("ann", "bob")
    first = w.send("ann", ["bob"], "s", "b", idempotency_key="k")
    w.retire("bob")
    assert w.send("ann", ["bob"], "s", "b", idempotency_key="k") is first
    w.retire("ann")
    assert w.send("ann", ["bob"], "s", "b", idempotency_key="k") is first
    with pytest.raises(RefConflict):
        w.send("ann", ["bob"], "s", "other", idempotency_key="k")
    with pytest.raises(RefInvalid):
        w.send("ann", ["bob"], "s", "other", idempotency_key="k2")


def test_reply_addresses_live_participants() -> None:
    """Recipients: every thread participant but the replier and the retired; Re: once."""
    w = world("ann", "bob", "cat", "dan")
    first = w.send("ann", ["bob"], "Plan", "b", thread_id="t")
    w.send("cat", ["ann"], "aside", "b", thread_id="t")
    w.send("ann", ["dan"], "elsewhere", "b", thread_id="u")
    reply = w.reply("bob", first.id, "ok")
    assert (reply.to, reply.subject, reply.thread_id, reply.parent_id) == (
        ("ann", "cat"),
        "Re: Plan",
        "t",
        first.id,
    )
    assert w.reply("ann", reply.id, "x").subject == "Re: Plan"
    w.retire("cat")
    assert w.reply("ann", reply.id, "x", subject="Own").to == ("bob",)
    w.retire("bob")
    with pytest.raises(RefInvalid):
        w.reply("ann", first.id, "x")


def test_reply_refusals() -> None:
    """Unknown mail or replier, or a replier who neither sent nor received it: NotFound."""
    w = world("ann", "bob", "cat")
    first = w.send("ann", ["bob"], "s", "b", thread_id="t")
    w.send("ann", ["cat"], "s", "b", thread_id="t")
    for sender, mail_id in [("bob", 99), ("nobody", first.id), ("cat", first.id)]:
        with pytest.raises(RefNotFound):
            w.reply(sender, mail_id, "x")
    w.retire("bob")
    with pytest.raises(RefInvalid):
        w.reply("bob", first.id, "x")


def test_reply_idempotency() -> None:
    """A repeated reply is the original even if participants changed; another one Conflicts."""
    w = world("ann", "bob", "cat")
    first = w.send("ann", ["bob", "cat"], "s", "b")
    reply = w.reply("bob", first.id, "x", idempotency_key="k")
    w.retire("cat")
    assert w.reply("bob", first.id, "x", idempotency_key="k") is reply
    for change in [{"body": "y"}, {"subject": "Re: s"}, {"priority": "low"}, {"metadata": 1}]:
        with pytest.raises(RefConflict):
            w.reply("bob", first.id, idempotency_key="k", **({"body": "x"} | change))  # type: ignore[arg-type]
    with pytest.raises(RefConflict):
        w.send("bob", ["ann"], "s", "x", idempotency_key="k")


# -- states ----------------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["unread", "read", "starred", "archived", "trash"])
def test_transition_table(source: str) -> None:
    """From each state exactly the table's targets are allowed; the rest change nothing."""
    for target in ["unread", "read", "starred", "snoozed", "archived", "trash"]:
        w = world("ann")
        mail = w.send("ann", ["ann"], "s", "b")
        copy = w.copies[("ann", mail.id)]
        copy.state = source
        copy.trashed_at = EPOCH if source == "trash" else None
        until = MINUTE if target == "snoozed" else None
        if target in TRANSITIONS[source]:
            assert w.set_state("ann", mail.id, target, snoozed_until=until).state == target
        else:
            before = (copy.state, copy.read_at, copy.snoozed_until)
            with pytest.raises(RefInvalid) as info:
                w.set_state("ann", mail.id, target, snoozed_until=until)
            assert info.value.named == (source, target)
            assert (copy.state, copy.read_at, copy.snoozed_until) == before
        w.check()


def test_snooze_arguments() -> None:
    """Snoozing needs a future aware datetime or positive timedelta; others get none."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b")
    for bad in [None, timedelta(0), -MINUTE, EPOCH, EPOCH - MINUTE, datetime(2031, 1, 1), 5]:
        with pytest.raises(RefInvalid):
            w.set_state("ann", mail.id, "snoozed", snoozed_until=bad)
    with pytest.raises(RefInvalid):
        w.set_state("ann", mail.id, "read", snoozed_until=MINUTE)
    with pytest.raises(RefInvalid):
        w.set_state("ann", mail.id, "bogus")
    later = datetime(2030, 1, 1, 5, tzinfo=timezone(timedelta(hours=5), "X"))
    item = w.set_state("ann", mail.id, "snoozed", snoozed_until=later + MINUTE)
    assert (item.state, item.snoozed_until) == ("snoozed", EPOCH + MINUTE)
    item = w.set_state("ann", mail.id, "snoozed", snoozed_until=2 * MINUTE)
    assert item.snoozed_until == EPOCH + 2 * MINUTE


def test_past_snooze_is_refused_before_existence() -> None:
    """A snoozed_until not in the future is a bad argument whoever asks (an unknown identity,
    a mail that does not exist, a forbidden move); a future one then meets NotFound."""
    w = world("ann", "bob")
    mail = w.send("ann", ["bob"], "s", "b")
    w.set_state("bob", mail.id, "archived")
    for who, mail_id in [
        ("ann", mail.id),
        ("ghost", mail.id),
        ("bob", mail.id + 1),
        ("bob", mail.id),
    ]:
        for bad in [EPOCH, EPOCH - MINUTE, -MINUTE]:
            with pytest.raises(RefInvalid, match="future"):
                w.set_state(who, mail_id, "snoozed", snoozed_until=bad)
    for who, mail_id in [("ann", mail.id), ("ghost", mail.id), ("bob", mail.id + 1)]:
        with pytest.raises(RefNotFound):
            w.set_state(who, mail_id, "snoozed", snoozed_until=MINUTE)


def test_passed_snooze_is_unread_everywhere() -> None:
    """After snoozed_until, the copy is unread in inbox, counts, transitions and wait."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b", priority="urgent")
    w.set_state("ann", mail.id, "snoozed", snoozed_until=MINUTE)
    assert states(w, "ann") == []
    assert states(w, "ann", state="snoozed") == [(mail.id, "snoozed")]
    assert w.counts("ann")["snoozed"] == 1
    w.advance(MINUTE)
    assert states(w, "ann") == [(mail.id, "unread")]
    assert states(w, "ann", state="unread") == [(mail.id, "unread")]
    assert states(w, "ann", state="snoozed") == []
    assert w.item("ann", mail.id).snoozed_until is None
    assert w.counts("ann") == {
        "unread": 1,
        "urgent_unread": 1,
        "starred": 0,
        "snoozed": 0,
        "archived": 0,
        "trash": 0,
    }
    with pytest.raises(RefInvalid) as info:
        w.set_state("ann", mail.id, "unread")
    assert info.value.named == ("unread", "unread")
    assert w.copies[("ann", mail.id)].state == "snoozed"
    assert w.wake_snoozed() == 1
    assert w.copies[("ann", mail.id)].state == "unread"
    assert w.wake_snoozed() == 0


def test_resnooze_only_while_sleeping() -> None:
    """A sleeping snooze may be re-snoozed; a woken one is unread, so snoozing it is legal too."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b")
    w.set_state("ann", mail.id, "snoozed", snoozed_until=MINUTE)
    assert w.set_state("ann", mail.id, "snoozed", snoozed_until=EPOCH + 3 * MINUTE).state == (
        "snoozed"
    )
    w.advance(3 * MINUTE)
    item = w.set_state("ann", mail.id, "snoozed", snoozed_until=MINUTE)
    assert item.snoozed_until == EPOCH + 4 * MINUTE
    assert w.set_state("ann", mail.id, "read").snoozed_until is None
    w.check()


def test_read_sets_read_at_once_and_keeps_other_states() -> None:
    """read: unread -> read; starred stays starred; read_at is the first reading's time."""
    w = world("ann")
    a = w.send("ann", ["ann"], "s", "b")
    b = w.send("ann", ["ann"], "s", "b")
    w.set_state("ann", b.id, "starred")
    assert w.item("ann", b.id).read_at is None
    w.advance(MINUTE)
    assert (w.read("ann", a.id).state, w.read("ann", a.id).read_at) == ("read", EPOCH + MINUTE)
    assert (w.read("ann", b.id).state, w.item("ann", b.id).read_at) == ("starred", EPOCH + MINUTE)
    w.set_state("ann", a.id, "unread")
    w.advance(MINUTE)
    assert w.set_state("ann", a.id, "read").read_at == EPOCH + MINUTE


def test_read_of_sleeping_snooze_keeps_it_snoozed() -> None:
    """Reading a sleeping snooze sets read_at only; a woken one becomes read."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b")
    w.set_state("ann", mail.id, "snoozed", snoozed_until=MINUTE)
    item = w.read("ann", mail.id)
    assert (item.state, item.read_at, item.snoozed_until) == ("snoozed", EPOCH, EPOCH + MINUTE)
    w.advance(MINUTE)
    item = w.read("ann", mail.id)
    assert (item.state, item.read_at, item.snoozed_until) == ("read", EPOCH, None)


def test_ack_once_and_reads_unread() -> None:
    """ack sets acked_at once and reads an unread copy, also after it was marked unread again."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b")
    item = w.ack("ann", mail.id)
    assert (item.state, item.read_at, item.acked_at) == ("read", EPOCH, EPOCH)
    w.advance(MINUTE)
    assert w.ack("ann", mail.id) == item
    w.set_state("ann", mail.id, "unread")
    item = w.ack("ann", mail.id)
    assert (item.state, item.read_at, item.acked_at) == ("read", EPOCH, EPOCH)
    w.set_state("ann", mail.id, "archived")
    assert w.ack("ann", mail.id).state == "archived"


def test_strangers_get_not_found() -> None:
    """State calls on a mail the identity did not receive, or by an unknown identity: NotFound."""
    w = world("ann", "bob")
    mail = w.send("ann", ["bob"], "s", "b")
    for name in ("ann", "nobody"):
        for call in (w.read, w.ack, w.item):
            with pytest.raises(RefNotFound):
                call(name, mail.id)
        with pytest.raises(RefNotFound):
            w.set_state(name, mail.id, "read")
    with pytest.raises(RefNotFound):
        w.read("bob", 99)


def test_set_thread_state_moves_only_legal_copies() -> None:
    """Each of the identity's copies in the thread moves where legal; others and others' stay."""
    w = world("ann", "bob")
    a = w.send("ann", ["bob", "ann"], "s", "b", thread_id="t")
    b = w.send("ann", ["bob"], "s", "b", thread_id="t")
    c = w.send("ann", ["bob"], "s", "b", thread_id="u")
    w.set_state("bob", b.id, "trash")
    assert w.set_thread_state("bob", "t", "archived") == 1
    assert [(i, w.item("bob", i).state) for i in (a.id, b.id, c.id)] == [
        (a.id, "archived"),
        (b.id, "trash"),
        (c.id, "unread"),
    ]
    assert w.item("ann", a.id).state == "unread"
    assert w.set_thread_state("bob", "t", "read") == 1
    assert w.item("bob", a.id).read_at == EPOCH
    assert w.set_thread_state("bob", "nothing", "trash") == 0
    for bad in ("snoozed", "bogus"):
        with pytest.raises(RefInvalid):
            w.set_thread_state("bob", "t", bad)
    with pytest.raises(RefNotFound):
        w.set_thread_state("nobody", "t", "read")


def test_inbox_filters_and_pages() -> None:
    """Default hides archived, trash and sleeping snoozes; filters by state, priority, id."""
    w = world("ann")
    ids = [w.send("ann", ["ann"], "s", "b", priority=p).id for p in PRIORITIES_CYCLE]
    w.set_state("ann", ids[1], "archived")
    w.set_state("ann", ids[2], "trash")
    w.set_state("ann", ids[3], "snoozed", snoozed_until=MINUTE)
    w.set_state("ann", ids[4], "starred")
    assert states(w, "ann") == [(ids[5], "unread"), (ids[4], "starred"), (ids[0], "unread")]
    assert states(w, "ann", state="trash") == [(ids[2], "trash")]
    assert states(w, "ann", priority="urgent") == [(ids[0], "unread")]
    assert states(w, "ann", limit=1) == [(ids[5], "unread")]
    assert states(w, "ann", before_id=ids[5]) == [(ids[4], "starred"), (ids[0], "unread")]
    assert w.counts("ann") == {
        "unread": 2,
        "urgent_unread": 1,
        "starred": 1,
        "snoozed": 1,
        "archived": 1,
        "trash": 1,
    }
    with pytest.raises(RefNotFound):
        w.inbox("nobody")


PRIORITIES_CYCLE = ["urgent", "normal", "low", "normal", "low", "normal"]


def test_wait_takes_oldest_unread() -> None:
    """wait reads the lowest-id effectively unread copy, including a woken snooze."""
    w = world("ann")
    a = w.send("ann", ["ann"], "s", "b")
    b = w.send("ann", ["ann"], "s", "b")
    w.set_state("ann", a.id, "snoozed", snoozed_until=MINUTE)
    first = w.wait("ann")
    assert first is not None and (first.mail.id, first.state) == (b.id, "read")
    assert w.wait("ann") is None
    w.advance(MINUTE)
    woken = w.wait("ann")
    assert woken is not None and (woken.mail.id, woken.state, woken.read_at) == (
        a.id,
        "read",
        EPOCH + MINUTE,
    )


def test_purge_trash_by_time_in_trash() -> None:
    """Copies in trash longer than older_than go; reading in trash does not restart the age."""
    w = world("ann", "bob")
    a = w.send("ann", ["ann", "bob"], "s", "b")
    b = w.send("ann", ["ann"], "s", "b")
    w.set_state("ann", a.id, "trash")
    w.advance(MINUTE)
    w.set_state("ann", b.id, "trash")
    w.read("ann", a.id)
    w.ack("ann", a.id)
    assert w.purge_trash(MINUTE) == 0
    w.advance(timedelta(microseconds=1))
    assert w.purge_trash(MINUTE) == 1
    assert states(w, "ann", state="trash") == [(b.id, "trash")]
    with pytest.raises(RefNotFound):
        w.item("ann", a.id)
    assert w.item("bob", a.id).state == "unread"
    assert w.thread(a.thread_id, identity="ann") == [a]
    assert a.to == ("ann", "bob")
    w.set_state("ann", b.id, "unread")
    w.set_state("ann", b.id, "trash")
    assert w.purge_trash(timedelta(0)) == 0
    w.check()


def test_thread_sent_and_delete_sent() -> None:
    """thread per identity; sent hides deleted_by_sender mails; delete_sent only by the sender."""
    w = world("ann", "bob", "cat")
    a = w.send("ann", ["bob"], "s", "b", thread_id="t")
    b = w.send("bob", ["cat"], "s", "b", thread_id="t")
    assert w.thread("t") == [a, b]
    assert w.thread("t", identity="ann") == [a]
    assert w.thread("t", identity="cat") == [b]
    assert w.thread("nothing") == []
    with pytest.raises(RefNotFound):
        w.thread("t", identity="nobody")
    c = w.send("ann", ["cat"], "s", "b")
    assert w.sent("ann") == [c, a]
    assert w.sent("ann", limit=1) == [c]
    for name, mail_id in [("bob", a.id), ("ann", 99), ("nobody", a.id)]:
        with pytest.raises(RefNotFound):
            w.delete_sent(name, mail_id)
    w.delete_sent("ann", a.id)
    w.delete_sent("ann", a.id)
    assert w.sent("ann") == [c]
    assert w.item("bob", a.id).mail.deleted_by_sender is True


def test_retired_identity_keeps_and_manages_its_mail() -> None:
    """A retired identity still reads and moves its copies; it is gone from discover."""
    w = world("ann", "bob")
    mail = w.send("ann", ["bob"], "s", "b")
    w.retire("bob")
    assert w.read("bob", mail.id).state == "read"
    assert w.set_state("bob", mail.id, "archived").state == "archived"
    assert w.discover() == {"ann": 0}
    assert w.counts("bob")["archived"] == 1


def test_mail_view_has_contract_fields() -> None:
    """RefMail.view names exactly the contract's Mail fields; items view effective state."""
    w = world("ann")
    mail = w.send("ann", ["ann"], "s", "b", new_thread_id="t")
    assert mail.view() == {
        "id": 1,
        "thread_id": "t",
        "parent_id": None,
        "sender": "ann",
        "to": ("ann",),
        "subject": "s",
        "body": "b",
        "priority": "normal",
        "deadline_at": None,
        "attachments": None,
        "metadata": None,
        "idempotency_key": None,
        "deleted_by_sender": False,
        "created_at": EPOCH,
    }
    assert w.item("ann", 1).view() == (mail.view(), "unread", None, None, None)
    assert EPOCH.tzinfo is UTC
