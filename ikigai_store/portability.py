"""Sessions out of a database and into another, and sessions deleted when they are old.

Owns ``export_session``, ``import_session`` and ``prune_sessions`` (``store.export_session``
…, CLI ``export``, ``import``, ``session prune``) and the file format (docs: "Retention and
export"). An export of format version 2 is lines of UTF-8:

1. a header (JSON), ``{"format": "ikigai-session", "version": 2, "schema_version": …,
   "export_id": "<uuid>", "session_id": …, "exported_at": …, "events": {"columns": [...],
   "encoding": "postgresql-copy-text"}}``;
2. the session (JSON, ``"type": "session"``) and its agents oldest first (JSON, ``"agent"``:
   uuid, parent, fork point…);
3. the events line (JSON, ``{"type": "events", "columns": ["id", "agent_uuid", "kind",
   "content", "data", "created_at"], "encoding": "postgresql-copy-text"}``), then every event
   in id order, one line each in PostgreSQL's ``COPY`` text format (those columns, tab
   separated, ``\\N`` for NULL, backslash escapes; times in ISO 8601 with their UTC offset):
   what ``COPY`` itself writes, streamed to the file, up to the newest event once the
   session's appends in flight are in;
4. a trailer (JSON), ``{"type": "end", "lines": …, "sha256": …}``: how many lines came before
   it and the SHA-256 of their bytes.

Version 1 (still read) was JSON Lines throughout: each event a JSON object (``"type":
"event"`` and the same six keys) and no events line. Version 2 names the event columns once,
and its events cost what ``COPY`` costs to write and to read (issue 38).

Invariants:
- export and import stream: memory stays constant whatever the session's size;
- an import happens in one transaction and remaps every id: the session's, the events' (new
  ids from the sequence, in the file's order), the agents' (new uuids), parents, fork points
  and ``data.target_message_id`` (a rewind's mark, a pop's target); the imported session
  replays to the same contents as the exported one, for the session and for every agent;
- a file that is truncated (no trailer), altered (hash or line count), of a newer format
  version, or malformed is refused with ``InvalidArgument`` and nothing is written; files of
  every older format version import;
- ``once=True`` records the file's ``export_id`` and refuses it the next time (``Conflict``);
- ``prune_sessions`` deletes only ended sessions, each in short transactions (events in
  batches, then the session row with what cascades from it), so it never holds a long lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from .admin import schema_version
from .agents import new_agent_uuid
from .errors import Conflict, DatabaseError, InvalidArgument
from .ops import (
    Area,
    FaceT,
    Op,
    Run,
    atomic,
    copy_in,
    copy_out,
    many,
    one,
    operation,
    statement,
)
from .sessions import require_session
from .validate import check_id, check_int

__all__ = [
    "EVENT_COLUMNS",
    "FORMAT",
    "VERSION",
    "ExportSummary",
    "ImportSummary",
    "PortabilityOps",
    "PruneReport",
    "export_session",
    "import_session",
    "prune_sessions",
]

#: The header's ``format`` and the newest ``version`` this library reads and writes (it
#: reads every version from 1 up).
FORMAT = "ikigai-session"
VERSION = 2
#: The columns of a version 2 event line, in order, and how the lines are written.
EVENT_COLUMNS = ("id", "agent_uuid", "kind", "content", "data", "created_at")
_ENCODING = "postgresql-copy-text"
_EVENTS = {"columns": list(EVENT_COLUMNS), "encoding": _ENCODING}
#: Lines sent to PostgreSQL per ``COPY`` block on import.
_BLOCK = 1 << 16
#: Events deleted per transaction by ``prune_sessions``; sessions looked at per round.
PRUNE_BATCH = 10_000
_SESSIONS_PER_ROUND = 100

File = str | os.PathLike[str] | IO[bytes]


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What ``export_session`` wrote: the file's ``export_id`` and its lines (header and
    trailer included), bytes and SHA-256 (of everything before the trailer)."""

    session_id: int
    export_id: str
    lines: int
    bytes: int
    sha256: str


@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What ``import_session`` made: the new session, how many agents and events it has, and
    each agent's new uuid by its old one."""

    session_id: int
    export_id: str
    agents: dict[str, str]
    events: int


@dataclass(frozen=True, slots=True)
class PruneReport:
    """What ``prune_sessions`` deleted (with ``dry_run``: would delete)."""

    sessions: int
    events: int
    agents: int


