"""Agents: a session's participants, forks that copy no rows, and lineage replay (seed 002).

Owns the agent operations shared by both faces (see ``ops``). Invariants:
- an agent is one row; a fork points at its parent and its fork point (the parent's newest own
  event when forked, 0 for none) and inherits the parent's history up to it without copying;
- status moves running -> dead -> reaped only (``kill_agent`` takes the running subtree); a dead
  or reaped agent accepts no events and no forks, and an ended session no new agents;
- "agent zero" is the session's oldest *running* root: ``ensure_root_agent`` never returns a dead
  root (when every root has died it creates a new one);
- lineage replay is one statement at any depth (the range walk of queries/agents.sql joined to
  each range's events) and folds exactly like session replay (clear, mark, rewind and pop);
- agent uuids made here are 22 characters of base64url that never start with "-".
"""

from __future__ import annotations

import base64
import enum
import os

from .errors import InvalidArgument, NotFound
from .events import append
from .models import Agent, Message, ReplayContext, ReplayRange
from .ops import Area, FaceT, Op, atomic, many, message_rows, one, operation
from .replay import fold
from .validate import check_id, check_int, check_text, check_texts, check_uuid

__all__ = [
    "UNSET",
    "children",
    "clear",
    "create_agent",
    "ensure_root_agent",
    "find_clear",
    "fork_agent",
    "get_agent",
    "kill_agent",
    "mark",
    "new_agent_uuid",
    "pop",
    "query_range",
    "reap_agent",
    "replay_agent",
    "replay_ranges",
    "rewind",
    "running_agents",
    "set_agent_idle",
    "update_agent_model",
]


class _Unset(enum.Enum):
    UNSET = "UNSET"


#: Default of optional update arguments: "leave this field as it is" (None clears it).
UNSET = _Unset.UNSET
Unset = _Unset

AGENT_FIELDS = ("name", "provider", "model", "thinking_level")


def new_agent_uuid() -> str:
    """A new agent id as ikigai makes them: 16 random bytes, base64url, no padding (22 chars).

    Ids starting with "-" are drawn again, so a command line never mistakes one for an option.
    """
    while True:
        uuid = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")
        if not uuid.startswith("-"):
            return uuid


def create_agent(
    session_id: int,
    *,
    name: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    thinking_level: str | None = None,
) -> Op[Agent]:
    """Register a root agent (no parent) in a session."""
    check_id(session_id, "session_id")
    check_texts(name=name, provider=provider, model=model, thinking_level=thinking_level)
    row = yield one(
        "create_agent",
        uuid=new_agent_uuid(),
        session_id=session_id,
        name=name,
        provider=provider,
        model=model,
        thinking_level=thinking_level,
    )
    if row is None:
        raise (yield from _session_refuses(session_id))
    return Agent.from_row(row)


def _session_refuses(session_id: int) -> Op[InvalidArgument]:
    """Why a session took no new agent: it does not exist, or it has ended (rare path)."""
    session = yield one("session_exists", session_id=session_id)
    if not session["exists"]:
        return InvalidArgument(f"session {session_id} does not exist")
    return InvalidArgument(f"session {session_id} has ended: it accepts no new agents")


def fork_agent(
    parent_uuid: str,
    *,
    name: str | None = None,
    provider: str | None = None,
    model: str | None = None,
    thinking_level: str | None = None,
) -> Op[Agent]:
    """Fork a running agent: one new row, no message copied, constant work.

    The child inherits the parent's history up to the parent's newest own event
    (``fork_message_id``; 0 when the parent has none) and, when not given, its provider,
    model and thinking level. ``NotFound`` if the parent does not exist,
    ``InvalidArgument`` if it is not running.
    """
    check_uuid(parent_uuid)
    check_texts(name=name, provider=provider, model=model, thinking_level=thinking_level)
    row = yield one(
        "fork_agent",
        uuid=new_agent_uuid(),
        parent_uuid=parent_uuid,
        name=name,
        provider=provider,
        model=model,
        thinking_level=thinking_level,
    )
    if row is None:
        parent = yield from require_agent(parent_uuid)
        if parent.status != "running":
            raise InvalidArgument(f"agent {parent_uuid} is {parent.status}, not running")
        raise (yield from _session_refuses(parent.session_id))
    return Agent.from_row(row)


def get_agent(uuid: str) -> Op[Agent]:
    """One agent; ``NotFound`` if it does not exist."""
    check_uuid(uuid)
    return (yield from require_agent(uuid))


def require_agent(uuid: str) -> Op[Agent]:
    """The agent, or ``NotFound``."""
    row = yield one("get_agent", uuid=uuid)
    if row is None:
        raise NotFound(f"agent {uuid} does not exist")
    return Agent.from_row(row)


