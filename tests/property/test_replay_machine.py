"""Replay through the real database agrees with the reference model after every step.

A Hypothesis state machine appends events through the store API (one fresh session per example,
inside the ``ikigai_store`` fixture's rolled-back transaction) and mirrors them in ``RefSession``;
after each step ``store.replay_session`` and ``store.messages`` must match the model exactly.
"""

from __future__ import annotations

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
from ikigai_store.web import timeline
from tests.reference import RefSession

pytestmark = pytest.mark.db

ORDINARY_KINDS = ["system", "user", "assistant", "tool_call", "tool_result", "command", "usage"]

# Any text PostgreSQL can store: no NUL (text and jsonb reject it), no lone surrogates.
texts = st.text(
    st.characters(codec="utf-8", exclude_characters="\x00")
    | st.sampled_from(["'", '"', "\\", "%", "\n", "é", "✓", "𝄞", "\u200d"]),
    max_size=20,
)
labels = st.none() | texts | st.sampled_from(["approach-a", "", 'it\'s "quoted"', "%%s", "👩‍💻"])
ordinary_data = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["k", "label", "text"]), texts | st.integers(-5, 5), max_size=2
    ),
)


class Aborted(Exception):
    """Raised inside a transaction block to roll it back."""


class ReplayMachine(RuleBasedStateMachine):
    """Drives one session through the store and checks it against the reference model."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefSession()
        self.sid: int | None = None
        # Each idempotency key used, with the event stored under it (its id, kind, content, data).
        self.keyed: dict[str, tuple[int, str, str | None, Any]] = {}
        # Each key a batch used: the id of its first event, and how many events it stored.
        self.batch_keys: dict[str, tuple[int, int]] = {}

    # -- helpers -----------------------------------------------------------------------------

    def append(self, kind: str, content: str | None = None, data: Any = None) -> int:
        """Append through the store and mirror the stored event in the model."""
        assert self.sid is not None
        message = self.store.append(self.sid, kind, content, data)
        assert message.session_id == self.sid
        assert message.kind == kind
        self.model.append(message.id, kind, content, data)
        return message.id

    def stack_ids(self) -> list[int]:
        return [mark_id for mark_id, _, _ in self.model.replay()[1]]

    def stale_ids(self) -> list[int]:
        live = set(self.stack_ids())
        return [mark_id for mark_id in self.model.mark_ids() if mark_id not in live]

    def non_mark_ids(self) -> list[int]:
        return [e.id for e in self.model.events if e.kind != "mark"]

    def append_mark(self, label: str | None, style: str) -> int:
        data = {"label": label} if style == "dict" else None if style == "none" else {"label": None}
        return self.append("mark", label, data)

    def rewind(self, target: int) -> int:
        return self.append("rewind", None, {"target_message_id": target})

    def pop(self, target: int) -> int:
        return self.append("pop", None, {"target_message_id": target})

    def context_ids(self) -> list[int]:
        return self.model.replay()[0]

    def poppable_ids(self) -> list[int]:
        """Events a pop may aim at (``append`` accepts): any but clears and pops."""
        return [e.id for e in self.model.events if e.kind not in ("clear", "pop")]

    def out_of_context_ids(self) -> list[int]:
        live = set(self.context_ids())
        return [i for i in self.poppable_ids() if i not in live]

    # -- rules ---------------------------------------------------------------------------------

    @initialize()
    def new_session(self) -> None:
        """Each example gets its own session."""
        self.sid = self.store.create_session()

    @rule(kind=st.sampled_from(ORDINARY_KINDS), content=st.none() | texts, data=ordinary_data)
    def append_ordinary(self, kind: str, content: str | None, data: Any) -> None:
        """An ordinary event is always kept by replay."""
        self.append(kind, content, data)

    @rule(
        kind=st.sampled_from(ORDINARY_KINDS),
        content=st.none() | texts,
        data=ordinary_data,
        key=st.sampled_from(["k1", "k2", "k3", "a key with spaces ✓"]),
        repeat=st.booleans(),
    )
    def append_with_a_key(
        self, kind: str, content: str | None, data: Any, key: str, repeat: bool
    ) -> None:
        """An append with an unused key is stored; the same append again (a retry) returns the
        stored event and stores nothing; another event under a used key is a Conflict that
        stores nothing."""
        assert self.sid is not None
        if key not in self.keyed:
            message = self.store.append(self.sid, kind, content, data, idempotency_key=key)
            assert (message.kind, message.content, message.data) == (kind, content, data)
            self.model.append(message.id, kind, content, data)
            self.keyed[key] = (message.id, kind, content, data)
            return
        first_id, *event = self.keyed[key]
        if repeat or tuple(event) == (kind, content, data):
            again = self.store.append(self.sid, *event, idempotency_key=key)
            assert (again.id, again.kind, again.content, again.data) == (first_id, *event)
        else:
            with pytest.raises(ik.Conflict, match="used for a different event"):
                self.store.append(self.sid, kind, content, data, idempotency_key=key)

    @rule(
        events=st.lists(
            st.tuples(st.sampled_from(ORDINARY_KINDS), st.none() | texts, ordinary_data),
            min_size=1,
            max_size=4,
        ),
        key=st.sampled_from(["b1", "b2"]),
        repeat=st.booleans(),
    )
    def append_many_with_a_key(
        self, events: list[tuple[str, str | None, Any]], key: str, repeat: bool
    ) -> None:
        """A keyed batch under an unused key is stored (the key on its first event); under a
        used key it stores nothing and returns the session's events from the keyed one, as
        many as the batch has, when they are this batch (a retry), else raises Conflict."""
        assert self.sid is not None
        if key not in self.batch_keys:
            stored = self.store.append_many(self.sid, events, idempotency_key=key)
            assert [(m.kind, m.content, m.data) for m in stored] == events
            for m, (kind, content, data) in zip(stored, events, strict=True):
                self.model.append(m.id, kind, content, data)
            self.batch_keys[key] = (stored[0].id, len(stored))
            return
        first, count = self.batch_keys[key]
        if repeat:  # the first batch again, exactly
            events = [(e.kind, e.content, e.data) for e in self.model.events if e.id >= first][
                :count
            ]
        found = [e for e in self.model.events if e.id >= first][: len(events)]
        if [(e.kind, e.content, e.data) for e in found] == events:
            again = self.store.append_many(self.sid, events, idempotency_key=key)
            assert [(m.id, m.kind, m.content, m.data) for m in again] == [
                (e.id, e.kind, e.content, e.data) for e in found
            ]
        else:
            with pytest.raises(ik.Conflict, match="used for different events"):
                self.store.append_many(self.sid, events, idempotency_key=key)

    @rule(label=labels, style=st.sampled_from(["dict", "dict", "label_none", "none"]))
    def append_mark_rule(self, label: str | None, style: str) -> None:
        """A mark, labelled through data, with data {"label": None}, or with no data at all."""
        self.append_mark(label, style)

    @rule()
    def clear(self) -> None:
        """A clear empties the context and the mark stack."""
        self.append("clear")

    @precondition(lambda self: self.stack_ids())
    @rule(data=st.data())
    def rewind_to_current_mark(self, data: st.DataObject) -> None:
        """A rewind to a mark still on the stack is applied."""
        self.rewind(data.draw(st.sampled_from(self.stack_ids()), label="target"))

    @precondition(lambda self: self.stale_ids())
    @rule(data=st.data())
    def rewind_to_stale_mark(self, data: st.DataObject) -> None:
        """A rewind to a mark rewound past or cleared away is stored but skipped by replay."""
        self.rewind(data.draw(st.sampled_from(self.stale_ids()), label="target"))

    @rule()
    def pop_session(self) -> None:
        """store.pop_session removes the newest event of the context and returns it (None on
        an empty context, with nothing written)."""
        assert self.sid is not None
        context = self.context_ids()
        popped = self.store.pop_session(self.sid)
        if not context:
            assert popped is None
            assert self.store.count_messages(self.sid) == len(self.model.events)
            return
        assert popped is not None and popped.id == context[-1]
        stored = self.store.messages(self.sid)[-1]
        assert stored.kind == "pop" and stored.data == {"target_message_id": context[-1]}
        self.model.append(stored.id, "pop", None, stored.data)

    @precondition(lambda self: self.context_ids())
    @rule(data=st.data())
    def pop_from_the_middle(self, data: st.DataObject) -> None:
        """A pop aimed at any event of the context removes exactly that event."""
        self.pop(data.draw(st.sampled_from(self.context_ids()), label="target"))

    @precondition(lambda self: self.out_of_context_ids())
    @rule(data=st.data())
    def pop_out_of_context(self, data: st.DataObject) -> None:
        """A pop aimed at an event no longer in the context (popped, rewound past, cleared
        away, or a skipped rewind) is stored but skipped by replay."""
        self.pop(data.draw(st.sampled_from(self.out_of_context_ids()), label="target"))

    @rule(data=st.data())
    def pop_of_clear_pop_or_nothing_is_rejected(self, data: st.DataObject) -> None:
        """A pop aimed at a clear, a pop or no event of the session raises InvalidArgument
        and stores nothing."""
        assert self.sid is not None
        bad = [e.id for e in self.model.events if e.kind in ("clear", "pop")]
        missing = (self.model.ids[-1] if self.model.ids else 0) + 10**9
        target = data.draw(st.sampled_from([*bad, missing]), label="target")
        with pytest.raises(ik.InvalidArgument):
            self.store.append(self.sid, "pop", None, {"target_message_id": target})

    @rule(data=st.data())
    def append_several_in_one_transaction(self, data: st.DataObject) -> None:
        """Events grouped in store.transaction() replay as if appended one by one."""
        steps = data.draw(
            st.lists(
                st.sampled_from(["ordinary", "mark", "clear", "rewind", "pop", "many"]),
                min_size=1,
                max_size=6,
            ),
            label="steps",
        )
        with self.store.transaction():
            for step in steps:
                self._batch_step(step, data)

    def _batch_step(self, step: str, data: st.DataObject) -> None:
        """One event of a batch; a rewind targets any mark of the session, live or stale, a pop
        any event it may aim at; ``many`` appends several events with one append_many."""
        assert self.sid is not None
        mark_ids = self.model.mark_ids()
        if step == "rewind" and mark_ids:
            self.rewind(data.draw(st.sampled_from(mark_ids), label="target"))
        elif step == "pop" and self.poppable_ids():
            self.pop(data.draw(st.sampled_from(self.poppable_ids()), label="target"))
        elif step == "many":
            events = data.draw(
                st.lists(
                    st.tuples(
                        st.sampled_from([*ORDINARY_KINDS, "mark", "clear"]),
                        st.none() | texts,
                        ordinary_data,
                    ),
                    max_size=4,
                ),
                label="events",
            )
            # A mark's data is a label (a string or null), here its content.
            events = [(k, c, {"label": c} if k == "mark" else d) for k, c, d in events]
            stored = self.store.append_many(self.sid, events)
            assert [(m.kind, m.content, m.data) for m in stored] == events
            assert [m.id for m in stored] == sorted({m.id for m in stored})
            for message, (kind, content, event_data) in zip(stored, events, strict=True):
                self.model.append(message.id, kind, content, event_data)
        elif step == "mark":
            self.append_mark(data.draw(labels, label="label"), "dict")
        elif step == "clear":
            self.append("clear")
        else:
            self.append(data.draw(st.sampled_from(ORDINARY_KINDS), label="kind"), "batched")

    @rule(label=labels)
    def rolled_back_transaction_leaves_no_trace(self, label: str | None) -> None:
        """Appends in a transaction block that raises are all rolled back."""
        assert self.sid is not None
        with pytest.raises(Aborted), self.store.transaction():
            self.store.append(self.sid, "mark", label, {"label": label})
            self.store.append(self.sid, "clear")
            raise Aborted

    @precondition(lambda self: self.non_mark_ids())
    @rule(data=st.data())
    def rewind_to_non_mark_is_rejected(self, data: st.DataObject) -> None:
        """A rewind aimed at a non-mark event raises InvalidArgument and stores nothing."""
        assert self.sid is not None
        target = data.draw(st.sampled_from(self.non_mark_ids()), label="target")
        with pytest.raises(ik.InvalidArgument):
            self.store.append(self.sid, "rewind", None, {"target_message_id": target})

    # -- invariants ----------------------------------------------------------------------------

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def stored_events_match_model(self) -> None:
        """store.messages() returns every appended event, in order, unchanged."""
        assert self.sid is not None
        stored = self.store.messages(self.sid)
        assert [m.id for m in stored] == self.model.ids
        assert [(m.kind, m.content, m.data) for m in stored] == [
            (e.kind, e.content, e.data) for e in self.model.events
        ]

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def replay_matches_model(self) -> None:
        """store.replay_session() equals the model's context, mark stack and skipped list."""
        assert self.sid is not None
        ctx = self.store.replay_session(self.sid)
        context_ids, marks, skipped = self.model.replay()
        assert [m.id for m in ctx.messages] == context_ids
        assert [(mk.message_id, mk.label, mk.context_idx) for mk in ctx.marks] == marks
        assert ctx.skipped == skipped

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def replay_tail_matches_model(self) -> None:
        """store.replay_tail (folded in SQL) returns the model's context, whole or its newest
        1 or 3 events."""
        assert self.sid is not None
        context_ids = self.model.replay()[0]
        assert [m.id for m in self.store.replay_tail(self.sid)] == context_ids
        for limit in (1, 3):
            tail = self.store.replay_tail(self.sid, limit=limit)
            assert [m.id for m in tail] == context_ids[-limit:]

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def timeline_agrees_with_replay(self) -> None:
        """The web timeline's verdict on every event (``web.timeline.Controls``, which folds the
        marks, rewinds, clears and pops, and the pops' targets, alone) is replay's: ``live``
        exactly for the replayed ones."""
        assert self.sid is not None
        controls = self.store._run(timeline.controls(self.sid))
        live = [e.id for e in self.model.events if controls.state(e.id) == "live"]
        assert live == self.model.replay()[0]