@contextlib.contextmanager
def _opened(file: File, mode: str) -> Iterator[IO[bytes]]:
    """``file`` as a binary stream: a path is opened (and closed) here; a stream is used as
    it is (and left open). ``InvalidArgument`` for a path that cannot be opened (missing,
    a directory, not permitted), before anything is read or written."""
    if isinstance(file, str | os.PathLike):
        try:
            stream = open(file, mode)  # noqa: SIM115 - closed below
        except OSError as exc:
            raise InvalidArgument(
                f"cannot open {os.fsdecode(file)!r}: {exc.strerror or exc}"
            ) from None
        with stream:
            yield stream
    else:
        yield file


class _Sink:
    """Writes what COPY hands over (a row at a time) to the file in 64 KiB blocks, counting
    lines and bytes and hashing them: per row, only an append to a buffer."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out
        self.hash = hashlib.sha256()
        self.lines = 0
        self.bytes = 0
        self._buffer = bytearray()

    def __call__(self, block: bytes | memoryview) -> None:
        self._buffer += block
        if len(self._buffer) >= _BLOCK:
            self.flush()

    def flush(self) -> None:
        block = self._buffer
        if block:
            self.out.write(block)
            self.hash.update(block)
            self.lines += block.count(b"\n")
            self.bytes += len(block)
            self._buffer = bytearray()


@atomic
def _body(session_id: int, horizon: int, sink: _Sink) -> Op[None]:
    """The agent lines, the events line and the event lines, in one transaction (one
    snapshot) whose ``DateStyle`` and ``TimeZone`` are fixed (ISO, UTC: the times read alike
    wherever the file goes); the caller's settings are put back."""
    saved = yield one("export_settings")
    at = {"session_id": session_id, "horizon": horizon}
    yield copy_out("export_agents", sink, **at)
    sink(json.dumps({"type": "events", **_EVENTS}).encode() + b"\n")
    yield copy_out("export_events", sink, **at)
    yield one("export_restore", datestyle=saved["datestyle"], timezone=saved["timezone"])


@atomic
def _head(session_id: int) -> Op[dict[str, Any]]:
    """The session's line and the export's horizon, once the appends in flight are in."""
    locked = yield one("session_wait_appends", session_id=session_id)
    if locked is None:
        yield from require_session(session_id)
    head: dict[str, Any] = yield one("export_head", session_id=session_id)
    return head


def export_session(session_id: int, file: File) -> Op[ExportSummary]:
    """Write the session, its agents and its events to ``file`` (a path, or a binary stream
    left open) in the export format, version 2 (see the module docstring), streamed by
    ``COPY``: memory stays constant whatever the size. A session being written to is exported
    up to its newest event once the appends in flight are in (nothing later, no gap).
    ``NotFound`` for an unknown session, ``InvalidArgument`` for a path that cannot be
    opened for writing."""
    check_id(session_id, "session_id")
    version = yield from schema_version()
    export_id = str(uuid.uuid4())
    header = {
        "format": FORMAT,
        "version": VERSION,
        "schema_version": version,
        "export_id": export_id,
        "session_id": session_id,
        "exported_at": datetime.now(UTC).isoformat(),
        "events": _EVENTS,
    }
    head = yield Run(_head(session_id))
    with _opened(file, "wb") as out:
        sink = _Sink(out)
        sink(json.dumps(header).encode() + b"\n" + head["line"].encode() + b"\n")
        yield Run(_body(session_id, head["horizon"], sink))
        sink.flush()
        digest = sink.hash.hexdigest()
        trailer = {"type": "end", "lines": sink.lines, "sha256": digest}
        out.write(json.dumps(trailer).encode() + b"\n")
        out.flush()
    return ExportSummary(session_id, export_id, sink.lines + 1, sink.bytes, digest)


