"""Graph checkpoints (LangGraph's persistence point) as threads of our sessions.

Owns the checkpoint operations that ``integrations.langgraph`` runs on either face (they take
and return serialised values: serialising is the framework's business). The data model
(migration 0027, queries/langgraph.sql):

- a *thread* is one of our sessions (``langgraph_threads``), made on first use; its
  checkpoints, channel values (*blobs*, one per (namespace, channel, version)) and pending
  writes are rows of that session;
- ``copy_thread`` writes one row, whatever the source's length (plus the special writes, which
  a put replaces in place, so the copy owns them: migration 0035): the copy reads its source's
  rows up to a bound (and its source's sources'), its own rows shadowing inherited ones with
  the same key (a plain write is not stored over an inherited one); every read walks that
  lineage in the same statement (``langgraph_lineage``), so a thread is read in one round trip
  at any depth of copies;
- a blob may be an *append*: the items added to a list channel since an older version of it
  (``base_version``), so a step that adds one message to a 1,000-message state stores one
  message; a chain of appends ends at a whole blob (``base_version < version``, checked by the
  schema), and one statement returns every blob a channel needs (``langgraph_blob_chain``);
- ``delete_thread`` deletes a thread's rows, except those a copy still reads (the thread only
  loses its name then); ``prune_keep_latest`` rebuilds a thread from the newest checkpoint of
  each namespace (a new session takes the name; O(kept rows)); ``delete_for_runs`` deletes
  checkpoints (and their writes) by ``metadata.run_id`` everywhere.

Invariants: bad input raises ``InvalidArgument`` before anything is written; every write is one
statement (``prune_keep_latest``: one transaction); a thread's rows never change under a
reader except by these operations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import Conflict, InvalidArgument
from .ops import Op, atomic, many, one
from .validate import check_limit, check_text, dump_json

__all__ = [
    "Blob",
    "StoredCheckpoint",
    "Write",
    "blobs_for",
    "copy_thread",
    "delete_for_runs",
    "delete_thread",
    "get_checkpoint",
    "list_checkpoints",
    "prune_keep_latest",
    "put_checkpoint",
    "put_writes",
]

#: Title of the session a thread is stored in (its thread id is appended).
TITLE = "LangGraph thread "


@dataclass(frozen=True, slots=True)
class Blob:
    """One stored channel value: ``type`` and ``blob`` as the serialiser made them; with a
    ``base_version``, the items appended to the channel's list since that version."""

    channel: str
    version: str
    type: str
    blob: bytes | None
    base_version: str | None = None


@dataclass(frozen=True, slots=True)
class Write:
    """One pending write of a task (``idx`` negative for the special channels)."""

    task_id: str
    channel: str
    type: str | None
    blob: bytes | None
    task_path: str
    idx: int


@dataclass(frozen=True, slots=True)
class StoredCheckpoint:
    """A checkpoint as stored: body and metadata (JSON), pending writes, and the blob rows that
    rebuild its channels (empty from ``list_checkpoints``: see ``blobs_for``)."""

    session_id: int
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    writes: list[Write]
    blobs: list[Blob]


def _check_key(value: object, name: str, *, empty: bool = False) -> None:
    if not isinstance(value, str) or (not value and not empty):
        raise InvalidArgument(f"{name} must be a {'' if empty else 'non-empty '}string")
    check_text(value, name)


def _writes(row: Mapping[str, Any]) -> list[Write]:
    if not row["task_ids"]:  # array_agg of no rows is NULL
        return []
    return [
        Write(t, c, ty, b, p, int(i))
        for t, c, ty, b, p, i in zip(
            row["task_ids"],
            row["write_channels"],
            row["write_types"],
            row["write_blobs"],
            row["task_paths"],
            row["idxs"],
            strict=True,
        )
    ]


