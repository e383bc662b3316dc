"""What a session's timeline shows, without I/O but for the operations it yields.

Owns the reads of the history pages (``sessions_page``, ``events_page``, ``tail``, ``agents``,
``event``) and ``Controls``, which says of any event whether replay keeps it. Invariants:
- a page reads a bounded number of rows by keyset (ids), never the whole session: a page of a
  100,000-event session costs what one of a 1,000-event session does; long texts are cut in
  the database (``queries/web.sql``);
- which events a rewind cut, a pop removed and a clear walled off is decided by the library's
  own fold (``replay.fold``) run over the session's mark, rewind, clear and pop events and the
  events the pops aim at only (the others are merely appended: leaving them out changes no
  verdict), so the timeline agrees with ``replay_session`` without replaying it;
- ``tail`` returns every event committed after an id, and none can commit later with a lower
  id (it waits for the appends in flight: ``session_wait_appends``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..models import Message, ReplayContext
from ..ops import Op, atomic, many, message_rows, one
from ..replay import fold, mark_label, target_id
from ..sessions import require_session
from ..validate import check_id

__all__ = [
    "AgentNode",
    "Controls",
    "EventRow",
    "SessionRow",
    "agents",
    "controls",
    "event",
    "events_page",
    "sessions_page",
    "tail",
]

#: Events on one page of a timeline.
PAGE = 200
#: Sessions on one page of the list.
SESSIONS_PAGE = 50


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: int
    title: str | None
    started_at: datetime
    ended_at: datetime | None
    agents: int


@dataclass(frozen=True, slots=True)
class EventRow:
    """One event as a page shows it: ``content``/``data`` cut to 2,000 characters
    (``content_length``/``data_length`` say how long they are)."""

    id: int
    agent_uuid: str | None
    kind: str
    content: str | None
    content_length: int | None
    data: str | None
    data_length: int | None
    created_at: datetime

    @classmethod
    def of(cls, row: dict[str, Any]) -> EventRow:
        return cls(**row)


@dataclass(slots=True)
class Controls:
    """A session's mark, rewind, clear and pop events, folded: what replay keeps of any event."""

    #: (mark id, rewind id) of every rewind replay honoured: the events strictly between
    #: were cut.
    spans: list[tuple[int, int]] = field(default_factory=list)
    #: The ids of the clears, oldest first: everything before the newest is walled off.
    clears: list[int] = field(default_factory=list)
    #: Rewinds and pops replay skipped (their target was gone), and the labels of marks.
    skipped: set[int] = field(default_factory=set)
    #: The pops replay honoured, and the events they removed from the context.
    pops: set[int] = field(default_factory=set)
    popped: set[int] = field(default_factory=set)
    labels: dict[int, str | None] = field(default_factory=dict)
    targets: dict[int, int | None] = field(default_factory=dict)

    def state(self, event_id: int) -> str:
        """What replay does with the event: ``live`` (kept), else space-separated: ``walled``
        (before the newest clear), ``cut`` (inside a rewound span), ``skipped`` (a rewind or pop
        replay skipped), ``wall`` (a clear: never kept itself), ``pop`` (a pop replay honoured:
        never kept itself), ``popped`` (removed by a pop)."""
        found = []
        if event_id in self.clears:
            found.append("wall")
        if event_id in self.pops:
            found.append("pop")
        if event_id in self.popped:
            found.append("popped")
        if event_id in self.skipped:
            found.append("skipped")
        if self.clears and event_id < self.clears[-1]:
            found.append("walled")
        if any(mark < event_id < rewind for mark, rewind in self.spans):
            found.append("cut")
        return " ".join(found) or "live"


def _fold_controls(events: list[Message]) -> Controls:
    found = Controls()
    ctx = ReplayContext()
    for event in events:
        fold([event], ctx)
        if event.kind == "clear":
            found.clears.append(event.id)
        elif event.kind == "mark":
            found.labels[event.id] = mark_label(event.data)
        elif event.kind in ("rewind", "pop"):
            target = target_id(event.data)
            found.targets[event.id] = target
            if event.id in ctx.skipped or target is None:
                found.skipped.add(event.id)
            elif event.kind == "pop":
                found.pops.add(event.id)
                found.popped.add(target)
            else:
                found.spans.append((target, event.id))
    return found


def controls(session_id: int) -> Op[Controls]:
    """The session's ``Controls`` (migration 0020's partial index: only those events, and the
    events the pops aim at)."""
    rows = yield message_rows("web_session_controls", session_id=session_id)
    return _fold_controls(rows or [])


def sessions_page(q: str | None, before: int | None) -> Op[list[SessionRow]]:
    """Sessions newest first whose title contains ``q`` (or whose id is ``q``), below id
    ``before``; one more than a page, to tell whether there is a next one."""
    rows = yield many("web_sessions", q=q or None, before_id=before, lim=SESSIONS_PAGE + 1)
    return [SessionRow(**row) for row in rows]


@dataclass(frozen=True, slots=True)
class Page:
    """A window of a timeline, oldest first, with whether there is more on either side."""

    events: list[EventRow]
    older: bool
    newer: bool


def events_page(session_id: int, *, before: int | None, after: int | None) -> Op[Page]:
    """The ``PAGE`` events below ``before`` (default: the newest), or above ``after``."""
    check_id(session_id, "session_id")
    if after is not None:
        rows = yield many("web_events_after", session_id=session_id, after_id=after, lim=PAGE + 1)
        events = [EventRow.of(r) for r in rows[:PAGE]]
        return Page(events, older=after > 0, newer=len(rows) > PAGE)
    bound = before if before is not None else 2**63 - 1
    rows = yield many("web_events_before", session_id=session_id, before_id=bound, lim=PAGE + 1)
    events = [EventRow.of(r) for r in reversed(rows[:PAGE])]
    if not events:
        yield from require_session(session_id)
    return Page(events, older=len(rows) > PAGE, newer=before is not None)


@atomic
def tail(session_id: int, after: int) -> Op[list[EventRow]]:
    """Every event of the session above ``after`` (at most ``PAGE``), once the appends in
    flight are done: nothing can commit later with an id at or below the newest returned."""
    check_id(session_id, "session_id")
    yield one("web_lock_timeout")
    locked = yield one("session_wait_appends", session_id=session_id)
    if locked is None:
        yield from require_session(session_id)
    rows = yield many("web_events_after", session_id=session_id, after_id=after, lim=PAGE)
    return [EventRow.of(r) for r in rows]


@dataclass(frozen=True, slots=True)
class AgentNode:
    uuid: str
    session_id: int
    name: str | None
    parent_uuid: str | None
    fork_message_id: int
    status: str
    created_at: datetime
    ended_at: datetime | None
    provider: str | None
    model: str | None
    thinking_level: str | None
    idle: bool
    first_id: int | None
    last_id: int | None


def agents(session_id: int) -> Op[list[AgentNode]]:
    """Every agent of the session, oldest first."""
    rows = yield many("web_agents", session_id=session_id)
    return [AgentNode(**row) for row in rows]


def event(message_id: int) -> Op[dict[str, Any] | None]:
    """One event, whole (None: no such event)."""
    check_id(message_id, "message_id")
    row: dict[str, Any] | None = yield one("web_event", message_id=message_id)
    return row
