"""LangGraph checkpoint savers on the store: ``IkigaiSaver`` (sync) and ``AsyncIkigaiSaver``.

Owns the mapping between LangGraph's ``BaseCheckpointSaver`` and the checkpoint operations of
``ikigai_store.checkpoints`` (``pip install 'ikigai_store[langgraph]'``; LangGraph is imported
only by this module). A thread is one of our sessions; see ``checkpoints`` for the data model.
Invariants:

- both savers run the very same operations (this module's ``_Core`` builds them once; the sync
  saver runs them on a ``Store``, the async one on an ``AsyncStore``), and every capability of
  LangGraph's conformance suite is implemented: put, put_writes, get_tuple, list,
  delete_thread, delete_for_runs, copy_thread (one row and the special writes, no checkpoint
  copied) and prune;
- values are serialised with the saver's ``serde`` (LangGraph's ``JsonPlusSerializer`` by
  default); strings, numbers, booleans and None stay inline in the checkpoint's JSON, as in
  LangGraph's Postgres saver, and every other channel value is a blob;
- a step writes only what changed: a channel LangGraph did not bump is not written, and a list
  channel (``messages``) whose new value extends a value the saver already holds is stored as
  the appended items only (an append on that version). Reads rebuild it from the chain of
  appends, in the same round trip; after ``max_appends`` appends in a row (default 64) the
  value is stored whole again, so a cold read folds at most that many;
- the saver keeps the newest value of each channel it wrote or read (``cache_size`` entries,
  least recently used dropped) so that it neither reads nor rebuilds it again: a value
  comes back from the cache as a shallow copy (lists, dicts and sets; their items are shared,
  so mutate a channel's items only through new values, as LangGraph's reducers do); a cache
  entry is keyed by the thread's session, which a deleted and re-made thread does not share;
- ``get_tuple`` is one round trip at any depth of copies (two when another process re-made the
  thread meanwhile); ``list`` is one for the checkpoints and one per namespace for their
  values.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from .. import checkpoints as cp
from ..errors import InvalidArgument
from ..ops import Op, Run

if TYPE_CHECKING:
    from ..aio import AsyncStore
    from ..store import Store

__all__ = ["AsyncIkigaiSaver", "IkigaiSaver"]

T = TypeVar("T")

#: What the cache holds for a channel: (version, value, how many appends its stored form is).
Held = tuple[str, Any, int]

_PRIMITIVES = (str, int, float, bool)
_MISSING = object()


def _thread_of(config: RunnableConfig) -> tuple[str, str]:
    configurable = config.get("configurable") or {}
    thread_id = configurable.get("thread_id")
    if not isinstance(thread_id, str) or not thread_id:
        raise InvalidArgument("config['configurable']['thread_id'] must be a non-empty string")
    ns = configurable.get("checkpoint_ns") or ""
    if not isinstance(ns, str):
        raise InvalidArgument("config['configurable']['checkpoint_ns'] must be a string")
    return thread_id, ns


def _older(base: str, version: str) -> bool:
    """True when ``base`` is a version of a lower step than ``version`` (both as made by
    ``get_next_version``), so an append on it keeps ``base < version`` byte by byte."""
    try:
        return int(base.split(".")[0]) < int(version.split(".")[0]) and base < version
    except ValueError:
        return False


def _shallow(value: Any) -> Any:
    if isinstance(value, (list, dict, set)):
        return value.copy()
    return value


class _Core(BaseCheckpointSaver[str]):
    """What both savers share: the operations each method runs, the serialisation, the cache."""

    def __init__(
        self,
        *,
        serde: SerializerProtocol | None = None,
        cache_size: int = 1024,
        max_appends: int = 64,
    ) -> None:
        super().__init__(serde=serde)
        for name, value in (("cache_size", cache_size), ("max_appends", max_appends)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidArgument(f"{name} must be a non-negative integer")
        self.cache_size = cache_size
        self.max_appends = max_appends
        self._lock = threading.Lock()
        # (session id, ns, channel) -> (version, value, appends): the newest value held per
        # channel, and how many appends its stored form is (0: a whole blob).
        self._values: OrderedDict[tuple[int, str, str], Held] = OrderedDict()
        # thread id -> the session it was last seen in.
        self._sessions: dict[str, int] = {}

    # ------------------------------------------------------------ cache

    def _held(self, sid: int | None, ns: str, channel: str) -> Held | None:
        if sid is None:
            return None
        with self._lock:
            found = self._values.get((sid, ns, channel))
            if found is not None:
                self._values.move_to_end((sid, ns, channel))
            return found

    def _hold(
        self, sid: int, ns: str, channel: str, version: str, value: Any, appends: int
    ) -> None:
        if not self.cache_size:
            return
        with self._lock:
            key = (sid, ns, channel)
            current = self._values.get(key)
            if current is not None and current[0] > version:
                return  # an older version read later (a past checkpoint): keep the newer
            self._values[key] = (version, _shallow(value), appends)
            self._values.move_to_end(key)
            while len(self._values) > self.cache_size:
                self._values.popitem(last=False)

    # ------------------------------------------------------------ serialisation

    def _blob(
        self, sid: int | None, ns: str, channel: str, version: Any, value: Any
    ) -> tuple[cp.Blob, int]:
        """The blob storing ``value`` and how many appends it ends: an append when the value
        extends the one held for the channel at an older version (and that one ends fewer
        than ``max_appends`` appends, so a cold read folds at most that many), else whole."""
        held = self._held(sid, ns, channel) if isinstance(version, str) else None
        if (
            held is not None
            and held[2] < self.max_appends
            and isinstance(value, list)
            and isinstance(held[1], list)
            and _older(held[0], cast(str, version))
            and len(value) >= len(held[1])
            and value[: len(held[1])] == held[1]  # element by element, identity first
        ):
            type_, data = self.serde.dumps_typed(value[len(held[1]) :])
            return cp.Blob(channel, version, type_, data, held[0]), held[2] + 1
        type_, data = self.serde.dumps_typed(value)
        return cp.Blob(channel, str(version), type_, data), 0

    def _rebuild(
        self,
        channel: str,
        version: str,
        rows: dict[tuple[str, str], cp.Blob],
        held: dict[str, Held],
    ) -> tuple[Any, int]:
        """The channel's value at ``version`` from the blob rows and the values ``held`` (those
        the read was told of), or _MISSING; and how many appends its stored form is."""
        appended: list[Any] = []
        current = version
        depth = 0
        while True:
            found = held.get(channel)
            if found is not None and found[0] == current:
                base, depth = found[1], found[2]
                break
            row = rows.get((channel, current))
            if row is None or row.type == "empty":
                return _MISSING, 0
            value = self.serde.loads_typed((row.type, cast(bytes, row.blob)))
            if row.base_version is None:
                base = value
                break
            appended.append(value)
            current = row.base_version
        if not appended:
            return _shallow(base), depth
        rebuilt = list(base)
        for items in reversed(appended):
            rebuilt.extend(items)
        return rebuilt, depth + len(appended)

    def _values_of(
        self,
        stored: cp.StoredCheckpoint,
        rows: dict[tuple[str, str], cp.Blob],
        held: dict[str, Held],
    ) -> dict[str, Any]:
        values = dict(stored.checkpoint.get("channel_values") or {})
        for channel, version in (stored.checkpoint.get("channel_versions") or {}).items():
            if channel in values:
                continue
            value, appends = self._rebuild(channel, str(version), rows, held)
            if value is not _MISSING:
                values[channel] = value
                self._hold(
                    stored.session_id, stored.checkpoint_ns, channel, str(version), value, appends
                )
        return values

    def _tuple(
        self,
        stored: cp.StoredCheckpoint,
        rows: dict[tuple[str, str], cp.Blob],
        held: dict[str, Held] | None = None,
    ) -> CheckpointTuple:
        checkpoint = cast(Checkpoint, dict(stored.checkpoint))
        checkpoint["channel_values"] = self._values_of(stored, rows, held or {})
        config: RunnableConfig = {
            "configurable": {
                "thread_id": stored.thread_id,
                "checkpoint_ns": stored.checkpoint_ns,
                "checkpoint_id": stored.checkpoint_id,
            }
        }
        parent: RunnableConfig | None = None
        if stored.parent_checkpoint_id is not None:
            parent = {
                "configurable": {
                    "thread_id": stored.thread_id,
                    "checkpoint_ns": stored.checkpoint_ns,
                    "checkpoint_id": stored.parent_checkpoint_id,
                }
            }
        writes = sorted(stored.writes, key=lambda w: writes_sort_key(w.task_path, w.task_id, w.idx))
        pending = [
            (w.task_id, w.channel, self.serde.loads_typed((cast(str, w.type), cast(bytes, w.blob))))
            for w in writes
        ]
        return CheckpointTuple(
            config,
            checkpoint,
            cast(CheckpointMetadata, stored.metadata),
            parent,
            pending,
        )

    # ------------------------------------------------------------ the operations

    def _get_op(self, config: RunnableConfig) -> Op[CheckpointTuple | None]:
        thread_id, ns = _thread_of(config)
        checkpoint_id = get_checkpoint_id(config)
        assumed = self._sessions.get(thread_id)
        with self._lock:  # what the cache holds now is what the read is told of
            held = {
                key[2]: value
                for key, value in self._values.items()
                if key[0] == assumed and key[1] == ns
            }
        known = [(channel, value[0]) for channel, value in held.items()]
        stored: cp.StoredCheckpoint | None = yield from cp.get_checkpoint(
            thread_id, ns, checkpoint_id, known=known
        )
        if stored is None:
            return None
        if stored.session_id != assumed:
            self._sessions[thread_id] = stored.session_id
            if known:  # another session than the one the cache was for: read it whole
                held = {}
                stored = yield from cp.get_checkpoint(thread_id, ns, stored.checkpoint_id)
                if stored is None:
                    return None
        rows = {(b.channel, b.version): b for b in stored.blobs}
        return self._tuple(stored, rows, held)

    def _list_op(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Op[list[CheckpointTuple]]:
        thread_id: str | None = None
        ns: str | None = None
        if config is not None:
            configurable = config.get("configurable") or {}
            thread_id = configurable.get("thread_id")
            ns = configurable.get("checkpoint_ns")
            checkpoint_id = get_checkpoint_id(config)
            if checkpoint_id is not None:
                before_id = get_checkpoint_id(before) if before else None
                # a checkpoint id in config narrows the listing to that checkpoint
                found = yield from self._get_op(config)
                if found is None or (before_id is not None and checkpoint_id >= before_id):
                    return []
                if filter and any(found.metadata.get(k) != v for k, v in filter.items()):
                    return []
                return [found]
        before_id = get_checkpoint_id(before) if before else None
        listed: list[cp.StoredCheckpoint] = yield from cp.list_checkpoints(
            thread_id, ns, metadata_filter=filter, before=before_id, limit=limit
        )
        rows: dict[tuple[int, str], dict[tuple[str, str], cp.Blob]] = {}
        groups: dict[tuple[int, str], set[tuple[str, str]]] = {}
        for stored in listed:
            values = stored.checkpoint.get("channel_values") or {}
            wanted = groups.setdefault((stored.session_id, stored.checkpoint_ns), set())
            for channel, version in (stored.checkpoint.get("channel_versions") or {}).items():
                if channel not in values:
                    wanted.add((channel, str(version)))
        for (sid, group_ns), wanted in groups.items():
            blobs: list[cp.Blob] = yield from cp.blobs_for(sid, group_ns, sorted(wanted))
            rows[(sid, group_ns)] = {(b.channel, b.version): b for b in blobs}
        return [self._tuple(s, rows.get((s.session_id, s.checkpoint_ns), {})) for s in listed]

    def _put_op(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> Op[RunnableConfig]:
        thread_id, ns = _thread_of(config)
        parent_id = get_checkpoint_id(config)
        body: dict[str, Any] = dict(checkpoint)
        values = checkpoint.get("channel_values") or {}
        inline = {k: v for k, v in values.items() if v is None or isinstance(v, _PRIMITIVES)}
        body["channel_values"] = inline
        blob_values = {k: v for k, v in values.items() if k not in inline}
        sid = self._sessions.get(thread_id)
        made = [
            self._blob(sid, ns, channel, version, blob_values[channel])
            for channel, version in new_versions.items()
            if channel in blob_values
        ]
        blobs = [blob for blob, _ in made]
        appends = {blob.channel: depth for blob, depth in made}
        meta = get_serializable_checkpoint_metadata(config, metadata)
        session_id, missing = yield from cp.put_checkpoint(
            thread_id, ns, checkpoint["id"], parent_id, body, meta, blobs
        )
        if missing:  # an append whose base is not in this thread: store those whole
            whole = [
                self._blob(None, ns, b.channel, b.version, blob_values[b.channel])[0]
                for b in blobs
                if b.channel in missing
            ]
            appends.update(dict.fromkeys(missing, 0))
            yield from cp.put_checkpoint(
                thread_id, ns, checkpoint["id"], parent_id, body, meta, whole
            )
        self._sessions[thread_id] = session_id
        for channel, version in new_versions.items():
            if channel in blob_values:
                self._hold(
                    session_id, ns, channel, str(version), blob_values[channel], appends[channel]
                )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def _put_writes_op(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Op[None]:
        thread_id, ns = _thread_of(config)
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id is None:
            raise InvalidArgument("put_writes needs config['configurable']['checkpoint_id']")
        rows = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self.serde.dumps_typed(value)
            rows.append((WRITES_IDX_MAP.get(channel, idx), channel, type_, data))
        upsert = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        if rows:
            yield from cp.put_writes(
                thread_id, ns, checkpoint_id, task_id, task_path, rows, upsert=upsert
            )

    def _delete_thread_op(self, thread_id: str) -> Op[None]:
        yield from cp.delete_thread(thread_id)
        self._forget(thread_id)

    def _copy_thread_op(self, source_thread_id: str, target_thread_id: str) -> Op[None]:
        yield from cp.copy_thread(source_thread_id, target_thread_id)

    def _delete_for_runs_op(self, run_ids: Sequence[str]) -> Op[None]:
        yield from cp.delete_for_runs(list(run_ids))

    def _prune_op(self, thread_ids: Sequence[str], strategy: str) -> Op[None]:
        if strategy not in ("keep_latest", "delete"):
            raise InvalidArgument(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        if isinstance(thread_ids, str):
            raise InvalidArgument("thread_ids must be a sequence of thread ids, not a string")
        for thread_id in thread_ids:
            if strategy == "delete":
                yield from cp.delete_thread(thread_id)
            else:
                yield Run(cp.prune_keep_latest(thread_id))  # atomic: in its own transaction
            self._forget(thread_id)

    def _forget(self, thread_id: str) -> None:
        sid = self._sessions.pop(thread_id, None)
        if sid is not None:
            with self._lock:
                for key in [k for k in self._values if k[0] == sid]:
                    del self._values[key]

    def get_next_version(self, current: str | None, channel: None) -> str:
        """The next version of a channel: a zero-padded counter and a random tail, as in
        LangGraph's Postgres saver (two forks of one checkpoint never share a version)."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(current.split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