def _known(known: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [c for c, _ in known], [v for _, v in known]


def put_checkpoint(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_checkpoint_id: str | None,
    checkpoint: Mapping[str, Any],
    metadata: Mapping[str, Any],
    blobs: Sequence[Blob],
) -> Op[tuple[int, list[str]]]:
    """Store a checkpoint (its body without the blob values) and the blobs of the channels it
    changed, in one statement; the thread is made on first use. Returns the thread's session id
    and the channels whose append was refused because its base is not in the thread (store
    them whole). ``InvalidArgument`` (nothing written) for a bad key or JSON."""
    _check_key(thread_id, "thread_id")
    _check_key(checkpoint_ns, "checkpoint_ns", empty=True)
    _check_key(checkpoint_id, "checkpoint_id")
    if parent_checkpoint_id is not None:
        _check_key(parent_checkpoint_id, "parent_checkpoint_id")
    body = dump_json(dict(checkpoint), "checkpoint")
    meta = dump_json(dict(metadata), "metadata")
    for blob in blobs:
        _check_key(blob.channel, "channel")
        _check_key(blob.version, "version")
        _check_key(blob.type, "type")
        if blob.base_version is not None and not blob.base_version < blob.version:
            raise InvalidArgument(
                f"channel {blob.channel}: an append's base version must be older than its "
                f"version ({blob.base_version!r} >= {blob.version!r})"
            )
    for attempt in range(2):
        try:
            row = yield one(
                "langgraph_put",
                thread_id=thread_id,
                title=TITLE + thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
                parent_checkpoint_id=parent_checkpoint_id,
                checkpoint=body,
                metadata=meta,
                channels=[b.channel for b in blobs],
                versions=[b.version for b in blobs],
                types=[b.type for b in blobs],
                blobs=[b.blob for b in blobs],
                bases=[b.base_version for b in blobs],
            )
        except Conflict:  # a first use of the thread raced ours: it exists now
            if attempt:
                raise
            continue
        return int(row["session_id"]), list(row["missing"])
    raise AssertionError("unreachable")  # pragma: no cover


def get_checkpoint(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
    *,
    known: Sequence[tuple[str, str]] = (),
) -> Op[StoredCheckpoint | None]:
    """A checkpoint (``checkpoint_id`` None: the namespace's newest) with its writes and the
    blob rows that rebuild its channels, minus the (channel, version) pairs in ``known``; None
    when there is no such thread or checkpoint. One statement at any depth of copies."""
    _check_key(thread_id, "thread_id")
    _check_key(checkpoint_ns, "checkpoint_ns", empty=True)
    if checkpoint_id is not None:
        _check_key(checkpoint_id, "checkpoint_id")
    known_channels, known_versions = _known(known)
    row = yield one(
        "langgraph_get",
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        known_channels=known_channels,
        known_versions=known_versions,
    )
    if row is None:
        return None
    blobs = [
        Blob(c, v, t, b, base)
        for c, v, t, b, base in zip(
            row["blob_channels"] or [],
            row["blob_versions"] or [],
            row["blob_types"] or [],
            row["blob_blobs"] or [],
            row["blob_bases"] or [],
            strict=True,
        )
    ]
    return StoredCheckpoint(
        int(row["session_id"]),
        thread_id,
        checkpoint_ns,
        row["checkpoint_id"],
        row["parent_checkpoint_id"],
        row["checkpoint"],
        row["metadata"],
        _writes(row),
        blobs,
    )


def list_checkpoints(
    thread_id: str | None,
    checkpoint_ns: str | None,
    *,
    metadata_filter: Mapping[str, Any] | None = None,
    before: str | None = None,
    limit: int | None = None,
) -> Op[list[StoredCheckpoint]]:
    """Checkpoints newest first, with their writes (no blobs: ``blobs_for``): of one thread
    (None: every thread), one namespace (None: all), whose metadata contains
    ``metadata_filter``, older than the checkpoint id ``before``, at most ``limit``."""
    if thread_id is not None:
        _check_key(thread_id, "thread_id")
    if checkpoint_ns is not None:
        _check_key(checkpoint_ns, "checkpoint_ns", empty=True)
    if before is not None:
        _check_key(before, "before")
    if limit is not None:
        check_limit(limit)
    wanted = None if not metadata_filter else dump_json(dict(metadata_filter), "filter")
    rows = yield many(
        "langgraph_list",
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        filter=wanted,
        before=before,
        lim=limit,
    )
    return [
        StoredCheckpoint(
            int(r["session_id"]),
            r["thread_id"],
            r["checkpoint_ns"],
            r["checkpoint_id"],
            r["parent_checkpoint_id"],
            r["checkpoint"],
            r["metadata"],
            _writes(r),
            [],
        )
        for r in rows
    ]


def blobs_for(
    session_id: int,
    checkpoint_ns: str,
    wanted: Sequence[tuple[str, str]],
    *,
    known: Sequence[tuple[str, str]] = (),
) -> Op[list[Blob]]:
    """The blob rows that rebuild each (channel, version) of ``wanted`` in a namespace of the
    thread stored in session ``session_id``, minus the pairs in ``known``."""
    if not wanted:
        return []
    known_channels, known_versions = _known(known)
    rows = yield many(
        "langgraph_blobs_for",
        session_id=session_id,
        checkpoint_ns=checkpoint_ns,
        channels=[c for c, _ in wanted],
        versions=[v for _, v in wanted],
        known_channels=known_channels,
        known_versions=known_versions,
    )
    return [Blob(r["channel"], r["version"], r["type"], r["blob"], r["base_version"]) for r in rows]


def put_writes(
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes: Sequence[tuple[int, str, str, bytes | None]],
    *,
    upsert: bool,
) -> Op[int]:
    """Store a task's writes ``(idx, channel, type, blob)`` for a checkpoint in one statement;
    one already stored under (task_id, idx) is kept, or replaced when ``upsert``. Returns the
    thread's session id."""
    _check_key(thread_id, "thread_id")
    _check_key(checkpoint_ns, "checkpoint_ns", empty=True)
    _check_key(checkpoint_id, "checkpoint_id")
    _check_key(task_id, "task_id")
    _check_key(task_path, "task_path", empty=True)
    for _, channel, type_, _ in writes:
        _check_key(channel, "channel")
        _check_key(type_, "type")
    for attempt in range(2):
        try:
            row = yield one(
                "langgraph_put_writes",
                thread_id=thread_id,
                title=TITLE + thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id=checkpoint_id,
                task_id=task_id,
                task_path=task_path,
                idxs=[w[0] for w in writes],
                channels=[w[1] for w in writes],
                types=[w[2] for w in writes],
                blobs=[w[3] for w in writes],
                upsert=upsert,
            )
        except Conflict:
            if attempt:
                raise
            continue
        return int(row["session_id"])
    raise AssertionError("unreachable")  # pragma: no cover


def copy_thread(source_thread_id: str, target_thread_id: str) -> Op[int | None]:
    """Make ``target_thread_id`` a copy of ``source_thread_id`` in one row (no checkpoint is
    copied; the special writes are, which a put replaces in place); returns its session id, or
    None when the source does not exist. ``Conflict`` when the target exists."""
    _check_key(source_thread_id, "source_thread_id")
    _check_key(target_thread_id, "target_thread_id")
    if source_thread_id == target_thread_id:
        raise InvalidArgument("a thread cannot be copied onto itself")
    try:
        row = yield one(
            "langgraph_copy_thread",
            source_thread_id=source_thread_id,
            target_thread_id=target_thread_id,
            title=TITLE + target_thread_id,
        )
    except Conflict as exc:
        if exc.constraint != "langgraph_threads_thread_id_key":
            raise
        raise Conflict(
            f"thread {target_thread_id!r} already exists: copy onto a new thread id (or "
            "delete_thread it first)",
            constraint=exc.constraint,
            sqlstate=exc.sqlstate,
        ) from None
    return None if row is None else int(row["session_id"])


def delete_thread(thread_id: str) -> Op[bool]:
    """Delete a thread's checkpoints, blobs and writes (kept, unnamed, while a copy reads
    them) and end its session; False when there was no such thread."""
    _check_key(thread_id, "thread_id")
    row = yield one("langgraph_delete_thread", thread_id=thread_id)
    return bool(row["deleted"])


def delete_for_runs(run_ids: Sequence[str]) -> Op[int]:
    """Delete every checkpoint whose ``metadata.run_id`` is in ``run_ids`` (with its writes);
    returns how many checkpoints went."""
    if isinstance(run_ids, str) or not isinstance(run_ids, Sequence):
        raise InvalidArgument("run_ids must be a sequence of strings")
    for run_id in run_ids:
        _check_key(run_id, "run_id")
    if not run_ids:
        return 0
    row = yield one("langgraph_delete_for_runs", run_ids=list(run_ids))
    return int(row["checkpoints"])


@atomic
def prune_keep_latest(thread_id: str) -> Op[int | None]:
    """Keep only the newest checkpoint of each namespace of a thread (with its writes and the
    blobs it needs): a new session takes the thread's name with copies of those rows, the old
    rows go (or stay, unnamed, while a copy reads them). Returns the new session id, None when
    there is no such thread. One transaction."""
    _check_key(thread_id, "thread_id")
    row = yield one("langgraph_unname", thread_id=thread_id)
    if row is None:
        return None
    old = int(row["session_id"])
    rebuilt = yield one(
        "langgraph_rebuild_latest", old_session_id=old, thread_id=thread_id, title=TITLE + thread_id
    )
    yield one("langgraph_drop_unnamed", session_id=old)
    return int(rebuilt["session_id"])
