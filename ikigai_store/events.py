"""The append-only event stream of a session, and session replay.

Owns appending events and reading them back, for both faces (see ``ops``). Invariants:
- events are ordered by ``id`` only; ``messages`` rows are never updated or deleted here;
- an append is one statement that inserts only into a session that exists and has not ended,
  for no agent or a running agent of that session, and for a rewind only if its target is a
  mark of the same session: the checks cannot race the insert (the rows are locked FOR SHARE),
  so no event ever lands in an ended session or on a dead agent;
- bad input raises ``InvalidArgument`` before anything is written; why a write was refused is
  worked out only on that rare path;
- replay reads only the events after the session's newest clear and folds them (``replay.fold``).
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgument, NotFound
from .models import VALID_KINDS, Message, ReplayContext, is_valid_kind
from .ops import Area, FaceT, Op, message_rows, one, operation
from .replay import fold, rewind_target
from .sessions import require_session
from .validate import check_content, check_id, check_int, check_uuid, dump_json

__all__ = ["append", "count_messages", "messages", "replay_session"]


def append(
    session_id: int,
    kind: str,
    content: str | None = None,
    data: Any = None,
    *,
    agent_uuid: str | None = None,
) -> Op[Message]:
    """Append one event to a session (and to one of its agents) and return it as stored.

    Raises (and writes nothing) ``NotFound`` for a missing session or agent, and
    ``InvalidArgument`` for an unknown kind, a bad session id, an ended session, an
    ``agent_uuid`` that is not a running agent of that session, NUL characters, data that is
    not JSON, a mark whose ``data.label`` is not a string or null, or a rewind whose
    ``data.target_message_id`` is not the id of a mark event of the same session.
    """
    check_id(session_id, "session_id")
    if not is_valid_kind(kind):
        raise InvalidArgument(
            f"invalid event kind {kind!r}; valid kinds: {', '.join(sorted(VALID_KINDS))}"
        )
    if agent_uuid is not None:
        check_uuid(agent_uuid)
    check_content(content)
    data_json = dump_json(data)
    label = data.get("label") if kind == "mark" and isinstance(data, dict) else None
    if label is not None and not isinstance(label, str):
        raise InvalidArgument("a mark's data.label must be a string or null")
    target = None
    if kind == "rewind":
        target = rewind_target(data)
        if target is None:
            raise InvalidArgument("a rewind needs an integer data.target_message_id")
        check_int(target, "data.target_message_id", minimum=1)
    # One statement per case (queries/messages.sql, append_event says why): the general one
    # only for rewinds; without a target, a statement free of checks that could not apply.
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
    stored: list[Message] | None = yield call
    if not stored:
        raise (yield from _why_refused(session_id, agent_uuid, target))
    return stored[0]


def _why_refused(
    session_id: int, agent_uuid: str | None, target: int | None
) -> Op[InvalidArgument | NotFound]:
    """Why an append wrote nothing (only computed on that rare path)."""
    session = yield one("session_exists", session_id=session_id)
    if not session["exists"]:
        return NotFound(f"session {session_id} does not exist")
    if session["ended"]:
        return InvalidArgument(f"session {session_id} has ended: it accepts no more events")
    if agent_uuid is not None:
        agent = yield one("get_agent", uuid=agent_uuid)
        if agent is None:
            return NotFound(f"agent {agent_uuid} does not exist")
        if int(agent["session_id"]) != session_id:
            return InvalidArgument(f"agent {agent_uuid} is not an agent of session {session_id}")
        if agent["status"] != "running":
            return InvalidArgument(
                f"agent {agent_uuid} is {agent['status']}: it accepts no more events "
                "(append agent_killed before kill_agent)"
            )
    return InvalidArgument(f"rewind target {target} is not a mark event of session {session_id}")


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


class EventOps(Area[FaceT]):
    """The events operations of a store (``Store``, ``AsyncStore``)."""

    append = operation(append)
    messages = operation(messages)
    count_messages = operation(count_messages)
    replay_session = operation(replay_session)
