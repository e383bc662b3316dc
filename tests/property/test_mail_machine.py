"""Identities and agent mail through the real database agree with the reference model.

A Hypothesis state machine registers and retires identities, sends (to several recipients, to
unknown and retired names), replies, resends with used idempotency keys (the same request, or a
changed one), moves copies along legal and illegal transitions, reads, acks, snoozes, waits
(timeout 0), wakes snoozes, purges trash and moves whole threads, while a controllable clock
(``ikigai.now``, see tests/mailtools.py) advances; every call is mirrored in ``RefMailWorld``
(tests/reference_mail.py). A refusal must be the same ``ik`` error as the model's, name what the
model names, and write nothing. After each step, for every identity, the default inbox, the inbox
of one state (rotating), and the counts must equal the model, as must every thread (whole, and
as one identity sees it) and one identity's sent view.

Each example runs in a savepoint of the ``ikigai_store`` fixture's rolled-back transaction (on
each face), so examples do not see each other's identities, mail or clock.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
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
from tests.mailtools import EPOCH, Clock, mail_rows
from tests.reference_mail import (
    COUNT_FIELDS,
    MAIL_FIELDS,
    MAIL_STATES,
    PRIORITIES,
    TRANSITIONS,
    RefConflict,
    RefError,
    RefInvalid,
    RefItem,
    RefMail,
    RefMailWorld,
    RefNotFound,
    status_of,
)

pytestmark = pytest.mark.db

#: Valid names (two differ only in case); "ghost" is never registered.
NAMES = ["ann", "Ann", "bob", "cat.dev", "d_e-9"]
GHOST = "ghost"
BAD_NAMES = ["", "-x", "a b", "a\n", "x" * 65, "é", "a'b"]
STATES = [*MAIL_STATES, "bogus"]
KEYS = ["k1", "k2"]
ACTIONS = ["legal", "illegal", "snooze", "any", "read", "ack"]

MICRO = timedelta(microseconds=1)
STEPS = [
    MICRO,
    timedelta(seconds=1),
    timedelta(minutes=1),
    timedelta(minutes=5) - MICRO,
    timedelta(minutes=5),
    timedelta(minutes=30),
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=30),
]
ZONES = [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]

subjects = st.sampled_from(["", "Plan", "Re: Plan", "Re: Re: x", 'it\'s "q" %s', "✓ 𝄞"])
bodies = st.sampled_from(["", "ok", "**go**", "line\nline", "é\u200d"])
priorities = st.sampled_from(PRIORITIES)
json_values = st.none() | st.sampled_from(
    [{"a": 1}, [1, "x"], "text", 0, {"nested": {"k": [None, "v"]}}, []]
)
keys = st.none() | st.sampled_from(KEYS)

ERRORS: dict[type[RefError], type[Exception]] = {
    RefInvalid: ik.InvalidArgument,
    RefNotFound: ik.NotFound,
    RefConflict: ik.Conflict,
}
STORE_ERRORS = (ik.InvalidArgument, ik.NotFound, ik.Conflict)


class Refused(Exception):
    """Both store and model refused the call (the same way)."""


def mail_view(mail: ik.Mail) -> dict[str, Any]:
    return {f: getattr(mail, f) for f in MAIL_FIELDS}


def item_view(item: ik.InboxItem) -> tuple[Any, ...]:
    return (mail_view(item.mail), item.state, item.read_at, item.acked_at, item.snoozed_until)


class MailMachine(RuleBasedStateMachine):
    """Drives identities and mail through the store and checks them against RefMailWorld."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefMailWorld()
        self.scope = ExitStack()
        self.scope.enter_context(store.transaction(force_rollback=True))
        self.clock = Clock(store, EPOCH)
        self.objects: dict[str, ik.Identity] = {}
        self.keyed: list[tuple[str, str, dict[str, Any]]] = []
        self.steps = 0

    def teardown(self) -> None:
        self.scope.close()

    # -- helpers -----------------------------------------------------------------------------

    def pick(self, data: st.DataObject, choices: list[Any], label: str) -> Any:
        return data.draw(st.sampled_from(choices), label=label)

    def known(self) -> list[str]:
        """Registered names in registration order (generated names are random: never sort)."""
        return list(self.model.identities)

    def live(self) -> list[str]:
        live = self.model.names()
        return [n for n in self.known() if n in live]

    def threads(self) -> list[str]:
        """Thread ids in order of their first mail (drawn by position: new ones are uuids)."""
        return list(dict.fromkeys(m.thread_id for m in self.model.mails.values()))

    def anyone(self, data: st.DataObject, label: str) -> str:
        """Mostly a registered identity (retired or not), sometimes an unknown name."""
        if self.known() and data.draw(st.integers(0, 5), label=f"{label} known?"):
            return self.pick(data, self.known(), label)
        return self.pick(data, [GHOST, *NAMES], label)

    def sender(self, data: st.DataObject) -> str:
        """Mostly an identity that may send; sometimes a retired or unknown one."""
        if self.live() and data.draw(st.integers(0, 5), label="live sender?"):
            return self.pick(data, self.live(), "sender")
        return self.anyone(data, "sender")

    def recipients(self, data: st.DataObject) -> list[str]:
        """One to three live names; sometimes with an unknown or retired one among them."""
        to = []
        if self.live():
            to = data.draw(st.lists(st.sampled_from(self.live()), max_size=3), label="to")
        if not to or data.draw(st.integers(0, 4), label="bad recipient?") == 0:
            retired = [n for n in self.known() if n not in self.model.names()]
            bad = self.pick(data, [GHOST, *retired, *NAMES], "bad recipient")
            to.insert(data.draw(st.integers(0, len(to)), label="at"), bad)
        return to

    def who(self, data: st.DataObject, name: str) -> str | ik.Identity:
        """The name, or the Identity of that name (either is accepted everywhere)."""
        if name in self.objects and data.draw(st.booleans(), label="as Identity"):
            return self.objects[name]
        return name

    def mail_ids(self) -> list[int]:
        return list(self.model.mails)

    def copies(self) -> list[tuple[str, int]]:
        return list(self.model.copies)

    def a_copy(self, data: st.DataObject) -> tuple[str, int]:
        """Mostly a copy someone holds; sometimes a pair with no copy (a stranger, a ghost)."""
        if self.copies() and data.draw(st.integers(0, 4), label="held?"):
            return self.pick(data, self.copies(), "copy")
        ids = [*self.mail_ids(), self.model.last_id + 10_000]
        return self.anyone(data, "identity"), self.pick(data, ids, "mail id")

    def both(self, store_call: Callable[[], Any], model_call: Callable[[Any], Any]) -> Any:
        """Run the call on the store, then on the model (given the store's result).

        Either both succeed (the store's result is returned, with the model's), or both refuse
        with the matching ``ik`` error whose message contains what the model names; then no
        mail or recipient row was written and ``Refused`` is raised.
        """
        rows = mail_rows(self.store)
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
                assert mail_rows(self.store) == rows, "a refused call wrote rows"
                raise Refused from exc
            raise AssertionError(f"store raised {exc!r}; the model accepted") from exc
        try:
            expected = model_call(got)
        except RefError as ref:
            raise AssertionError(f"store returned {got!r}; the model refused: {ref!r}") from ref
        return got, expected

    def check_mail(self, got: ik.Mail, expected: RefMail) -> None:
        assert mail_view(got) == expected.view()

    def check_item(self, got: ik.InboxItem | None, expected: RefItem | None) -> None:
        if expected is None:
            assert got is None
        else:
            assert got is not None
            assert item_view(got) == expected.view()

    def check_identity(self, got: ik.Identity) -> None:
        ref = self.model.identity(got.name)
        assert (got.created_at, got.retired_at) == (ref.created_at, ref.retired_at)
        # A store may count more than heartbeats as activity; never less, never the future.
        assert ref.last_active_at <= got.last_active_at <= self.model.now

    def remember(self, kind: str, sender: str, args: dict[str, Any], mail: ik.Mail) -> None:
        if args.get("idempotency_key") is not None and mail.idempotency_key is not None:
            self.keyed.append((kind, sender, args))

    # -- rules: identities ---------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """Every example starts with ann, bob and cat.dev, and two mails of one thread."""
        for name in ("ann", "bob", "cat.dev"):
            self.objects[name] = self.store.identities.register(name)
            self.model.register(name)
        first = self.store.mail.send("ann", ["bob", "cat.dev"], "Plan", "go", priority="urgent")
        expected = self.model.send(
            "ann",
            ["bob", "cat.dev"],
            "Plan",
            "go",
            priority="urgent",
            id=first.id,
            new_thread_id=first.thread_id,
        )
        self.check_mail(first, expected)
        second = self.store.mail.reply("bob", first.id, "ok")
        self.check_mail(second, self.model.reply("bob", first.id, "ok", id=second.id))

    @precondition(lambda self: len(self.model.identities) < 7)
    @rule(name=st.sampled_from([*NAMES, *BAD_NAMES]))
    def register(self, name: str) -> None:
        """A named registration: new valid names succeed; taken or invalid ones are refused."""
        try:
            got, _ = self.both(
                lambda: self.store.identities.register(name), lambda _: self.model.register(name)
            )
        except Refused:
            return
        self.objects[name] = got
        assert (got.name, got.created_at, got.last_active_at) == (name, *(self.model.now,) * 2)
        self.check_identity(got)

    @precondition(lambda self: len(self.model.identities) < 7)
    @rule()
    def register_memorable(self) -> None:
        """register() with no name picks a free AdjectiveNoun name."""
        got = self.store.identities.register()
        self.model.register_generated(got.name)
        self.objects[got.name] = got
        self.check_identity(got)

    @precondition(lambda self: len(self.model.names()) > 2)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """retire is idempotent (keeps the first retired_at); unknown names are NotFound."""
        name = self.anyone(data, "name")
        try:
            got, _ = self.both(
                lambda: self.store.identities.retire(self.who(data, name)),
                lambda _: self.model.retire(name),
            )
        except Refused:
            return
        self.check_identity(got)

    @rule(data=st.data())
    def heartbeat(self, data: st.DataObject) -> None:
        """heartbeat sets last_active_at to now; refused for retired and unknown identities."""
        name = self.anyone(data, "name")
        try:
            got, _ = self.both(
                lambda: self.store.identities.heartbeat(name),
                lambda _: self.model.heartbeat(name),
            )
        except Refused:
            return
        assert got.last_active_at == self.model.now
        self.check_identity(got)

    @rule(data=st.data(), include_retired=st.booleans())
    def identity_views(self, data: st.DataObject, include_retired: bool) -> None:
        """get finds retired identities too (NotFound for unknown names); list and discover
        show the model's identities, most recently active first, with the model's unread counts
        and a status that fits last_active_at."""
        name = self.anyone(data, "name")
        try:
            got, _ = self.both(
                lambda: self.store.identities.get(name), lambda _: self.model.identity(name)
            )
            self.check_identity(got)
        except Refused:
            pass
        listed = self.store.identities.list(include_retired=include_retired)
        assert {i.name for i in listed} == self.model.names(include_retired=include_retired)
        order = [(i.last_active_at, i.id) for i in listed]
        assert order == sorted(order, reverse=True)
        for ident in listed:
            self.check_identity(ident)
        found = self.store.identities.discover()
        assert {s.identity.name: s.unread for s in found} == self.model.discover()
        order = [(s.identity.last_active_at, s.identity.id) for s in found]
        assert order == sorted(order, reverse=True)
        for status in found:
            assert status.status == status_of(self.model.now, status.identity.last_active_at)

    # -- rules: clock --------------------------------------------------------------------------

    @rule(delta=st.sampled_from(STEPS))
    def advance_clock(self, delta: timedelta) -> None:
        """Time passes (snoozes wake, statuses age, trash ages)."""
        self.clock.set(self.model.advance(delta))

    # -- rules: sending ------------------------------------------------------------------------

    def send_args(self, data: st.DataObject) -> dict[str, Any]:
        to: Any = self.recipients(data)
        if len(to) == 1 and data.draw(st.booleans(), label="to as one name"):
            to = to[0]
        threads = self.threads()
        thread_id = data.draw(
            st.none() | st.sampled_from([*threads, "custom-thread"]), label="thread_id"
        )
        parent_id = None
        if data.draw(st.integers(0, 3), label="parent?") == 0:
            parent_id = self.pick(data, [*self.mail_ids(), self.model.last_id + 10_000], "parent")
        deadline = None
        if data.draw(st.booleans(), label="deadline?"):
            offset = self.pick(data, [-STEPS[-1], *STEPS], "deadline offset")
            zone = self.pick(data, ZONES, "deadline zone")
            deadline = (self.model.now + offset).astimezone(zone)
        return {
            "to": to,
            "subject": data.draw(subjects, label="subject"),
            "body": data.draw(bodies, label="body"),
            "thread_id": thread_id,
            "parent_id": parent_id,
            "priority": data.draw(priorities, label="priority"),
            "deadline_at": deadline,
            "attachments": data.draw(json_values, label="attachments"),
            "metadata": data.draw(json_values, label="metadata"),
            "idempotency_key": data.draw(keys, label="key"),
        }

    def do_send(self, data: st.DataObject, sender: str, args: dict[str, Any]) -> None:
        to = args["to"]
        store_to = to if isinstance(to, str) else [self.who(data, n) for n in to]
        store_args = args | {"to": store_to}
        try:
            got, expected = self.both(
                lambda: self.store.mail.send(self.who(data, sender), **store_args),
                lambda got: self.model.send(
                    sender,
                    **args,
                    id=None if got is None else got.id,
                    new_thread_id=None if got is None else got.thread_id,
                ),
            )
        except Refused:
            return
        self.check_mail(got, expected)
        self.remember("send", sender, args, got)

    @rule(data=st.data())
    def send(self, data: st.DataObject) -> None:
        """A send to one or several names (some unknown or retired), in a new or given thread."""
        self.do_send(data, self.sender(data), self.send_args(data))

    @precondition(lambda self: self.model.mails)
    @rule(data=st.data(), same_thread=st.booleans())
    def send_with_parent(self, data: st.DataObject, same_thread: bool) -> None:
        """A send naming a parent: it joins the parent's thread (or must name it)."""
        args = self.send_args(data)
        parent = self.model.mails[self.pick(data, self.mail_ids(), "parent")]
        args["parent_id"] = parent.id
        args["thread_id"] = parent.thread_id if same_thread else None
        self.do_send(data, self.sender(data), args)

    def do_reply(self, data: st.DataObject, sender: str, args: dict[str, Any]) -> None:
        try:
            got, expected = self.both(
                lambda: self.store.mail.reply(self.who(data, sender), **args),
                lambda got: self.model.reply(sender, **args, id=None if got is None else got.id),
            )
        except Refused:
            return
        self.check_mail(got, expected)
        self.remember("reply", sender, args, got)

    @precondition(lambda self: self.model.mails)
    @rule(data=st.data())
    def reply(self, data: st.DataObject) -> None:
        """A reply by a participant (mostly) or a stranger, to every other live participant."""
        mail_id = self.pick(data, [*self.mail_ids(), self.model.last_id + 10_000], "mail id")
        mail = self.model.mails.get(mail_id)
        if mail is not None and data.draw(st.integers(0, 3), label="participant?"):
            people = [n for n in self.known() if n == mail.sender or n in mail.to]
            live = [p for p in people if p in self.model.names()]
            sender = self.pick(data, live or people, "sender")
        else:
            sender = self.anyone(data, "sender")
        args = {
            "mail_id": mail_id,
            "body": data.draw(bodies, label="body"),
            "subject": data.draw(st.none() | subjects, label="subject"),
            "priority": data.draw(priorities, label="priority"),
            "metadata": data.draw(json_values, label="metadata"),
            "idempotency_key": data.draw(keys, label="key"),
        }
        self.do_reply(data, sender, args)

    @precondition(lambda self: self.keyed)
    @rule(data=st.data(), change=st.booleans())
    def resend_with_used_key(self, data: st.DataObject, change: bool) -> None:
        """Repeating a keyed request returns the original; changing it is a Conflict."""
        kind, sender, args = self.pick(data, self.keyed, "request")
        args = dict(args)
        if kind == "send" and data.draw(st.booleans(), label="same, spelled differently"):
            to = args["to"]
            names = [to] if isinstance(to, str) else list(to)
            args["to"] = data.draw(st.permutations(names + names[:1]), label="to again")
            if args["deadline_at"] is not None:
                zone = self.pick(data, ZONES, "deadline zone")
                args["deadline_at"] = args["deadline_at"].astimezone(zone)
        if change:
            field = self.pick(data, ["body", "priority", "kind", "subject"], "changed field")
            if field == "body":
                args["body"] = args["body"] + " (changed)"
            elif field == "priority":
                others = [p for p in PRIORITIES if p != args["priority"]]
                args["priority"] = self.pick(data, others, "priority")
            elif field == "subject":
                args["subject"] = (args["subject"] or "") + " (changed)"
            elif kind == "send":
                kind = "reply"
                args = {
                    "mail_id": self.pick(data, self.mail_ids(), "mail id"),
                    "body": args["body"],
                    "idempotency_key": args["idempotency_key"],
                }
            else:
                kind = "send"
                args = {
                    "to": [sender],
                    "subject": "s",
                    "body": args["body"],
                    "idempotency_key": args["idempotency_key"],
                }
        before = self.model.last_id
        if kind == "send":
            self.do_send(data, sender, args)
        else:
            self.do_reply(data, sender, args)
        if not change:
            assert self.model.last_id == before, "a repeated request wrote a new mail"

    @rule(data=st.data())
    def delete_sent(self, data: st.DataObject) -> None:
        """delete_sent hides a mail from its sender's view; NotFound for anyone else."""
        if self.model.mails and data.draw(st.integers(0, 3), label="own?"):
            mail = self.model.mails[self.pick(data, self.mail_ids(), "mail id")]
            name, mail_id = mail.sender, mail.id
        else:
            name, mail_id = self.a_copy(data)
        try:
            self.both(
                lambda: self.store.mail.delete_sent(self.who(data, name), mail_id),
                lambda _: self.model.delete_sent(name, mail_id),
            )
        except Refused:
            return

    # -- rules: states -------------------------------------------------------------------------

    def snooze_arg(self, data: st.DataObject, state: str) -> Any:
        """A snoozed_until: mostly valid for snoozed and None otherwise; sometimes bad."""
        if state != "snoozed" and data.draw(st.integers(0, 5), label="stray until?"):
            return None
        delta = self.pick(data, [-STEPS[2], timedelta(0), *STEPS], "snooze for")
        how = self.pick(data, ["relative", "absolute", "naive"], "snooze how")
        if how == "relative":
            return delta
        when = (self.model.now + delta).astimezone(self.pick(data, ZONES, "zone"))
        return when.replace(tzinfo=None) if how == "naive" else when

    def move(self, data: st.DataObject, name: str, mail_id: int, state: str, until: Any) -> None:
        try:
            got, expected = self.both(
                lambda: self.store.mail.set_state(
                    self.who(data, name), mail_id, state, snoozed_until=until
                ),
                lambda _: self.model.set_state(name, mail_id, state, snoozed_until=until),
            )
        except Refused:
            return
        self.check_item(got, expected)

    def future(self, data: st.DataObject) -> datetime | timedelta:
        """A valid snoozed_until: a positive timedelta, or a later aware datetime."""
        delta = self.pick(data, STEPS, "snooze for")
        if data.draw(st.booleans(), label="relative?"):
            return delta
        return (self.model.now + delta).astimezone(self.pick(data, ZONES, "zone"))

    @precondition(lambda self: self.model.mails)
    @rule(data=st.data(), action=st.sampled_from(ACTIONS))
    def change_copy(self, data: st.DataObject, action: str) -> None:
        """One recipient action: a transition the table allows from the copy's effective state,
        one it forbids (staying put included), a snooze, any set_state (strangers and bad
        snoozed_until included), read or ack. The model says which must succeed."""
        if action in ("any", "read", "ack") or not self.model.copies:
            name, mail_id = self.a_copy(data)
        else:
            name, mail_id = self.pick(data, self.copies(), "copy")
        if action in ("read", "ack"):
            store_call = self.store.mail.ack if action == "ack" else self.store.mail.read
            model_call = self.model.ack if action == "ack" else self.model.read
            try:
                got, expected = self.both(
                    lambda: store_call(self.who(data, name), mail_id),
                    lambda _: model_call(name, mail_id),
                )
            except Refused:
                return
            self.check_item(got, expected)
            return
        if action == "any" or (name, mail_id) not in self.model.copies:
            state = self.pick(data, STATES, "to")
            self.move(data, name, mail_id, state, self.snooze_arg(data, state))
            return
        current, _ = self.model.effective(self.model.copies[(name, mail_id)])
        if action == "legal":
            state = self.pick(data, sorted(TRANSITIONS[current]), "to")
        elif action == "illegal":
            state = self.pick(data, sorted(set(MAIL_STATES) - TRANSITIONS[current]), "to")
        else:
            state = "snoozed"
        until = self.future(data) if state == "snoozed" else None
        self.move(data, name, mail_id, state, until)

    @precondition(lambda self: self.model.mails)
    @rule(data=st.data(), state=st.sampled_from(STATES))
    def set_thread_state(self, data: st.DataObject, state: str) -> None:
        """A transition applied to each of an identity's copies in a thread where legal."""
        name = self.anyone(data, "name")
        thread_id = self.pick(data, [*self.threads(), "no-such-thread"], "thread")
        try:
            got, expected = self.both(
                lambda: self.store.mail.set_thread_state(self.who(data, name), thread_id, state),
                lambda _: self.model.set_thread_state(name, thread_id, state),
            )
        except Refused:
            return
        assert got == expected

    @rule(data=st.data())
    def wait_without_blocking(self, data: st.DataObject) -> None:
        """wait(timeout=0) reads and returns the oldest unread copy, or None."""
        name = self.anyone(data, "name")
        try:
            got, expected = self.both(
                lambda: self.store.mail.wait(self.who(data, name), 0),
                lambda _: self.model.wait(name),
            )
        except Refused:
            return
        self.check_item(got, expected)

    @rule()
    def wake_snoozed(self) -> None:
        """wake_snoozed materialises exactly the passed snoozes."""
        assert self.store.mail.wake_snoozed() == self.model.wake_snoozed()

    @rule(older_than=st.none() | st.sampled_from([timedelta(0), *STEPS[:7]]))
    def purge_trash(self, older_than: timedelta | None) -> None:
        """purge_trash deletes copies in trash longer than older_than (default 30 days)."""
        if older_than is None:
            got = self.store.mail.prune()
            expected = self.model.purge_trash()
        else:
            got = self.store.mail.prune(older_than=older_than)
            expected = self.model.purge_trash(older_than)
        assert got == expected

    # -- rules: views with arguments -----------------------------------------------------------

    @rule(data=st.data(), limit=st.integers(1, 4))
    def paged_views(self, data: st.DataObject, limit: int) -> None:
        """inbox with a state, priority, limit and before, and sent with a limit, equal the
        model's."""
        name = self.anyone(data, "name")
        state = data.draw(st.none() | st.sampled_from(MAIL_STATES), label="state")
        priority = data.draw(st.none() | priorities, label="priority")
        before = data.draw(
            st.none() | st.sampled_from([*self.mail_ids(), self.model.last_id + 1]),
            label="before_id",
        )
        kwargs = {"state": state, "priority": priority, "limit": limit, "before_id": before}
        store_kwargs = {"state": state, "priority": priority, "limit": limit, "before": before}
        try:
            got, expected = self.both(
                lambda: self.store.mail.inbox(self.who(data, name), **store_kwargs),
                lambda _: self.model.inbox(name, **kwargs),
            )
        except Refused:
            return
        assert [item_view(i) for i in got] == [i.view() for i in expected]
        try:
            got, expected = self.both(
                lambda: self.store.mail.sent(name, limit=limit),
                lambda _: self.model.sent(name, limit=limit),
            )
        except Refused:
            return
        assert [mail_view(m) for m in got] == [m.view() for m in expected]

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def mailboxes_match(self) -> None:
        """Every identity's default inbox, one state's inbox (rotating) and counts equal the
        model's; so do every thread, one identity's view of it, and that identity's sent."""
        self.steps += 1
        self.model.check()
        state = MAIL_STATES[self.steps % len(MAIL_STATES)]
        names = self.known()
        for name in names:
            got = self.store.mail.inbox(name)
            assert [item_view(i) for i in got] == [i.view() for i in self.model.inbox(name)]
            got = self.store.mail.inbox(name, state=state)
            expected = self.model.inbox(name, state=state)
            assert [item_view(i) for i in got] == [i.view() for i in expected], state
            counts = self.store.mail.counts(name)
            assert {f: getattr(counts, f) for f in COUNT_FIELDS} == self.model.counts(name)
        viewer = names[self.steps % len(names)]
        for thread_id in self.model.threads():
            got_thread = self.store.mail.thread(thread_id)
            assert [mail_view(m) for m in got_thread] == [
                m.view() for m in self.model.thread(thread_id)
            ]
            got_thread = self.store.mail.thread(thread_id, identity=viewer)
            assert [mail_view(m) for m in got_thread] == [
                m.view() for m in self.model.thread(thread_id, identity=viewer)
            ]
        got_sent = self.store.mail.sent(viewer)
        assert [mail_view(m) for m in got_sent] == [m.view() for m in self.model.sent(viewer)]


def test_mail_machine(ikigai_store: ik.Store) -> None:
    """Identities, sends, replies, states, snoozes and views equal the model after every step."""

    class OnThisStore(MailMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
