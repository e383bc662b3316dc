"""Agent replay through the real database agrees with the reference model after every step.

A Hypothesis state machine creates, forks and kills agents and appends events to them through the
store API (one fresh session per example, inside the ``ikigai_store`` fixture's rolled-back
transaction), mirroring everything in ``RefWorld``. After each step, for every agent of the
session, ``replay_agent``, ``replay_ranges`` and ``find_clear`` must equal the model, and
``running_agents`` must list the model's running agents with parents before children.
"""

from __future__ import annotations

import re
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
from tests.reference import RefWorld

pytestmark = pytest.mark.db

ORDINARY_KINDS = ["system", "user", "assistant", "tool_call", "tool_result", "command", "usage"]
UUID = re.compile(r"[A-Za-z0-9_-]{22}")

# A few labels that collide often, so that labelled rewinds find (and miss) marks.
labels = st.none() | st.sampled_from(["a", "b", "", "it's", "%%s", "👩‍💻"])
contents = st.none() | st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=8)


class Aborted(Exception):
    """Raised inside a transaction block to roll it back."""


class AgentMachine(RuleBasedStateMachine):
    """Drives the agents of one session through the store and checks them against RefWorld."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefWorld()
        self.sid: int | None = None

    # -- helpers -----------------------------------------------------------------------------

    def agents(self) -> list[str]:
        return list(self.model.agents)

    def running(self) -> list[str]:
        return self.model.running()

    def dead(self) -> list[str]:
        return [a for a in self.model.agents if not self.model.agents[a].running]

    def with_marks(self) -> list[str]:
        """Agents whose current replay has at least one mark on the stack."""
        return [a for a in self.model.agents if self.model.replay(a)[1]]

    def running_with_marks(self) -> list[str]:
        """Running agents with a mark on their stack, in creation order (drawn by position)."""
        running = set(self.running())
        return [a for a in self.with_marks() if a in running]

    def pick(self, data: st.DataObject, choices: list[str], label: str = "agent") -> str:
        return data.draw(st.sampled_from(choices), label=label)

    def record(self, uuid: str, message: ik.Message) -> int:
        """Check the stored event belongs to this session and agent, and mirror it."""
        assert message.session_id == self.sid
        assert message.agent_uuid == uuid
        self.model.append(uuid, message.id, message.kind, message.content, message.data)
        return message.id

    def append(self, uuid: str, kind: str, content: str | None = None, data: Any = None) -> int:
        assert self.sid is not None
        message = self.store.append(self.sid, kind, content, data, agent_uuid=uuid)
        assert (message.kind, message.content, message.data) == (kind, content, data)
        return self.record(uuid, message)

    def bounds(self) -> list[int]:
        """0, every event id of the session and one past the last: interesting range bounds.

        Drawn by position, never as raw integers: ids differ between runs of the same example.
        """
        ids = sorted(e.id for a in self.model.agents.values() for e in a.events)
        return [0, *ids, self.model.last_id + 1]

    def check_agent(self, agent: ik.Agent) -> None:
        """An Agent row agrees with the model's parent, fork point and status."""
        ref = self.model.agents[agent.uuid]
        assert UUID.fullmatch(agent.uuid), agent.uuid
        assert agent.session_id == self.sid
        assert agent.parent_uuid == ref.parent
        assert agent.fork_message_id == ref.fork_point
        assert agent.status == ("running" if ref.running else "dead")

    def create_root(self) -> None:
        assert self.sid is not None
        agent = self.store.create_agent(self.sid)
        self.model.create(agent.uuid)
        self.check_agent(agent)

    # -- rules ---------------------------------------------------------------------------------

    @initialize()
    def new_session(self) -> None:
        """Each example gets its own session with one root agent."""
        self.sid = self.store.create_session()
        self.create_root()

    @rule()
    def create_root_agent(self) -> None:
        """Another root agent in the same session."""
        self.create_root()

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        """A fork of a running agent records the parent's newest own event id (0 if none)."""
        parent = self.pick(data, self.running(), "parent")
        agent = self.store.fork_agent(parent)
        self.model.fork(agent.uuid, parent)
        self.check_agent(agent)

    @precondition(lambda self: self.dead())
    @rule(data=st.data())
    def fork_dead_is_rejected(self, data: st.DataObject) -> None:
        """Forking a dead agent raises InvalidArgument and creates nothing."""
        with pytest.raises(ik.InvalidArgument):
            self.store.fork_agent(self.pick(data, self.dead()))

    @precondition(lambda self: self.running())
    @rule(data=st.data(), kind=st.sampled_from(ORDINARY_KINDS), content=contents)
    def append_ordinary(self, data: st.DataObject, kind: str, content: str | None) -> None:
        """An ordinary event on a running agent."""
        self.append(self.pick(data, self.running()), kind, content)

    @precondition(lambda self: self.dead())
    @rule(data=st.data(), kind=st.sampled_from([*ORDINARY_KINDS, "mark", "clear"]))
    def append_to_dead_is_rejected(self, data: st.DataObject, kind: str) -> None:
        """A dead agent takes no event: InvalidArgument, and nothing is written."""
        assert self.sid is not None
        uuid = self.pick(data, self.dead())
        before = self.store.count_messages(self.sid)
        with pytest.raises(ik.InvalidArgument, match="dead"):
            self.store.append(self.sid, kind, "late", agent_uuid=uuid)
        assert self.store.count_messages(self.sid) == before

    @precondition(lambda self: self.running())
    @rule(data=st.data(), label=labels)
    def mark_via_store(self, data: st.DataObject, label: str | None) -> None:
        """store.mark appends a mark whose data is {"label": label}."""
        uuid = self.pick(data, self.running())
        message = self.store.mark(uuid, label)
        assert (message.kind, message.data) == ("mark", {"label": label})
        self.record(uuid, message)

    @precondition(lambda self: self.running())
    @rule(data=st.data(), label=labels)
    def mark_via_append(self, data: st.DataObject, label: str | None) -> None:
        """A mark appended directly with data {"label": label}."""
        self.append(self.pick(data, self.running()), "mark", label, {"label": label})

    @precondition(lambda self: self.running())
    @rule(data=st.data(), via_store=st.booleans())
    def clear(self, data: st.DataObject, via_store: bool) -> None:
        """A clear, through store.clear or a plain append."""
        uuid = self.pick(data, self.running())
        if via_store:
            message = self.store.clear(uuid)
            assert message.kind == "clear"
            self.record(uuid, message)
        else:
            self.append(uuid, "clear")

    @precondition(lambda self: self.running_with_marks())
    @rule(data=st.data())
    def rewind_to_current_mark(self, data: st.DataObject) -> None:
        """A rewind to a mark on the agent's current stack (own or inherited) is applied."""
        uuid = self.pick(data, self.running_with_marks())
        stack = [mark_id for mark_id, _, _ in self.model.replay(uuid)[1]]
        target = data.draw(st.sampled_from(stack), label="target")
        self.append(uuid, "rewind", None, {"target_message_id": target})

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def pop_via_store(self, data: st.DataObject) -> None:
        """store.pop removes the newest event of the agent's context (own or inherited) and
        returns it; on an empty context it returns None and writes nothing."""
        assert self.sid is not None
        uuid = self.pick(data, self.running())
        context = self.model.replay(uuid)[0]
        before = self.store.count_messages(self.sid)
        popped = self.store.pop(uuid)
        if not context:
            assert popped is None
            assert self.store.count_messages(self.sid) == before
            return
        assert popped is not None and popped.id == context[-1]
        message = self.store.messages(self.sid)[-1]
        assert (message.kind, message.data) == ("pop", {"target_message_id": context[-1]})
        self.record(uuid, message)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def pop_any_session_event(self, data: st.DataObject) -> None:
        """A pop aimed at any event of the session a pop may aim at: in the agent's context
        (removed), or not (another branch, popped, cut, walled: skipped)."""
        uuid = self.pick(data, self.running())
        targets = sorted(
            e.id
            for a in self.model.agents.values()
            for e in a.events
            if e.kind not in ("clear", "pop")
        )
        if targets:
            target = data.draw(st.sampled_from(targets), label="target")
            self.append(uuid, "pop", None, {"target_message_id": target})

    @precondition(lambda self: self.model.mark_ids() and self.running())
    @rule(data=st.data())
    def rewind_to_any_session_mark(self, data: st.DataObject) -> None:
        """A rewind to any mark of the session: live, stale, or of another branch."""
        uuid = self.pick(data, self.running())
        target = data.draw(st.sampled_from(self.model.mark_ids()), label="target")
        self.append(uuid, "rewind", None, {"target_message_id": target})

    @precondition(lambda self: self.running())
    @rule(data=st.data(), label=labels)
    def rewind_via_store(self, data: st.DataObject, label: str | None) -> None:
        """store.rewind targets the newest matching mark on the current stack, or raises."""
        uuid = self.pick(data, self.running())
        target = self.model.rewind_target(uuid, label)
        if target is None:
            with pytest.raises(ik.InvalidArgument):
                self.store.rewind(uuid, label)
            return
        message = self.store.rewind(uuid, label)
        assert message.kind == "rewind"
        assert isinstance(message.data, dict)
        assert message.data.get("target_message_id") == target
        self.record(uuid, message)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def kill(self, data: st.DataObject) -> None:
        """Killing a running agent returns it and its running descendants."""
        uuid = self.pick(data, self.running())
        killed = self.store.kill_agent(uuid)
        assert len(killed) == len(set(killed))
        assert set(killed) == self.model.kill(uuid)

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def several_in_one_transaction(self, data: st.DataObject) -> None:
        """Events on several agents grouped in store.transaction() count as if one by one."""
        steps = data.draw(
            st.lists(
                st.sampled_from(["ordinary", "mark", "clear", "rewind", "fork"]),
                min_size=1,
                max_size=6,
            ),
            label="steps",
        )
        with self.store.transaction():
            for step in steps:
                self._batch_step(step, data)

    def _batch_step(self, step: str, data: st.DataObject) -> None:
        uuid = self.pick(data, self.running())
        mark_ids = self.model.mark_ids()
        if step == "rewind" and mark_ids:
            target = data.draw(st.sampled_from(mark_ids), label="target")
            self.append(uuid, "rewind", None, {"target_message_id": target})
        elif step == "mark":
            label = data.draw(labels, label="label")
            self.append(uuid, "mark", label, {"label": label})
        elif step == "clear":
            self.append(uuid, "clear")
        elif step == "fork" and self.running():
            parent = self.pick(data, self.running(), "parent")
            agent = self.store.fork_agent(parent)
            self.model.fork(agent.uuid, parent)
            self.check_agent(agent)
        else:
            self.append(uuid, data.draw(st.sampled_from(ORDINARY_KINDS), label="kind"), "b")

    @precondition(lambda self: self.running())
    @rule(data=st.data())
    def rolled_back_transaction_leaves_no_trace(self, data: st.DataObject) -> None:
        """A fork, appends and a kill in a transaction block that raises are all rolled back."""
        assert self.sid is not None
        uuid = self.pick(data, self.running())
        with pytest.raises(Aborted), self.store.transaction():
            child = self.store.fork_agent(uuid)
            self.store.append(self.sid, "user", "gone", agent_uuid=child.uuid)
            self.store.mark(uuid, "gone")
            self.store.clear(uuid)
            self.store.kill_agent(uuid)
            raise Aborted

    @rule(data=st.data())
    def find_clear_with_bound(self, data: st.DataObject) -> None:
        """find_clear(agent, max_id) is the agent's newest own clear with id <= max_id, or 0."""
        uuid = self.pick(data, self.agents())
        max_id = data.draw(st.sampled_from(self.bounds()), label="max_id")
        assert self.store._find_clear(uuid, max_id) == self.model.find_clear(uuid, max_id)

    @rule(data=st.data())
    def query_range_bounds(self, data: st.DataObject) -> None:
        """query_range returns the agent's own events with start < id <= end (None: no end)."""
        uuid = self.pick(data, self.agents())
        start = data.draw(st.sampled_from(self.bounds()), label="start")
        end = data.draw(st.none() | st.sampled_from(self.bounds()), label="end")
        got = self.store._query_range(ik.ReplayRange(agent_uuid=uuid, start_id=start, end_id=end))
        assert [(m.id, m.agent_uuid) for m in got] == [
            (e.id, uuid) for e in self.model.query_range((uuid, start, end))
        ]

    # -- invariants ----------------------------------------------------------------------------

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def every_agent_replays_like_the_model(self) -> None:
        """For every agent: replay_agent, replay_ranges and find_clear equal the model."""
        owner = {e.id: a.uuid for a in self.model.agents.values() for e in a.events}
        for uuid in self.model.agents:
            ctx = self.store.replay_agent(uuid)
            context_ids, marks, skipped = self.model.replay(uuid)
            assert [(m.id, m.agent_uuid) for m in ctx.messages] == [
                (i, owner[i]) for i in context_ids
            ], uuid
            assert [(mk.message_id, mk.label, mk.context_idx) for mk in ctx.marks] == marks
            assert ctx.skipped == skipped
            ranges = self.store._replay_ranges(uuid)
            assert [(r.agent_uuid, r.start_id, r.end_id) for r in ranges] == self.model.ranges(
                uuid
            ), uuid
            assert self.store._find_clear(uuid) == self.model.find_clear(uuid)

    @precondition(lambda self: self.sid is not None)
    @invariant()
    def running_agents_match_model(self) -> None:
        """running_agents(sid) is the model's running set, every parent before its children."""
        listed = self.store.running_agents(self.sid)
        uuids = [a.uuid for a in listed]
        assert len(uuids) == len(set(uuids))
        assert set(uuids) == set(self.model.running())
        for position, agent in enumerate(listed):
            self.check_agent(agent)
            if agent.parent_uuid in uuids:
                assert uuids.index(agent.parent_uuid) < position


def test_agent_machine(ikigai_store: ik.Store) -> None:
    """Agent replay, ranges, clears and liveness equal the model after every random step."""

    class OnThisStore(AgentMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
