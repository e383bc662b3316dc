"""Sessions: conversations that persist across launches (seed Model B).

Owns the session operations shared by both faces (see ``ops``). Invariants: a session is active
until ``end_session`` sets ``ended_at`` (ending it again keeps the first time); "the active
session" is the most recently started one that has not ended, ties broken by id; a
(namespace, key) of ``session_for_key`` names one session forever (migration 0021), even when
its first uses race.
"""

from __future__ import annotations

from .errors import Conflict, InvalidArgument, NotFound
from .models import Session
from .ops import Area, FaceT, Op, many, one, operation
from .validate import check_id, check_limit, check_text

__all__ = [
    "create_session",
    "end_session",
    "get_active_session",
    "get_session",
    "list_sessions",
    "require_session",
    "session_for_key",
    "set_session_title",
]


def create_session(title: str | None = None) -> Op[int]:
    """Start a session and return its id; it stays active until ``end_session``."""
    check_text(title, "title")
    row = yield one("create_session", title=title)
    return int(row["id"])


def get_active_session() -> Op[int | None]:
    """The most recently started session that has not ended, or None. A session a runtime
    owns is never the active one: a LangGraph thread, a Claude Agent SDK transcript, or a
    session named by a key (``session_for_key``, the OpenAI Agents SDK's sessions). Those are
    never ended and are found by their key; another writer appending to "the active session"
    must not land in an agent's context."""
    row = yield one("get_active_session")
    return None if row is None else int(row["id"])


def end_session(session_id: int) -> Op[None]:
    """End a session (``ended_at = NOW()``; ending it again keeps the first time)."""
    check_id(session_id, "session_id")
    row = yield one("end_session", session_id=session_id)
    if row is None:
        raise NotFound(f"session {session_id} does not exist")


def get_session(session_id: int) -> Op[Session]:
    """One session; ``NotFound`` if it does not exist."""
    check_id(session_id, "session_id")
    row = yield one("get_session", session_id=session_id)
    if row is None:
        raise NotFound(f"session {session_id} does not exist")
    return Session.from_row(row)


def list_sessions(*, limit: int = 50) -> Op[list[Session]]:
    """Up to ``limit`` sessions, newest first."""
    check_limit(limit)
    rows = yield many("list_sessions", limit=limit)
    return [Session.from_row(r) for r in rows]


def set_session_title(session_id: int, title: str | None) -> Op[None]:
    """Set (or clear, with None) a session's title."""
    check_id(session_id, "session_id")
    check_text(title, "title")
    row = yield one("set_session_title", session_id=session_id, title=title)
    if row is None:
        raise NotFound(f"session {session_id} does not exist")


def session_for_key(namespace: str, key: str, *, title: str | None = None) -> Op[int]:
    """The id of the session ``key`` names in ``namespace`` (a framework's own name for a
    conversation: the OpenAI Agents SDK's ``session_id`` under ``"openai-agents"``), started
    (with ``title``) on first use. Concurrent first uses get the same session."""
    for name, value in (("namespace", namespace), ("key", key)):
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"{name} must be a non-empty string")
        check_text(value, name)
    check_text(title, "title")
    for attempt in range(2):
        try:
            row = yield one("session_for_key", namespace=namespace, key=key, title=title)
        except Conflict:  # another first use named it meanwhile: it is there now
            if attempt:
                raise
            continue
        return int(row["session_id"])
    raise AssertionError("unreachable")  # pragma: no cover


def require_session(session_id: int) -> Op[None]:
    """``NotFound`` unless the session exists (asked only on rare paths)."""
    row = yield one("session_exists", session_id=session_id)
    if not row["exists"]:
        raise NotFound(f"session {session_id} does not exist")


class SessionOps(Area[FaceT]):
    """The sessions operations of a store (``Store``, ``AsyncStore``)."""

    create_session = operation(create_session)
    get_active_session = operation(get_active_session)
    end_session = operation(end_session)
    get_session = operation(get_session)
    list_sessions = operation(list_sessions)
    set_session_title = operation(set_session_title)
    session_for_key = operation(session_for_key)