class _Feed:
    """The lines of an export after its header, in blocks for ``COPY``, checked as they go:
    the newest line is held back (at the end, it is the trailer), the others hashed and
    counted. Iterating again goes on where the last iteration stopped (after a failed
    ``COPY``, the rest of the file is read to tell a damaged file from a malformed one).
    ``records`` stops after a version 2 file's events line (kept in ``events``, not fed)."""

    def __init__(self, stream: IO[bytes], header: bytes) -> None:
        self.stream = stream
        self.hash = hashlib.sha256(header)
        self.lines = 1
        self.trailer: bytes | None = None
        self.events: Any = None

    def records(self) -> Iterator[bytes]:
        """The JSON lines before the events line, in one block (a session and its agents);
        reading stops after the events line, which is hashed and counted, not fed."""
        block: list[bytes] = []
        for line in self.stream:
            if line.startswith(b"{") and b'"events"' in line:  # JSON: any spacing
                try:
                    events = json.loads(line)
                except ValueError:
                    events = None
                if isinstance(events, dict) and events.get("type") == "events":
                    if self.trailer is not None:
                        self.hash.update(self.trailer)
                        self.lines += 1
                        block.append(self.trailer)
                    self.hash.update(line)
                    self.lines += 1
                    self.trailer, self.events = None, events
                    break
            held, self.trailer = self.trailer, line
            if held is not None:
                self.hash.update(held)
                self.lines += 1
                block.append(held)
        if block:
            yield b"".join(block)

    def __iter__(self) -> Iterator[bytes]:
        block: list[bytes] = []
        size = 0
        for line in self.stream:
            held, self.trailer = self.trailer, line
            if held is not None:
                self.hash.update(held)
                self.lines += 1
                block.append(held)
                size += len(held)
                if size >= _BLOCK:
                    yield b"".join(block)
                    block, size = [], 0
        if block:
            yield b"".join(block)

    def check(self) -> None:
        """``InvalidArgument`` unless the trailer is there and agrees with what was read."""
        if self.trailer is None or not self.trailer.endswith(b"\n"):
            raise InvalidArgument("the file is truncated: it does not end with its trailer")
        try:
            trailer = json.loads(self.trailer)
        except ValueError:
            trailer = None
        if not isinstance(trailer, dict) or trailer.get("type") != "end":
            raise InvalidArgument("the file is truncated: it does not end with its trailer")
        if trailer.get("lines") != self.lines or trailer.get("sha256") != self.hash.hexdigest():
            raise InvalidArgument(
                f"the file is corrupted: its trailer says {trailer.get('lines')!r} lines and "
                f"SHA-256 {str(trailer.get('sha256'))[:16]}…, it holds {self.lines} lines "
                f"hashing to {self.hash.hexdigest()[:16]}…"
            )


