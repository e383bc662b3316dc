"""The append-only event stream of a session, and session replay.

Owns appending events and reading them back, for both faces (see ``ops``). Invariants:
- events are ordered by ``id`` only; ``messages`` rows are never updated or deleted here;
- an append is one statement that inserts only into a session that exists and has not ended,
  for no agent or a running agent of that session, for a rewind only if its target is a mark of
  the same session, and for a pop only if its target is an event of the same session that is
  not a clear or a pop: the checks cannot race the insert (the agent's row is locked FOR SHARE,
  the session's FOR KEY SHARE, which ``end_session``'s FOR UPDATE waits for), so no event ever
  lands in an ended session or on a dead agent; ``append_many`` stores any number of
  events with one such statement (all or none);
- bad input raises ``InvalidArgument`` before anything is written; why a write was refused is
  worked out only on that rare path;
- replay reads only the events after the session's newest clear and folds them (``replay.fold``);
  ``replay_tail`` returns the newest events of that context in one statement that folds only
  the mark, rewind and pop events (queries/replay.sql), so its cost does not grow with history;
- ``pop_session`` appends a ``pop`` aimed at the newest event of the context while holding the
  session's row lock, so concurrent pops each remove a different event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .errors import Conflict, InvalidArgument, NotFound
from .models import VALID_KINDS, Message, ReplayContext, is_valid_kind
from .ops import Area, FaceT, Op, atomic, many, message_rows, one, operation
from .replay import fold, target_id
from .sessions import require_session
from .validate import (
    check_content,
    check_id,
    check_int,
    check_limit,
    check_str,
    check_uuid,
    dump_json,
)

__all__ = [
    "append",
    "append_many",
    "count_messages",
    "messages",
    "pop_session",
    "replay_session",
    "replay_tail",
]

#: Kinds that aim at another event (``data.target_message_id``).
TARGETED = frozenset({"rewind", "pop"})


def append(
    session_id: int,
    kind: str,
    content: str | None = None,
    data: Any = None,
    *,
    agent_uuid: str | None = None,
    idempotency_key: str | None = None,
) -> Op[Message]:
    """Append one event to a session (and to one of its agents) and return it as stored.

    With ``idempotency_key`` (1-200 characters, unique within the session) a retried append
    stores nothing new: when the session already holds an event with that key, that event is
    returned, even if the session has ended since; ``Conflict`` when it is another event (a
    different kind, agent, content or data). Retry a keyed append that raised
    ``ConnectionLost`` with the same arguments: it is stored exactly once.

    Raises (and writes nothing) ``NotFound`` for a missing session or agent, and
    ``InvalidArgument`` for an unknown kind, a bad session id, an ended session, an
    ``agent_uuid`` that is not a running agent of that session, NUL characters, data that is
    not JSON, a mark whose ``data.label`` is not a string or null, a rewind whose
    ``data.target_message_id`` is not the id of a mark event of the same session, or a pop
    whose ``data.target_message_id`` is not the id of an event of the same session that is not
    a clear or a pop (a pop removes its target from the replayed context; ``replay.fold``).
    """
    check_id(session_id, "session_id")
    if agent_uuid is not None:
        check_uuid(agent_uuid)
    data_json = _check_event(kind, content, data)
    target = None
    if kind in TARGETED:
        target = target_id(data)
        if target is None:
            raise InvalidArgument(f"a {kind} needs an integer data.target_message_id")
        check_int(target, "data.target_message_id", minimum=1)
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=MAX_KEY_CHARS)
        return (
            yield from _append_keyed(session_id, agent_uuid, kind, content, data_json, target, key)
        )
    # One statement per case (queries/messages.sql, append_event says why): the general one
    # only for rewinds and pops; without a target, a statement free of checks that could not
    # apply.
    # The stored row comes back as a Message straight from binary tuple rows (message_rows),
    # like replay's reads: no dict row, no conversion (append's hot path).
    if target is not None:
        call = message_rows(
            "append_message",
            session_id=session_id,
            agent_uuid=agent_uuid,
            kind=kind,
            content=content,
            data=data_json,
            target_message_id=target,
        )
    elif agent_uuid is None:
        call = message_rows(
            "append_event", session_id=session_id, kind=kind, content=content, data=data_json
        )
    else:
        call = message_rows(
            "append_agent_event",
            session_id=session_id,
            agent_uuid=agent_uuid,
            kind=kind,
            content=content,
            data=data_json,
        )
    # A refused append raises in the statement (IK404, IK400: NotFound, InvalidArgument).
    stored: list[Message] = yield call
    return stored[0]


def _check_event(kind: str, content: str | None, data: Any) -> str | None:
    """Validate one event's kind, content and data; its data as JSON text."""
    if not is_valid_kind(kind):
        raise InvalidArgument(
            f"invalid event kind {kind!r}; valid kinds: {', '.join(sorted(VALID_KINDS))}"
        )
    check_content(content)
    data_json = dump_json(data)
    label = data.get("label") if kind == "mark" and isinstance(data, dict) else None
    if label is not None and not isinstance(label, str):
        raise InvalidArgument("a mark's data.label must be a string or null")
    return data_json