class IkigaiSaver(_Core):
    """A LangGraph checkpoint saver on a ``Store`` (thread-safe). The async methods run the
    sync ones in a worker thread; on asyncio, prefer ``AsyncIkigaiSaver``.

    ``IkigaiSaver(store)`` uses a store the caller opened (and closes);
    ``with IkigaiSaver.from_conn_string(url) as saver:`` opens and closes its own.
    """

    def __init__(
        self,
        store: Store,
        *,
        serde: SerializerProtocol | None = None,
        cache_size: int = 1024,
        max_appends: int = 64,
    ) -> None:
        super().__init__(serde=serde, cache_size=cache_size, max_appends=max_appends)
        self.store = store

    @classmethod
    @contextmanager
    def from_conn_string(
        cls,
        conn_string: str | None = None,
        *,
        migrate: bool = True,
        pool_size: int = 4,
        serde: SerializerProtocol | None = None,
        cache_size: int = 1024,
        max_appends: int = 64,
    ) -> Iterator[IkigaiSaver]:
        """A saver on a store opened on ``conn_string`` (``ik.open``'s resolution: None is the
        configured or embedded database; ``migrate`` and ``pool_size`` are ``ik.open``'s: a
        deployed service passes ``migrate=False`` and migrates in its deploy), closed on exit.
        The other arguments are the saver's."""
        from ..store import open as open_store

        with open_store(conn_string, migrate=migrate, pool_size=pool_size) as store:
            yield cls(store, serde=serde, cache_size=cache_size, max_appends=max_appends)

    def setup(self) -> None:
        """Apply pending migrations (``from_conn_string`` already does)."""
        self.store.migrate()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its thread's newest without a checkpoint_id)."""
        return self.store._run(self._get_op(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (see ``BaseCheckpointSaver.list``)."""
        yield from self.store._run(self._list_op(config, filter, before, limit))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channels it changed; returns its config."""
        return self.store._run(self._put_op(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's intermediate writes for the checkpoint ``config`` names."""
        self.store._run(self._put_writes_op(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes (its copies keep theirs)."""
        self.store._run(self._delete_thread_op(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and writes) whose ``metadata.run_id`` is in ``run_ids``."""
        self.store._run(self._delete_for_runs_op(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Make ``target_thread_id`` a copy of ``source_thread_id``: one row and the special
        writes (errors, interrupts), nothing else copied.
        ``Conflict`` when the target exists; nothing happens when the source does not."""
        self.store._run(self._copy_thread_op(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: delete them."""
        self.store._run(self._prune_op(thread_ids, strategy))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``get_tuple`` in a worker thread."""
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """``list`` in a worker thread."""
        op = self._list_op(config, filter, before, limit)
        for item in await asyncio.to_thread(self.store._run, op):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``put`` in a worker thread."""
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``put_writes`` in a worker thread."""
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        """``delete_thread`` in a worker thread."""
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``delete_for_runs`` in a worker thread."""
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``copy_thread`` in a worker thread."""
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``prune`` in a worker thread."""
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


class AsyncIkigaiSaver(_Core):
    """A LangGraph checkpoint saver on an ``AsyncStore``. Its sync methods may be called from
    other threads only: they run on the saver's event loop (``loop``).

    ``AsyncIkigaiSaver(store)`` uses a store the caller opened (and closes);
    ``async with AsyncIkigaiSaver.from_conn_string(url) as saver:`` opens and closes its own.
    """

    def __init__(
        self,
        store: AsyncStore,
        *,
        serde: SerializerProtocol | None = None,
        cache_size: int = 1024,
        max_appends: int = 64,
    ) -> None:
        super().__init__(serde=serde, cache_size=cache_size, max_appends=max_appends)
        self.store = store
        #: The event loop the sync methods run on: the running one when the saver is made (or
        #: when it is first used, if made outside one).
        self.loop: asyncio.AbstractEventLoop | None = None
        with suppress(RuntimeError):
            self.loop = asyncio.get_running_loop()

    async def _arun(self, op: Op[T]) -> T:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        return await self.store._run(op)

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls,
        conn_string: str | None = None,
        *,
        migrate: bool = True,
        pool_size: int = 4,
        serde: SerializerProtocol | None = None,
        cache_size: int = 1024,
        max_appends: int = 64,
    ) -> AsyncIterator[AsyncIkigaiSaver]:
        """A saver on a store opened on ``conn_string`` (``ik.open_async``'s resolution;
        ``migrate`` and ``pool_size`` are its: a deployed service passes ``migrate=False``),
        closed on exit. The other arguments are the saver's."""
        from ..aio import open_async

        async with open_async(conn_string, migrate=migrate, pool_size=pool_size) as store:
            yield cls(store, serde=serde, cache_size=cache_size, max_appends=max_appends)

    async def setup(self) -> None:
        """Apply pending migrations (``from_conn_string`` already does)."""
        await self.store.migrate()

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its thread's newest without a checkpoint_id)."""
        return await self._arun(self._get_op(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Checkpoints newest first (see ``BaseCheckpointSaver.list``)."""
        for item in await self._arun(self._list_op(config, filter, before, limit)):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint and the channels it changed; returns its config."""
        return await self._arun(self._put_op(config, checkpoint, metadata, new_versions))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Store a task's intermediate writes for the checkpoint ``config`` names."""
        await self._arun(self._put_writes_op(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete a thread's checkpoints and writes (its copies keep theirs)."""
        await self._arun(self._delete_thread_op(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and writes) whose ``metadata.run_id`` is in ``run_ids``."""
        await self._arun(self._delete_for_runs_op(run_ids))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Make ``target_thread_id`` a copy of ``source_thread_id``: one row and the special
        writes (errors, interrupts), nothing else copied.
        ``Conflict`` when the target exists; nothing happens when the source does not."""
        await self._arun(self._copy_thread_op(source_thread_id, target_thread_id))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint; ``delete``: delete them."""
        await self._arun(self._prune_op(thread_ids, strategy))

    def _sync(self, coro: Any) -> Any:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self.loop is None:
            coro.close()
            raise asyncio.InvalidStateError(
                "AsyncIkigaiSaver was made outside an event loop and never used on one: "
                "its sync methods have no loop to run on"
            )
        if running is self.loop:
            coro.close()
            raise asyncio.InvalidStateError(
                "AsyncIkigaiSaver's sync methods cannot run on its own event loop: "
                "use the async ones (ainvoke, astream, aget_state ...)"
            )
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """``aget_tuple`` from another thread."""
        return cast(CheckpointTuple | None, self._sync(self.aget_tuple(config)))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """``alist`` from another thread."""
        op = self._list_op(config, filter, before, limit)
        yield from cast("list[CheckpointTuple]", self._sync(self._arun(op)))

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """``aput`` from another thread."""
        return cast(
            RunnableConfig, self._sync(self.aput(config, checkpoint, metadata, new_versions))
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """``aput_writes`` from another thread."""
        self._sync(self.aput_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        """``adelete_thread`` from another thread."""
        self._sync(self.adelete_thread(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """``adelete_for_runs`` from another thread."""
        self._sync(self.adelete_for_runs(run_ids))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """``acopy_thread`` from another thread."""
        self._sync(self.acopy_thread(source_thread_id, target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``aprune`` from another thread."""
        self._sync(self.aprune(thread_ids, strategy=strategy))