def _header(stream: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    line = stream.readline()
    try:
        header = json.loads(line)
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise InvalidArgument(f"not an ikigai-store session export (no {FORMAT!r} header)")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidArgument(f"the export's format version {version!r} is not a version")
    if version > VERSION:
        raise InvalidArgument(
            f"the export's format version is {version}, newer than this library reads "
            f"({VERSION}): upgrade ikigai-store to import it"
        )
    try:
        header["export_id"] = str(uuid.UUID(str(header.get("export_id"))))
    except ValueError:
        raise InvalidArgument("the export's header has no valid export_id") from None
    return header, line


def _staged(feed: _Feed, version: int) -> Op[dict[str, Any]]:
    """Stage the file's lines (``COPY``), check them, and have its events in
    ``ikigai_import_events``: the check's row. A file whose trailer is missing or disagrees
    says so before any other problem."""
    no_events = InvalidArgument(
        f"the file is malformed: it has no events line naming the columns {list(EVENT_COLUMNS)} "
        f"in {_ENCODING!r}"
    )
    try:
        if version == 1:
            yield copy_in("import_copy_lines", feed)
        else:
            yield copy_in("import_copy_lines", feed.records())
            if feed.events != {"type": "events", **_EVENTS}:
                for _ in feed:
                    pass
                feed.check()
                raise no_events
            yield copy_in("import_copy_events", feed)
    except DatabaseError as exc:
        for _ in feed:  # read the rest: a truncated or altered file says so first
            pass
        feed.check()
        if version > 1 and feed.events is None:  # event lines were read as JSON lines
            raise no_events from exc
        raise InvalidArgument(f"the file is malformed: {exc}") from exc
    feed.check()
    checked: dict[str, Any] = yield one("import_check" if version == 1 else "import_check_events")
    if checked["problem"] is None and version == 1:
        try:
            yield statement("import_v1_events")
        except DatabaseError as exc:  # an id or a time that is no bigint or timestamptz
            raise InvalidArgument(f"the file is malformed: {exc}") from exc
    return checked


@atomic
def import_session(file: File, *, once: bool = False) -> Op[ImportSummary]:
    """Load an export (``export_session``'s file, of any format version up to ``VERSION``: a
    path, or a binary stream) as a new session, in one transaction, every id remapped (see
    the module docstring): the new session replays to the same contents as the exported one.
    Importing a file twice makes two sessions; with ``once``, the second time is refused
    (``Conflict``) and nothing written. ``InvalidArgument`` (nothing written) for a
    truncated, altered, malformed or newer file, or a path that cannot be opened."""
    with _opened(file, "rb") as stream:
        header, first = _header(stream)
        export_id = header["export_id"]
        if once:
            found = yield one("import_find", export_id=export_id)
            if found is not None:
                raise Conflict(
                    f"this file (export {export_id}) was already imported as session "
                    f"{found['session_id']}",
                    constraint="session_imports_pkey",
                    sqlstate=None,
                )
        yield statement("import_stage")
        yield statement("import_stage_events")
        checked = yield from _staged(_Feed(stream, first), header["version"])
    if checked["problem"] is not None:
        raise InvalidArgument(f"the file is malformed: {checked['problem']}")
    try:
        session = yield one("import_session_row")
        session_id = int(session["id"])
        yield statement("import_ids")
        old = [row["uuid"] for row in (yield many("import_old_agents"))]
        new = [new_agent_uuid() for _ in old]
        mapping = {"old_uuids": old, "new_uuids": new, "session_id": session_id}
        yield statement("import_agents", **mapping)
        events = yield statement("import_events", **mapping)
    except DatabaseError as exc:  # a bad time, kind or status (a check constraint) in a line
        raise InvalidArgument(f"the file is malformed: {exc}") from exc
    if once:
        yield statement("import_record", export_id=export_id, session_id=session_id)
    yield statement("import_unstage")
    return ImportSummary(session_id, export_id, dict(zip(old, new, strict=True)), int(events))


def _cutoff(ended_before: datetime | timedelta | float) -> datetime:
    if isinstance(ended_before, datetime):
        if ended_before.tzinfo is None:
            raise InvalidArgument("ended_before must be timezone-aware")
        return ended_before
    if isinstance(ended_before, bool) or not isinstance(ended_before, timedelta | int | float):
        raise InvalidArgument(
            f"ended_before must be a datetime, a timedelta or seconds, got {ended_before!r}"
        )
    age = ended_before if isinstance(ended_before, timedelta) else timedelta(seconds=ended_before)
    if age < timedelta(0):
        raise InvalidArgument("ended_before must not be a negative age")
    return datetime.now(UTC) - age


def prune_sessions(
    *, ended_before: datetime | timedelta | float, batch: int = PRUNE_BATCH, dry_run: bool = False
) -> Op[PruneReport]:
    """Delete the sessions that ended before ``ended_before`` (a time, or an age: a
    ``timedelta`` or seconds before now), with everything that hangs off them: events, agents
    and their context summaries, listeners, import records (identities bound to their agents
    are kept, unbound). Never an active session. Each session goes in short transactions:
    its events ``batch`` at a time, then its row; a prune stopped half way leaves an ended
    session with fewer events, and running it again finishes. ``dry_run``: count only."""
    cutoff = _cutoff(ended_before)
    check_int(batch, "batch", minimum=1)
    if dry_run:
        row = yield one("prune_sessions_count", ended_before=cutoff)
        return PruneReport(int(row["sessions"]), int(row["events"]), int(row["agents"]))
    sessions = events = agents = after = 0
    while True:
        due = yield many(
            "prune_sessions_due", ended_before=cutoff, after=after, lim=_SESSIONS_PER_ROUND
        )
        if not due:
            return PruneReport(sessions, events, agents)
        for row in due:
            session_id = after = int(row["id"])
            while True:
                deleted = yield statement("prune_session_events", session_id=session_id, lim=batch)
                events += deleted
                if deleted < batch:
                    break
            gone = yield one("prune_session_row", session_id=session_id)
            sessions += int(gone["sessions"])
            agents += int(gone["agents"]) if gone["sessions"] else 0


class PortabilityOps(Area[FaceT]):
    """Export, import and retention of sessions (``Store``, ``AsyncStore``)."""

    export_session = operation(export_session)
    import_session = operation(import_session)
    prune_sessions = operation(prune_sessions)