#: The longest idempotency key of an append (as mail's).
MAX_KEY_CHARS = 200


def _append_keyed(
    session_id: int,
    agent_uuid: str | None,
    kind: str,
    content: str | None,
    data_json: str | None,
    target: int | None,
    key: str,
) -> Op[Message]:
    """``append`` with an idempotency key (queries/messages.sql: append_keyed)."""
    row = yield one(
        "append_keyed",
        session_id=session_id,
        agent_uuid=agent_uuid,
        kind=kind,
        content=content,
        data=data_json,
        target_message_id=target,
        idempotency_key=key,
    )
    if not row["same"]:
        raise Conflict(
            f"idempotency key {key!r} of session {session_id} was used for a different event "
            f"(event {row['id']}, a {row['kind']})",
            constraint="messages_idempotency_key_idx",
            sqlstate=None,
        )
    return Message.from_row(row)


def append_many(
    session_id: int,
    events: Sequence[tuple[str, str | None, Any]],
    *,
    agent_uuid: str | None = None,
    idempotency_key: str | None = None,
) -> Op[list[Message]]:
    """Append ``events``, each ``(kind, content, data)``, in one statement; return them as
    stored, in order (consecutive among the session's events: the batch locks the session).

    Every event is checked as by ``append`` before anything is written, and either all are
    stored or none. Rewinds and pops (which aim at other events) go through ``append``:
    ``InvalidArgument`` here. An empty ``events`` returns ``[]`` without touching the database.

    With ``idempotency_key`` (1-200 characters; one key space per session, shared with
    ``append``'s) a retried batch stores nothing new: the key is stored on the batch's first
    event, and when the session already holds an event with that key, the session's events
    from that one, as many as ``events``, are returned and nothing is stored, even if the
    session has ended since; ``Conflict`` when they are not ``events`` (fewer, or another
    kind, agent, content or data). Retry a keyed batch that raised ``ConnectionLost`` with the
    same arguments: it is stored exactly once. (Batches have no stored end: a retry of a
    prefix of the batch gets that prefix back.)
    """
    check_id(session_id, "session_id")
    if agent_uuid is not None:
        check_uuid(agent_uuid)
    key = None
    if idempotency_key is not None:
        key = check_str(idempotency_key, "idempotency_key", max_chars=MAX_KEY_CHARS)
    if isinstance(events, (str, bytes)) or not isinstance(events, Sequence):
        raise InvalidArgument("events must be a sequence of (kind, content, data) tuples")
    kinds: list[str] = []
    contents: list[str | None] = []
    datas: list[str | None] = []
    for i, event in enumerate(events):
        if not isinstance(event, tuple) or len(event) != 3:
            raise InvalidArgument(f"events[{i}] must be a (kind, content, data) tuple")
        kind, content, data = event
        if kind in TARGETED:
            raise InvalidArgument(f"events[{i}] is a {kind}: append it with append()")
        datas.append(_check_event(kind, content, data))
        kinds.append(kind)
        contents.append(content)
    if not kinds:
        return []
    if key is not None:
        rows = yield many(
            "append_events_keyed",
            session_id=session_id,
            agent_uuid=agent_uuid,
            kinds=kinds,
            contents=contents,
            datas=datas,
            idempotency_key=key,
        )
        if not all(r["same"] for r in rows):
            raise Conflict(
                f"idempotency key {key!r} of session {session_id} was used for different "
                f"events (from event {rows[0]['id']}, a {rows[0]['kind']})",
                constraint="messages_idempotency_key_idx",
                sqlstate=None,
            )
        return [Message.from_row(r) for r in rows]
    if agent_uuid is None:
        call = message_rows(
            "append_events", session_id=session_id, kinds=kinds, contents=contents, datas=datas
        )
    else:
        call = message_rows(
            "append_agent_events",
            session_id=session_id,
            agent_uuid=agent_uuid,
            kinds=kinds,
            contents=contents,
            datas=datas,
        )
    # A refused batch raises in the statement (IK404, IK400: NotFound, InvalidArgument).
    stored: list[Message] = yield call
    return stored


