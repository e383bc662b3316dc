"""In-memory reference model of session replay: the oracle the production fold is tested against.

Owns nothing persistent. It records appended events and recomputes the replay from scratch, in the
most direct way, every time ``replay()`` is called. It is written from the spec, not from
``ikigai_store.replay``, and imports nothing from the package.

Spec (events processed in ``id`` order):

- ``clear``: empty the context, the mark stack and ``skipped`` (it reports the live part only);
  the clear itself is not kept.
- ``mark``: append it; push ``(message_id, label, index of the mark in the context)``. The label is
  ``data["label"]`` when ``data`` is a dict and that value is a str, else None.
- ``rewind``: if ``data["target_message_id"]`` is an int (not a bool) naming a mark still on the
  stack, cut the context to end just after that mark, drop the marks above it (it stays and can be
  reused) and append the rewind. Otherwise the rewind is not appended; its id goes to ``skipped``.
- ``pop``: if ``data["target_message_id"]`` is an int (not a bool) naming an event in the
  context, that event leaves the context (and the mark stack, if it is a mark; every mark's
  ``context_idx`` stays its index in the context). The pop itself is never appended. Otherwise
  its id goes to ``skipped``.
- any other kind: append.

Invariants: every mark on the stack is in the context at its ``context_idx``; stack entries have
strictly increasing ``context_idx``; ``skipped`` ids are in increasing order.

Agents (``RefWorld``): each agent of a session owns the events appended with its uuid. A root has
no parent and fork point 0. A fork of a running parent records as fork point the id of the parent's
newest own event, or 0 when it has none (0 means "none of the parent's own events", never "no
limit"); nothing is copied. The virtual history is

- ``V(root) = own(root)``;
- ``V(child) = R(parent, fork(child)) + own(child)``, where ``R(a, f) = R(parent(a), fork(a)) +
  [e in own(a) if e.id <= f]`` (and ``R(root, f)`` is the root's own events with id <= f).

An agent's replay is ``replay_events(V(agent))``. Its ranges come from walking up from the agent:
with upper bound ``end`` (None for the agent itself), the newest own clear with id <= end ends the
walk with ``(agent, clear_id, end)``; otherwise ``(agent, 0, end)`` is emitted and the walk moves
to the parent with ``end = fork point``. Ranges are returned root first; ``start`` is exclusive,
``end`` inclusive. Killing an agent makes it and every running descendant dead; a dead agent cannot
be forked but may still be appended to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "RefAgent",
    "RefEvent",
    "RefMark",
    "RefRange",
    "RefSession",
    "RefWorld",
    "replay_events",
]

RefMark = tuple[int, str | None, int]
"""``(message_id, label, context_idx)``."""

RefRange = tuple[str, int, int | None]
"""``(agent_uuid, start_id, end_id)``: own events, ``start_id < id <= end_id`` (None: no bound)."""


@dataclass(frozen=True)
class RefEvent:
    """One event as the model sees it."""

    id: int
    kind: str
    content: str | None = None
    data: Any = None


def _label(data: Any) -> str | None:
    if isinstance(data, dict):
        label = data.get("label")
        if isinstance(label, str):
            return label
    return None


def _target(data: Any) -> int | None:
    if isinstance(data, dict):
        target = data.get("target_message_id")
        if isinstance(target, int) and not isinstance(target, bool):
            return target
    return None


def replay_events(events: list[RefEvent]) -> tuple[list[int], list[RefMark], list[int]]:
    """Replay ``events`` (sorted by id first) into ``(context_ids, marks, skipped)``."""
    context: list[int] = []
    marks: list[RefMark] = []
    skipped: list[int] = []
    for event in sorted(events, key=lambda e: e.id):
        if event.kind == "clear":
            context = []
            marks = []
            skipped = []
        elif event.kind == "mark":
            context.append(event.id)
            marks.append((event.id, _label(event.data), len(context) - 1))
        elif event.kind == "rewind":
            target = _target(event.data)
            stack_ids = [mark_id for mark_id, _, _ in marks]
            if target is None or target not in stack_ids:
                skipped.append(event.id)
                continue
            position = stack_ids.index(target)
            _, _, context_idx = marks[position]
            context = context[: context_idx + 1]
            marks = marks[: position + 1]
            context.append(event.id)
        elif event.kind == "pop":
            target = _target(event.data)
            if target is None or target not in context:
                skipped.append(event.id)
                continue
            context = [i for i in context if i != target]
            marks = [
                (mark_id, label, context.index(mark_id))
                for mark_id, label, _ in marks
                if mark_id != target
            ]
        else:
            context.append(event.id)
    return context, marks, skipped


@dataclass
class RefSession:
    """A session's appended events; ``replay()`` recomputes the context from all of them."""

    events: list[RefEvent] = field(default_factory=list)

    def append(self, id: int, kind: str, content: str | None = None, data: Any = None) -> RefEvent:
        """Record one event; ids must be strictly increasing, as the store assigns them."""
        if self.events and id <= self.events[-1].id:
            raise ValueError(f"id {id} is not greater than {self.events[-1].id}")
        event = RefEvent(id, kind, content, data)
        self.events.append(event)
        return event

    @property
    def ids(self) -> list[int]:
        """Ids of every appended event, in order."""
        return [e.id for e in self.events]

    def mark_ids(self) -> list[int]:
        """Ids of every mark ever appended, whether or not still on the stack."""
        return [e.id for e in self.events if e.kind == "mark"]

    def replay(self) -> tuple[list[int], list[RefMark], list[int]]:
        """Return ``(context_ids, marks, skipped)`` for the events appended so far."""
        return replay_events(self.events)