def kill_agent(uuid: str) -> Op[list[str]]:
    """Mark the agent and all its running descendants dead; return their uuids.

    Only the agents table changes: append an ``agent_killed`` event yourself if you want
    one in the stream. Killing a dead agent kills its running descendants, if any.
    """
    check_uuid(uuid)
    rows = yield many("kill_agent", uuid=uuid)
    if not rows:
        yield from require_agent(uuid)
    return [r["uuid"] for r in sorted(rows, key=lambda r: int(r["id"]))]


def reap_agent(uuid: str) -> Op[None]:
    """Move a dead agent to ``reaped``. ``InvalidArgument`` if it is still running."""
    check_uuid(uuid)
    row = yield one("reap_agent", uuid=uuid)
    if row is None:
        raise NotFound(f"agent {uuid} does not exist")
    if row["status"] == "running":
        raise InvalidArgument(f"agent {uuid} is running: kill it before reaping")


def set_agent_idle(uuid: str, idle: bool) -> Op[None]:
    """Set or clear an agent's idle flag."""
    check_uuid(uuid)
    if not isinstance(idle, bool):
        raise InvalidArgument("idle must be a bool")
    row = yield one("set_agent_idle", uuid=uuid, idle=idle)
    if row is None:
        raise NotFound(f"agent {uuid} does not exist")


def update_agent_model(
    uuid: str,
    *,
    provider: str | Unset | None = UNSET,
    model: str | Unset | None = UNSET,
    thinking_level: str | Unset | None = UNSET,
) -> Op[Agent]:
    """Change an agent's provider, model and/or thinking level (None clears a field)."""
    check_uuid(uuid)
    check_texts(
        provider=None if provider is UNSET else provider,
        model=None if model is UNSET else model,
        thinking_level=None if thinking_level is UNSET else thinking_level,
    )
    row = yield one(
        "update_agent_model",
        uuid=uuid,
        set_provider=provider is not UNSET,
        provider=None if provider is UNSET else provider,
        set_model=model is not UNSET,
        model=None if model is UNSET else model,
        set_thinking=thinking_level is not UNSET,
        thinking_level=None if thinking_level is UNSET else thinking_level,
    )
    if row is None:
        raise NotFound(f"agent {uuid} does not exist")
    return Agent.from_row(row)


def running_agents(session_id: int | None = None) -> Op[list[Agent]]:
    """Running agents (of one session, or all), parents before children."""
    if session_id is not None:
        check_id(session_id, "session_id")
    rows = yield many("running_agents", session_id=session_id)
    return [Agent.from_row(r) for r in rows]


def children(uuid: str) -> Op[list[Agent]]:
    """Direct children of an agent (any status), oldest first."""
    check_uuid(uuid)
    rows = yield many("agent_children", uuid=uuid)
    if not rows:
        yield from require_agent(uuid)
    return [Agent.from_row(r) for r in rows]


@atomic
def ensure_root_agent(session_id: int, **fields: str | None) -> Op[Agent]:
    """The session's root agent ("agent zero"), created if missing; events of the session
    that belong to no agent are given to it. Safe to call concurrently and repeatedly.

    ``fields`` (name, provider, model, thinking_level) apply only when it is created.
    """
    check_id(session_id, "session_id")
    unknown = set(fields) - set(AGENT_FIELDS)
    if unknown:
        raise InvalidArgument(f"unknown agent fields: {', '.join(sorted(unknown))}")
    check_texts(**fields)
    session = yield one("lock_session", session_id=session_id)
    if session is None:
        raise NotFound(f"session {session_id} does not exist")
    if session["ended"]:
        raise InvalidArgument(f"session {session_id} has ended: it accepts no new agents")
    row = yield one("session_root_agent", session_id=session_id)
    if row is None:
        row = yield one(
            "create_agent",
            uuid=new_agent_uuid(),
            session_id=session_id,
            **{f: fields.get(f) for f in AGENT_FIELDS},
        )
    yield one("adopt_orphan_messages", session_id=session_id, uuid=row["uuid"])
    return Agent.from_row(row)


def find_clear(agent_uuid: str, max_id: int | None = None) -> Op[int]:
    """Id of the agent's newest own ``clear`` with id <= ``max_id`` (None: any); 0 if none."""
    check_uuid(agent_uuid)
    if max_id is not None:
        check_int(max_id, "max_id")
    row = yield one("find_clear", agent_uuid=agent_uuid, max_id=max_id)
    return int(row["clear_id"])


def replay_ranges(agent_uuid: str) -> Op[list[ReplayRange]]:
    """The id ranges of the agent's virtual history after its newest clear, root first.

    One ``WITH RECURSIVE`` statement (see queries/agents.sql). ``NotFound`` if missing.
    """
    check_uuid(agent_uuid)
    rows = yield many("replay_ranges", agent_uuid=agent_uuid)
    if not rows:
        raise NotFound(f"agent {agent_uuid} does not exist")
    return [ReplayRange.from_row(r) for r in rows]