def test_replay_machine(ikigai_store: ik.Store) -> None:
    """Store replay equals the reference model after every step of random append sequences."""

    class OnThisStore(ReplayMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )


def test_seed_example_through_store(ikigai_store: ik.Store) -> None:
    """The seed example replayed from the database gives context [1,2,3,6,7,8] by position."""
    store = ikigai_store
    sid = store.create_session()
    ids = [store.append(sid, "user", "hi").id, store.append(sid, "assistant", "hello").id]
    mark = store.append(sid, "mark", "approach-a", {"label": "approach-a"}).id
    ids.append(mark)
    store.append(sid, "user", "try a")
    store.append(sid, "assistant", "a failed")
    ids.append(store.append(sid, "rewind", None, {"target_message_id": mark}).id)
    ids.append(store.append(sid, "user", "try b").id)
    ids.append(store.append(sid, "assistant", "b works").id)
    ctx = store.replay_session(sid)
    assert [m.id for m in ctx.messages] == ids
    assert [m.content for m in ctx.messages] == [
        "hi",
        "hello",
        "approach-a",
        None,
        "try b",
        "b works",
    ]
    assert [(mk.message_id, mk.label, mk.context_idx) for mk in ctx.marks] == [
        (mark, "approach-a", 2)
    ]
    assert ctx.skipped == []
