"""Claude Agent SDK session transcripts on the store: ``IkigaiSessionStore``.

Owns the mapping between the SDK's ``SessionStore`` protocol (``claude_agent_sdk``; ``pip
install 'ikigai_store[claude-agent]'``, imported only by this module) and the transcript
operations of ``ikigai_store.transcripts``. Invariants:

- a transcript (the SDK's ``SessionKey``: project_key, session_id and an optional subpath for
  a subagent) is one of our sessions, its entries that session's events (``data`` the entry
  unchanged, a kind and a text from ``transcripts.entry_event``), so ``store.search`` finds
  them and ``store.replay_session`` replays them like any session;
- every method of the protocol is implemented: ``append`` (one transaction; an entry with a
  ``uuid`` is stored once however often the SDK retries it; the main transcript's summary is
  folded with the SDK's ``fold_session_summary`` in the same transaction), ``load``,
  ``list_sessions``, ``list_session_summaries``, ``delete`` (a main key deletes its subkeys)
  and ``list_subkeys``;
- ``namespace`` separates stores sharing a database (tenants, test runs): two stores with
  different namespaces never see each other's transcripts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from claude_agent_sdk import SessionStore, fold_session_summary
from claude_agent_sdk.types import (
    SessionKey,
    SessionListSubkeysKey,
    SessionStoreEntry,
    SessionStoreListEntry,
    SessionSummaryEntry,
)

from .. import transcripts
from ..errors import InvalidArgument

if TYPE_CHECKING:
    from ..aio import AsyncStore

__all__ = ["NAMESPACE", "IkigaiSessionStore"]

#: The default namespace of the transcripts a store keeps.
NAMESPACE = "claude-agent"


def _parts(key: SessionKey) -> tuple[str, str, str | None]:
    if not isinstance(key, dict):
        raise InvalidArgument("a session key must be a dict with project_key and session_id")
    return key.get("project_key"), key.get("session_id"), key.get("subpath")


class IkigaiSessionStore(SessionStore):
    """A Claude Agent SDK ``SessionStore`` whose transcripts are sessions of an ``AsyncStore``.

    ``IkigaiSessionStore(store)`` uses a store the caller opened (and closes);
    ``async with IkigaiSessionStore.open(url) as session_store:`` opens and closes its own.
    Pass it as ``ClaudeAgentOptions(session_store=...)``.
    """

    def __init__(self, store: AsyncStore, *, namespace: str = NAMESPACE) -> None:
        if not isinstance(namespace, str) or not namespace:
            raise InvalidArgument("namespace must be a non-empty string")
        self.store = store
        self.namespace = namespace

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        url: str | None = None,
        *,
        namespace: str = NAMESPACE,
        migrate: bool = True,
        pool_size: int = 4,
    ) -> AsyncIterator[IkigaiSessionStore]:
        """A session store on a store opened on ``url`` (``ik.open_async``'s resolution;
        ``migrate`` and ``pool_size`` are its: a deployed service passes ``migrate=False``),
        closed on exit."""
        from ..aio import open_async

        async with open_async(url, migrate=migrate, pool_size=pool_size) as store:
            yield cls(store, namespace=namespace)

    def __repr__(self) -> str:
        return f"IkigaiSessionStore({self.store!r}, namespace={self.namespace!r})"

    async def append(self, key: SessionKey, entries: list[SessionStoreEntry]) -> None:
        """Mirror a batch of entries (in order; an entry's ``uuid`` is stored once)."""
        project_key, session_id, subpath = _parts(key)

        def summarize(previous: dict[str, Any] | None, batch: list[dict[str, Any]]) -> Any:
            return fold_session_summary(
                cast(SessionSummaryEntry | None, previous),
                key,
                cast(list[SessionStoreEntry], batch),
            )

        await self.store._run(
            transcripts.append_entries(
                self.namespace,
                project_key,
                session_id,
                subpath,
                cast(list[dict[str, Any]], entries),
                summarize=summarize,
            )
        )

    async def load(self, key: SessionKey) -> list[SessionStoreEntry] | None:
        """The transcript's entries in order, or None when it was never written."""
        project_key, session_id, subpath = _parts(key)
        entries = await self.store._run(
            transcripts.load_entries(self.namespace, project_key, session_id, subpath)
        )
        return cast(list[SessionStoreEntry] | None, entries)

    async def list_sessions(self, project_key: str) -> list[SessionStoreListEntry]:
        """The project's main transcripts with their modification times (epoch ms)."""
        listed = await self.store._run(transcripts.list_transcripts(self.namespace, project_key))
        return [{"session_id": sid, "mtime": mtime} for sid, mtime, _ in listed]

    async def list_session_summaries(self, project_key: str) -> list[SessionSummaryEntry]:
        """The summaries ``append`` keeps, one per main transcript of the project."""
        listed = await self.store._run(transcripts.list_transcripts(self.namespace, project_key))
        return [
            {"session_id": sid, "mtime": mtime, "data": data}
            for sid, mtime, data in listed
            if data is not None
        ]

    async def delete(self, key: SessionKey) -> None:
        """Delete a transcript and its events (a main key: its subkeys too)."""
        project_key, session_id, subpath = _parts(key)
        await self.store._run(
            transcripts.delete_transcripts(self.namespace, project_key, session_id, subpath)
        )

    async def list_subkeys(self, key: SessionListSubkeysKey) -> list[str]:
        """The subpaths (subagent transcripts) stored under a session."""
        project_key, session_id, _ = _parts(cast(SessionKey, key))
        return await self.store._run(
            transcripts.list_subpaths(self.namespace, project_key, session_id)
        )