@dataclass
class RefAgent:
    """One agent: its place in the tree and the events appended with its uuid."""

    uuid: str
    parent: str | None
    fork_point: int
    running: bool = True
    events: list[RefEvent] = field(default_factory=list)


@dataclass
class RefWorld:
    """The agents of one session and every event appended to them; everything is recomputed."""

    agents: dict[str, RefAgent] = field(default_factory=dict)
    last_id: int = 0

    # -- writes ------------------------------------------------------------------------------

    def create(self, uuid: str) -> RefAgent:
        """Add a root agent."""
        return self._add(RefAgent(uuid, None, 0))

    def fork(self, uuid: str, parent: str) -> RefAgent:
        """Add a child of running ``parent``; the fork point is the parent's newest own id or 0."""
        p = self.agents[parent]
        if not p.running:
            raise ValueError(f"agent {parent} is dead")
        return self._add(RefAgent(uuid, parent, p.events[-1].id if p.events else 0))

    def _add(self, agent: RefAgent) -> RefAgent:
        if agent.uuid in self.agents:
            raise ValueError(f"agent {agent.uuid} exists")
        self.agents[agent.uuid] = agent
        return agent

    def append(
        self, uuid: str, id: int, kind: str, content: str | None = None, data: Any = None
    ) -> RefEvent:
        """Record one event of running agent ``uuid``; ids are strictly increasing across the
        session. A dead agent takes no events."""
        if not self.agents[uuid].running:
            raise ValueError(f"agent {uuid} is dead")
        if id <= self.last_id:
            raise ValueError(f"id {id} is not greater than {self.last_id}")
        event = RefEvent(id, kind, content, data)
        self.agents[uuid].events.append(event)
        self.last_id = id
        return event

    def kill(self, uuid: str) -> set[str]:
        """Mark ``uuid`` and its running descendants dead; return the uuids that were running."""
        killed = {a for a in self.subtree(uuid) if self.agents[a].running}
        for a in killed:
            self.agents[a].running = False
        return killed

    # -- reads -------------------------------------------------------------------------------

    def subtree(self, uuid: str) -> list[str]:
        """``uuid`` and all its descendants."""
        return [a for a in self.agents if uuid in self.ancestry(a)]

    def ancestry(self, uuid: str) -> list[str]:
        """``uuid``, its parent, grandparent, ... up to the root."""
        chain = [uuid]
        while (parent := self.agents[chain[-1]].parent) is not None:
            chain.append(parent)
        return chain

    def running(self) -> list[str]:
        """Uuids of running agents, in creation order (so parents come before children)."""
        return [a.uuid for a in self.agents.values() if a.running]

    def _restricted(self, uuid: str, limit: int | None) -> list[RefEvent]:
        """``R(uuid, limit)``: the inherited part, then own events with id <= limit (None: all)."""
        agent = self.agents[uuid]
        inherited = [] if agent.parent is None else self._restricted(agent.parent, agent.fork_point)
        return inherited + [e for e in agent.events if limit is None or e.id <= limit]

    def virtual_history(self, uuid: str) -> list[RefEvent]:
        """Every event the agent sees, inherited first; ids are strictly increasing."""
        events = self._restricted(uuid, None)
        ids = [e.id for e in events]
        assert ids == sorted(set(ids)), ids
        return events

    def replay(self, uuid: str) -> tuple[list[int], list[RefMark], list[int]]:
        """``(context_ids, marks, skipped)`` of the agent's virtual history."""
        return replay_events(self.virtual_history(uuid))

    def mark_ids(self) -> list[int]:
        """Ids of every mark of the session, whichever agent appended it."""
        return sorted(e.id for a in self.agents.values() for e in a.events if e.kind == "mark")

    def find_clear(self, uuid: str, max_id: int | None = None) -> int:
        """Id of the agent's newest own clear with id <= max_id (None: any), or 0."""
        ids = [
            e.id
            for e in self.agents[uuid].events
            if e.kind == "clear" and (max_id is None or e.id <= max_id)
        ]
        return max(ids, default=0)

    def ranges(self, uuid: str) -> list[RefRange]:
        """The ranges replay reads for ``uuid``, root first (see the module docstring)."""
        walk: list[RefRange] = []
        current: str | None = uuid
        end: int | None = None
        while current is not None:
            clear = self.find_clear(current, end)
            walk.append((current, clear, end))
            if clear:
                break
            agent = self.agents[current]
            current, end = agent.parent, agent.fork_point
        return walk[::-1]

    def query_range(self, r: RefRange) -> list[RefEvent]:
        """Own events of ``r``'s agent with ``start < id <= end`` (no upper bound when None)."""
        uuid, start, end = r
        return [
            e for e in self.agents[uuid].events if start < e.id and (end is None or e.id <= end)
        ]

    def rewind_target(self, uuid: str, label: str | None = None) -> int | None:
        """Newest mark on the agent's current stack with that label (any label when None)."""
        for mark_id, mark_label, _ in reversed(self.replay(uuid)[1]):
            if label is None or mark_label == label:
                return mark_id
        return None