def messages(session_id: int) -> Op[list[Message]]:
    """Every event of a session (the full audit trail), in id order."""
    check_id(session_id, "session_id")
    found = yield message_rows("session_messages", session_id=session_id)
    if found is None:
        yield from require_session(session_id)
    return found or []


def count_messages(session_id: int) -> Op[int]:
    """How many events the session has (its whole history)."""
    check_id(session_id, "session_id")
    row = yield one("count_session_messages", session_id=session_id)
    count = int(row["count"])
    if count == 0:
        yield from require_session(session_id)
    return count


def replay_session(session_id: int) -> Op[ReplayContext]:
    """Rebuild the session's current context, honouring clear, mark and rewind.

    Reads only the events after the session's newest clear (one index probe finds it).
    """
    check_id(session_id, "session_id")
    found = yield message_rows("session_live_events", session_id=session_id)
    if found is None:
        yield from require_session(session_id)
    return fold(found or [])


def replay_tail(session_id: int, *, limit: int | None = None) -> Op[list[Message]]:
    """The newest ``limit`` events of the session's replayed context (all when None), in
    order: ``replay_session(session_id).messages[-limit:]``, read in one statement whose cost
    does not grow with the session's history (it folds only marks, rewinds and pops)."""
    check_id(session_id, "session_id")
    if limit is not None:
        check_limit(limit)
    found = yield message_rows("session_replay_tail", session_id=session_id, lim=limit)
    if found is None:
        yield from require_session(session_id)
    return found or []


@atomic
def pop_session(session_id: int) -> Op[Message | None]:
    """Remove the newest event from the session's replayed context and return it (None, and
    nothing written, when the context is empty).

    History keeps it: a ``pop`` event aimed at it (``data.target_message_id``) is appended,
    which replay honours. The session's row is locked until the pop is stored, so concurrent
    pops (and appends) take turns: each pop removes a different event. ``NotFound`` for a
    missing session; ``InvalidArgument`` for an ended one whose context is not empty.
    """
    check_id(session_id, "session_id")
    session = yield one("lock_session", session_id=session_id)
    if session is None:
        raise NotFound(f"session {session_id} does not exist")
    newest: list[Message] | None = yield message_rows(
        "session_replay_tail", session_id=session_id, lim=1
    )
    if not newest:
        return None
    target = newest[-1]
    yield from append(session_id, "pop", None, {"target_message_id": target.id})
    return target


class EventOps(Area[FaceT]):
    """The events operations of a store (``Store``, ``AsyncStore``)."""

    append = operation(append)
    append_many = operation(append_many)
    messages = operation(messages)
    count_messages = operation(count_messages)
    replay_session = operation(replay_session)
    replay_tail = operation(replay_tail)
    pop_session = operation(pop_session)
