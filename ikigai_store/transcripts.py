"""Agent transcripts mirrored by a runtime (the Claude Agent SDK's ``SessionStore``).

Owns the transcript operations that ``integrations.claude_agent`` runs (they take plain JSON
entries; the SDK's types stay in the integration). The data model (migration 0027,
queries/claude.sql): a transcript, named (namespace, project_key, transcript_id, subpath) with
subpath ``""`` for a main transcript and e.g. ``"subagents/agent-1"`` for a subagent's, is one
of our sessions (``claude_transcripts``), made on first append; each entry is one event of it,
``data`` the entry unchanged, with a kind and a text (``entry_event``) so that search finds it
and replay shows it like any session's. Invariants:

- an append is one transaction of two statements (lock the transcript; append and stamp it)
  that stores the entries in order, each entry with a ``uuid``
  once per transcript however often it is retried; appends to one transcript take turns (its
  row is locked), so the summary kept for a main transcript (``summarize``'s output, stored
  verbatim) is folded from every append exactly once;
- a transcript's modification time is its newest append's transaction time, the same clock
  as its events' ``created_at``;
- ``delete`` removes the transcript's events and name and ends its session (deleting a main
  transcript deletes its subpaths too); a later append starts a new session;
- bad input raises ``InvalidArgument`` before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from .errors import Conflict, InvalidArgument
from .ops import Op, atomic, many, one
from .validate import check_text, dump_json

__all__ = [
    "append_entries",
    "delete_transcripts",
    "entry_event",
    "list_subpaths",
    "list_transcripts",
    "load_entries",
]

#: ``summarize(previous, entries)``: the new summary of a main transcript; ``previous`` is
#: None or ``{"session_id", "mtime" (epoch ms), "data"}``; only the result's ``data`` is kept.
Summarize = Callable[[dict[str, Any] | None, list[dict[str, Any]]], Mapping[str, Any]]

_TEXT_TYPES = ("text", "thinking")


def _key(namespace: object, project_key: object, transcript_id: object) -> None:
    for name, value in (
        ("namespace", namespace),
        ("project_key", project_key),
        ("session_id", transcript_id),
    ):
        if not isinstance(value, str) or not value:
            raise InvalidArgument(f"{name} must be a non-empty string")
        check_text(value, name)


def _subpath(subpath: object) -> str:
    if subpath is None:
        return ""
    if not isinstance(subpath, str) or not subpath:
        raise InvalidArgument("subpath must be a non-empty string, or absent for the main one")
    check_text(subpath, "subpath")
    return subpath


def _blocks_text(content: Any) -> tuple[str | None, bool, bool]:
    """(text, has a tool_use block, has a tool_result block) of a message's content."""
    if isinstance(content, str):
        return content, False, False
    if not isinstance(content, list):
        return None, False, False
    texts: list[str] = []
    tool_use = tool_result = False
    for block in content:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind in _TEXT_TYPES and isinstance(block.get(kind), str):
            texts.append(block[kind])
        elif kind == "tool_use":
            tool_use = True
        elif kind == "tool_result":
            tool_result = True
            inner, _, _ = _blocks_text(block.get("content"))
            if inner:
                texts.append(inner)
    return ("\n".join(texts) or None), tool_use, tool_result


def entry_event(entry: Mapping[str, Any]) -> tuple[str, str | None]:
    """The event kind and searchable text of a transcript entry: ``user``, ``assistant``
    (``tool_call`` when it only calls tools), ``tool_result`` (a user entry carrying tool
    results), ``system``, and ``command`` for the runtime's own records (titles, tags,
    snapshots...)."""
    kind_of_entry = entry.get("type")
    message = entry.get("message")
    content = message.get("content") if isinstance(message, Mapping) else entry.get("content")
    text, tool_use, tool_result = _blocks_text(content)
    if kind_of_entry == "user":
        return ("tool_result" if tool_result else "user"), text
    if kind_of_entry == "assistant":
        return ("tool_call" if tool_use and not text else "assistant"), text
    if kind_of_entry == "system":
        return "system", text
    return "command", text


