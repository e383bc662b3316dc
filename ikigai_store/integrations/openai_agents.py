"""OpenAI Agents SDK sessions on the store: ``IkigaiStoreSession``.

Owns the mapping between the SDK's ``Session`` protocol (``agents.memory.session``) and the
store's event stream (``pip install 'ikigai_store[openai-agents]'``; the SDK is imported only
when a session is made). Invariants:

- the SDK's items are events of one of our sessions (or of one agent of it): each item is
  stored whole as an event's ``data`` (its JSON, unchanged), with a kind from the item
  (``user``, ``assistant``, ``system``, ``tool_call``, ``tool_result``) and its text as
  ``content`` (so ``store.search`` finds it);
- ``add_items`` is one statement however many items (``append_many``: all or none);
- ``get_items(limit)`` returns the newest ``limit`` items of the *replayed* context, in order,
  in one round trip whose cost does not grow with history (``replay_tail``); for an agent,
  ``replay_agent``'s context (one statement, the whole lineage);
- ``pop_item`` appends a ``pop`` event aimed at the newest *item* of the context, holding the
  session's row lock until it is stored (as ``pop_session``/``pop`` do: concurrent pops remove
  different items): replay no longer shows it, history keeps it, and the events other writers
  put on top of it (a mark, a usage record) stay in the context; it returns None and writes
  nothing when the context holds no item;
- ``clear_session`` appends a ``clear``: the context starts empty again, history stays;
- the SDK's string ``session_id`` names one of our sessions through ``session_for_key`` under the
  namespace ``"openai-agents"`` (``IkigaiStoreSession.open``), or the caller gives the session
  id or agent uuid itself (the constructor, ``for_agent``).

Events of the context the SDK did not write (``store.append`` from elsewhere) are read as items
when their data is an item (a JSON object with ``type`` or ``role``), as messages when they are
``user``, ``assistant`` or ``system`` text, and are skipped otherwise (a mark, a usage record):
``limit`` counts the context's events, so such a session may return fewer items.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from ..agents import replay_agent, require_agent
from ..errors import NotFound
from ..events import append, replay_session
from ..models import Message
from ..ops import Op, atomic, one

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session import Session
    from agents.memory.session_settings import SessionSettings

    from ..aio import AsyncStore

__all__ = ["NAMESPACE", "IkigaiStoreSession", "item_event"]

#: The ``session_for_key`` namespace of the SDK's session ids.
NAMESPACE = "openai-agents"

_ROLE_KINDS = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_KINDS = {"user": "user", "assistant": "assistant", "system": "system"}


def item_event(item: Mapping[str, Any]) -> tuple[str, str | None, Any]:
    """The ``(kind, content, data)`` event that stores an SDK item: ``data`` is the item."""
    if not isinstance(item, Mapping):
        raise TypeError(f"an item must be a JSON object, got {type(item).__name__}")
    role, kind_of_item = item.get("role"), item.get("type")
    if isinstance(role, str) and role in _ROLE_KINDS and kind_of_item in (None, "message"):
        kind = _ROLE_KINDS[role]
    elif isinstance(kind_of_item, str) and kind_of_item.endswith("_output"):
        kind = "tool_result"
    elif isinstance(kind_of_item, str) and kind_of_item.endswith("_call"):
        kind = "tool_call"
    else:  # reasoning, compaction, anything new the SDK adds: the model's own output
        kind = "assistant"
    return kind, _text(item), dict(item)


def _text(item: Mapping[str, Any]) -> str | None:
    """The searchable text of an item: its content (or output, arguments), parts joined."""
    for field in ("content", "output", "arguments"):
        value = item.get(field)
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            parts = [p.get("text") for p in value if isinstance(p, Mapping)]
            texts = [p for p in parts if isinstance(p, str)]
            if texts:
                return "\n".join(texts)
    return None


def _item(message: Message) -> TResponseInputItem | None:
    """The SDK item an event of the context stands for, or None (not a conversation item)."""
    data = message.data
    if isinstance(data, dict) and ("type" in data or "role" in data):
        return cast("TResponseInputItem", data)
    if message.kind in _TEXT_KINDS and message.content is not None:
        return cast("TResponseInputItem", {"role": message.kind, "content": message.content})
    return None


@atomic
def _pop_item(session_id: int, agent_uuid: str | None) -> Op[TResponseInputItem | None]:
    """``pop_item``'s operation: under the session's row lock, a ``pop`` aimed at the newest
    event of the (session's or agent's) context that is an item; None, nothing written, when
    there is none."""
    if agent_uuid is not None:
        session_id = (yield from require_agent(agent_uuid)).session_id
    if (yield one("lock_session", session_id=session_id)) is None:
        raise NotFound(f"session {session_id} does not exist")
    if agent_uuid is None:
        context = (yield from replay_session(session_id)).messages
    else:
        context = (yield from replay_agent(agent_uuid)).messages
    for event in reversed(context):
        item = _item(event)
        if item is not None:
            target = {"target_message_id": event.id}
            yield from append(session_id, "pop", None, target, agent_uuid=agent_uuid)
            return item
    return None


class IkigaiStoreSession:
    """An OpenAI Agents SDK session (the ``agents.memory.Session`` protocol) whose items are
    the events of one of our sessions, or of one agent.

    ``IkigaiStoreSession(sdk_session_id, store, ikigai_session_id=...)`` uses a session the
    caller chose; ``await IkigaiStoreSession.open(sdk_session_id, store)`` finds or starts the
    session that name stands for; ``await IkigaiStoreSession.for_agent(store, agent_uuid)``
    keeps the items as one agent's events (replayed with its lineage). ``store`` is an
    ``AsyncStore`` used by this session only through its operations; closing it is the
    caller's business.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: AsyncStore,
        *,
        ikigai_session_id: int,
        agent_uuid: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        self.session_id = session_id
        self.store = store
        #: Our session's id, and the agent whose events the items are (None: the session's).
        self.ikigai_session_id = ikigai_session_id
        self.agent_uuid = agent_uuid
        if session_settings is None or not isinstance(session_settings, Mapping):
            self.session_settings = session_settings
        else:
            from agents.memory.session_settings import coerce_session_settings

            self.session_settings = coerce_session_settings(dict(session_settings))

    @classmethod
    async def open(
        cls,
        session_id: str,
        store: AsyncStore,
        *,
        title: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> IkigaiStoreSession:
        """The session the SDK's ``session_id`` names (``session_for_key`` under
        ``NAMESPACE``), started with ``title`` (default: the session id) on first use."""
        sid = await store.session_for_key(
            NAMESPACE, session_id, title=session_id if title is None else title
        )
        return cls(session_id, store, ikigai_session_id=sid, session_settings=session_settings)

    @classmethod
    async def for_agent(
        cls,
        store: AsyncStore,
        agent_uuid: str,
        *,
        session_id: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> IkigaiStoreSession:
        """A session whose items are the events of the agent ``agent_uuid`` (its replayed
        context includes what it inherited from its parents); ``session_id`` defaults to the
        agent's uuid."""
        agent = await store.get_agent(agent_uuid)
        return cls(
            agent_uuid if session_id is None else session_id,
            store,
            ikigai_session_id=agent.session_id,
            agent_uuid=agent_uuid,
            session_settings=session_settings,
        )

    def __repr__(self) -> str:
        owner = f"agent {self.agent_uuid}" if self.agent_uuid else "no agent"
        return f"IkigaiStoreSession({self.session_id!r}, session {self.ikigai_session_id}, {owner})"

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The newest ``limit`` items of the replayed context in order (``limit`` None: the
        session settings' limit, else every item; 0: none; negative: every item, as the SDK's
        SQLite session does)."""
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and limit <= 0:
            if limit == 0:
                return []
            limit = None
        if self.agent_uuid is None:
            events = await self.store.replay_tail(self.ikigai_session_id, limit=limit)
        else:
            events = (await self.store.replay_agent(self.agent_uuid)).messages
            events = events if limit is None else events[-limit:]
        return [item for item in map(_item, events) if item is not None]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items to the context, in one statement (all or none)."""
        events = [item_event(cast("Mapping[str, Any]", item)) for item in items]
        if events:
            await self.store.append_many(self.ikigai_session_id, events, agent_uuid=self.agent_uuid)

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item from the context and return it (None, nothing written, when
        the context holds no item).

        A ``pop`` event aimed at it is appended (history keeps the item). Events of the context
        that are not items, even newer ones (a mark, another writer's record), stay."""
        return await self.store._run(_pop_item(self.ikigai_session_id, self.agent_uuid))

    async def clear_session(self) -> None:
        """Empty the context: a ``clear`` event (history is kept, as everywhere in the store)."""
        if self.agent_uuid is None:
            await self.store.append(self.ikigai_session_id, "clear")
        else:
            await self.store.clear(self.agent_uuid)


if TYPE_CHECKING:

    def _implements_the_protocol(session: IkigaiStoreSession) -> Session:
        """mypy checks here that ``IkigaiStoreSession`` is an SDK ``Session``."""
        return session