def query_range(replay_range: ReplayRange) -> Op[list[Message]]:
    """The agent's own events in ``start_id < id <= end_id``, in id order."""
    if not isinstance(replay_range, ReplayRange):
        raise InvalidArgument("query_range needs a ReplayRange")
    check_uuid(replay_range.agent_uuid)
    check_int(replay_range.start_id, "start_id")
    if replay_range.end_id is not None:
        check_int(replay_range.end_id, "end_id")
    found = yield message_rows(
        "query_range",
        agent_uuid=replay_range.agent_uuid,
        start_id=replay_range.start_id,
        end_id=replay_range.end_id,
    )
    return found or []


def replay_agent(agent_uuid: str) -> Op[ReplayContext]:
    """Rebuild an agent's context from its virtual history (inherited ranges, then its own),
    honouring clear, mark and rewind exactly like ``replay_session``.

    One statement at any depth: the range walk and the events come back together.
    """
    check_uuid(agent_uuid)
    found = yield message_rows("replay_agent_events", agent_uuid=agent_uuid)
    if found is None:
        raise NotFound(f"agent {agent_uuid} does not exist")
    return fold(found)


def mark(agent_uuid: str, label: str | None = None) -> Op[Message]:
    """Append a mark for the agent (``content`` and ``data.label`` = label)."""
    agent = yield from get_agent(agent_uuid)
    return (
        yield from append(agent.session_id, "mark", label, {"label": label}, agent_uuid=agent_uuid)
    )


@atomic
def rewind(agent_uuid: str, label: str | None = None) -> Op[Message]:
    """Rewind the agent to the newest mark on its current replayed stack whose label is
    ``label`` (the newest mark when None). ``InvalidArgument`` when there is none.

    Marks are looked up in this agent's replayed context only (inherited ones included),
    never in another agent's, unlike the C program's per-session lookup.
    """
    check_uuid(agent_uuid)
    check_text(label, "label")
    agent = yield from require_agent(agent_uuid)
    marks = (yield from replay_agent(agent_uuid)).marks
    target = next((m for m in reversed(marks) if label is None or m.label == label), None)
    if target is None:
        wanted = "mark" if label is None else f"mark labelled {label!r}"
        raise InvalidArgument(f"agent {agent_uuid} has no {wanted} on its stack")
    return (
        yield from append(
            agent.session_id,
            "rewind",
            target.label,
            {"target_message_id": target.message_id, "target_label": target.label},
            agent_uuid=agent_uuid,
        )
    )


@atomic
def pop(agent_uuid: str) -> Op[Message | None]:
    """Remove the newest event from the agent's replayed context and return it (None, and
    nothing written, when the context is empty).

    Appends a ``pop`` for the agent aimed at it (``data.target_message_id``; history keeps
    both), holding the session's row lock until it is stored, so concurrent pops each remove a
    different event. ``NotFound`` if the agent does not exist; ``InvalidArgument`` if it is not
    running or its session has ended (and its context is not empty).
    """
    check_uuid(agent_uuid)
    agent = yield from require_agent(agent_uuid)
    yield one("lock_session", session_id=agent.session_id)
    context = (yield from replay_agent(agent_uuid)).messages
    if not context:
        return None
    target = context[-1]
    yield from append(
        agent.session_id, "pop", None, {"target_message_id": target.id}, agent_uuid=agent_uuid
    )
    return target


def clear(agent_uuid: str) -> Op[Message]:
    """Append a clear for the agent: its context (and what later forks inherit) restarts."""
    agent = yield from get_agent(agent_uuid)
    return (yield from append(agent.session_id, "clear", None, None, agent_uuid=agent_uuid))


class AgentOps(Area[FaceT]):
    """The agents operations of a store (``Store``, ``AsyncStore``)."""

    create_agent = operation(create_agent)
    fork_agent = operation(fork_agent)
    get_agent = operation(get_agent)
    kill_agent = operation(kill_agent)
    reap_agent = operation(reap_agent)
    set_agent_idle = operation(set_agent_idle)
    update_agent_model = operation(update_agent_model)
    running_agents = operation(running_agents)
    children = operation(children)
    ensure_root_agent = operation(ensure_root_agent)
    replay_agent = operation(replay_agent)
    mark = operation(mark)
    rewind = operation(rewind)
    pop = operation(pop)
    clear = operation(clear)
    # Internals (the seed's steps of replay, for tests and the CLI's range view).
    _find_clear = operation(find_clear)
    _replay_ranges = operation(replay_ranges)
    _query_range = operation(query_range)