@atomic
def append_entries(
    namespace: str,
    project_key: str,
    transcript_id: str,
    subpath: str | None,
    entries: Sequence[Mapping[str, Any]],
    *,
    summarize: Summarize | None = None,
) -> Op[int]:
    """Append transcript entries (JSON objects), in order, skipping those whose ``uuid`` the
    transcript has (or an earlier entry of the batch has); returns how many were stored. For a
    main transcript, ``summarize(previous, entries)`` folds the batch into its summary. An
    empty batch writes nothing. ``InvalidArgument`` (nothing written) for a bad key, an entry
    that is not a JSON object or cannot be stored (NUL characters), or an ended session."""
    _key(namespace, project_key, transcript_id)
    path = _subpath(subpath)
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise InvalidArgument("entries must be a list of JSON objects")
    kinds: list[str] = []
    contents: list[str | None] = []
    datas: list[str | None] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise InvalidArgument(f"entries[{i}] must be a JSON object")
        kind, text = entry_event(entry)
        check_text(text, f"entries[{i}] text")
        datas.append(dump_json(dict(entry), f"entries[{i}]"))
        kinds.append(kind)
        contents.append(text)
    if not kinds:
        return 0
    title = f"Claude Agent SDK {transcript_id}" + (f" {path}" if path else "")
    for attempt in range(2):
        try:
            locked = yield one(
                "claude_transcript_lock",
                namespace=namespace,
                project_key=project_key,
                transcript_id=transcript_id,
                subpath=path,
                title=title,
            )
        except Conflict:  # a first append raced ours: the transcript exists now
            if attempt:
                raise
            continue
        break
    session_id = int(locked["session_id"])
    summary = None
    if summarize is not None and not path:
        previous = None
        if locked["summary"] is not None:
            previous = {
                "session_id": transcript_id,
                "mtime": _ms(locked["mtime"]),
                "data": locked["summary"],
            }
        folded = summarize(previous, [dict(e) for e in entries])
        summary = dump_json(folded.get("data"), "summary")
    try:
        row = yield one(
            "claude_append_entries",
            session_id=session_id,
            kinds=kinds,
            contents=contents,
            datas=datas,
            summary=summary,
        )
    except InvalidArgument as exc:  # the session has ended (nothing was stored)
        raise InvalidArgument(
            f"transcript {transcript_id!r} is stored in session {session_id}, which has ended"
        ) from exc
    return int(row["appended"])


def _ms(when: datetime) -> int:
    return int(when.timestamp() * 1000)


def load_entries(
    namespace: str, project_key: str, transcript_id: str, subpath: str | None
) -> Op[list[dict[str, Any]] | None]:
    """The transcript's entries in order (events of its session that are JSON objects with a
    ``type``), or None when it was never written (or was deleted). One statement."""
    _key(namespace, project_key, transcript_id)
    path = _subpath(subpath)
    rows = yield many(
        "claude_load",
        namespace=namespace,
        project_key=project_key,
        transcript_id=transcript_id,
        subpath=path,
    )
    if not rows:
        return None
    return [r["data"] for r in rows if isinstance(r["data"], dict) and "type" in r["data"]]


def list_transcripts(
    namespace: str, project_key: str
) -> Op[list[tuple[str, int, dict[str, Any] | None]]]:
    """The main transcripts of a project: (transcript id, modification time in epoch
    milliseconds, summary data or None)."""
    _key(namespace, project_key, "-")
    rows = yield many("claude_list_transcripts", namespace=namespace, project_key=project_key)
    return [(r["transcript_id"], _ms(r["mtime"]), r["summary"]) for r in rows]


def list_subpaths(namespace: str, project_key: str, transcript_id: str) -> Op[list[str]]:
    """The subpaths (subagent transcripts) stored under a session, in order."""
    _key(namespace, project_key, transcript_id)
    rows = yield many(
        "claude_list_subpaths",
        namespace=namespace,
        project_key=project_key,
        transcript_id=transcript_id,
    )
    return [r["subpath"] for r in rows]


def delete_transcripts(
    namespace: str, project_key: str, transcript_id: str, subpath: str | None
) -> Op[int]:
    """Delete a transcript (``subpath`` None: the main one and all its subpaths) with its
    events; returns how many transcripts went (0: none was stored)."""
    _key(namespace, project_key, transcript_id)
    path = None if subpath is None else _subpath(subpath)
    row = yield one(
        "claude_delete",
        namespace=namespace,
        project_key=project_key,
        transcript_id=transcript_id,
        subpath=path,
    )
    return int(row["transcripts"])
