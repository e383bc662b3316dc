"""Value types returned by the store, and the event-kind vocabulary.

Owns the frozen dataclasses callers receive and the one loader that builds them from rows (aiosql
returns untyped rows; conversion happens here, once): ``Model.from_row(row)`` reads each field from
the column of the same name, except where the class's ``_columns`` says otherwise (a conversion,
another column, a column that may be absent, a nested model read from the same row, a value the
caller passes); see ``FromRow``. Invariants: a ``Message`` is an immutable copy of one ``messages``
row; ``data`` is the parsed JSON value (or None); ``VALID_KINDS`` is the closed set of kinds
``Store.append`` accepts; a row missing a column its model reads raises ``KeyError`` (a query and
its model disagree), never a silent default.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Self, TypeVar

__all__ = [
    "ACTIVITY_TYPES",
    "AGENT_STATUSES",
    "ISSUE_STATUSES",
    "ISSUE_TYPES",
    "MAIL_STATES",
    "NOTICE_KINDS",
    "OUTBOX_OPERATIONS",
    "OUTBOX_STATUSES",
    "PLAN_STATES",
    "PRIORITIES",
    "REVIEW_DECISIONS",
    "REVIEW_EVENTS",
    "REVIEW_STATES",
    "REVIEW_TERMINAL_STATES",
    "REVIEW_TYPES",
    "SEVERITIES",
    "TASK_STATUSES",
    "TOPIC_KINDS",
    "VALID_KINDS",
    "Activity",
    "Agent",
    "AgentSummary",
    "Claim",
    "ContextSummary",
    "DeadLetter",
    "DeepJSON",
    "DrainReport",
    "Identity",
    "IdentityStatus",
    "InboxItem",
    "Lease",
    "Mail",
    "MailCounts",
    "MailHit",
    "Mark",
    "Message",
    "Notice",
    "PendingOperation",
    "PlanReview",
    "Poll",
    "Queued",
    "ReplayContext",
    "ReplayRange",
    "Review",
    "ReviewIssue",
    "ReviewIteration",
    "SearchHit",
    "Seen",
    "Session",
    "Task",
    "TaskList",
    "TaskStats",
    "Topic",
    "TopicInfo",
    "UnsavedMessage",
    "Watch",
    "WatchBatch",
    "decode_json",
    "is_valid_kind",
    "tool_result",
]

#: Kinds of the seed schema, the kinds the ikigai program added later, and ``pop`` (removes one
#: event from the replayed context: ``replay.fold``; migration 0020).
VALID_KINDS: frozenset[str] = frozenset(
    {
        "clear",
        "system",
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "mark",
        "rewind",
        "fork",
        "command",
        "usage",
        "interrupted",
        "agent_killed",
        "pop",
    }
)


@dataclass(frozen=True, slots=True)
class DeepJSON:
    """A stored JSON value nested too deeply for Python to decode (json.loads recurses).

    The store never writes one (``append`` refuses data deeper than ``MAX_JSON_DEPTH``), but
    rows written by other programs or older versions may hold one; reading them must not fail,
    so ``Message.data`` is then this wrapper around the JSON text as PostgreSQL returned it.
    """

    text: str


def decode_json(text: str | bytes) -> Any:
    """``json.loads``, except that a value too deep to decode becomes ``DeepJSON(text)``.

    Installed as the jsonb loader of the store's connections: decoding never fails on a row.
    """
    try:
        return json.loads(text)
    except RecursionError:
        return DeepJSON(text if isinstance(text, str) else bytes(text).decode("utf-8"))


def is_valid_kind(kind: object) -> bool:
    """Return True when ``kind`` is exactly one of ``VALID_KINDS`` (case and whitespace matter)."""
    return isinstance(kind, str) and kind in VALID_KINDS


# ---------------------------------------------------------------- rows -> models


@dataclass(frozen=True, slots=True)
class Column:
    """How a field is read when not simply ``row[field name]``: from column ``name`` (default:
    the field's), through ``convert`` (default: as is); ``optional``: an absent column reads as
    None (before ``convert``)."""

    name: str | None = None
    convert: Callable[[Any], Any] | None = None
    optional: bool = False


#: How ``FromRow._columns`` says a field is read: a converter applied to ``row[field name]``; a
#: ``FromRow`` model, built from the same row; a ``Column``; or None: the field is not in the
#: row, the caller of the loader passes it (trailing fields only).
Read = Callable[[Any], Any] | type["FromRow"] | Column | None

_T = TypeVar("_T")


def columns(**reads: Read) -> Mapping[str, Read]:
    """A model's ``_columns``: how each named field is read (see ``Read``)."""
    return reads


class FromRow:
    """Base of the models built from one row by ``from_row``: each field, in order, reads the
    column of its name as is, unless ``_columns`` says otherwise (see ``Read``). The loader is
    written out once per class, on its first use (``_write_loader``).

    A model assigns ``_columns = columns(...)`` without an annotation: an annotated ClassVar
    would be a pseudo-field in ``__dataclass_fields__``, which other modules read as the list
    of fields."""

    __slots__ = ()

    _columns: ClassVar[Mapping[str, Read]] = {}

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Self:
        """Build the model from one row (a mapping of column names to values)."""
        return _loader(cls)(row)


#: The loader of each model class, written on its first use by ``_write_loader``.
_LOADERS: dict[type[Any], Callable[..., Any]] = {}


def _loader(cls: type[_T]) -> Callable[..., _T]:
    """The function building ``cls`` from a row, then from its passed fields (positional)."""
    return _LOADERS.get(cls) or _write_loader(cls)


def _write_loader(cls: type[Any]) -> Callable[..., Any]:
    """Write out ``cls``'s loader, as ``dataclasses`` writes ``__init__``: one call costs what a
    hand-written ``cls(int(row["id"]), row["kind"], ...)`` would (a loop over a per-class list
    of (column, converter) measured 1.15-1.3x slower on ``Message`` rows; ``from_row`` is on
    the append, replay and inbox paths). Refuses a ``_columns`` entry that is not a field, and
    a field read from the row after a passed one."""
    reads: Mapping[str, Read] = getattr(cls, "_columns", {})
    names = [f.name for f in fields(cls)]
    unknown = set(reads) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__}._columns: not fields: {sorted(unknown)}")
    namespace: dict[str, Any] = {"cls": cls}
    values: list[str] = []
    passed: list[str] = []
    for name in names:
        read = reads.get(name, Column())
        if read is None:
            passed.append(name)
            continue
        if passed:
            raise TypeError(f"{cls.__name__}.{name}: read from the row after a passed field")
        if isinstance(read, type) and issubclass(read, FromRow):
            namespace[f"c_{name}"] = read.from_row
            values.append(f"c_{name}(row)")
            continue
        if not isinstance(read, Column):
            read = Column(convert=read)
        column = read.name or name
        value = f"row.get({column!r})" if read.optional else f"row[{column!r}]"
        if read.convert is not None:
            namespace[f"c_{name}"] = read.convert
            value = f"c_{name}({value})"
        values.append(value)
    params = ", ".join(["row", *passed])
    exec(f"def load({params}):\n    return cls({', '.join([*values, *passed])})", namespace)
    load: Callable[..., Any] = namespace["load"]
    load.__qualname__ = f"{cls.__qualname__}.from_row"
    _LOADERS[cls] = load
    return load


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _float_or_none(value: Any) -> float | None:
    return None if value is None else float(value)


def _tuple_or_empty(value: Any) -> tuple[Any, ...]:
    return tuple(value or ())


def _utc_from_timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


@dataclass(frozen=True, slots=True)
class Session(FromRow):
    """One conversation session; active while ``ended_at`` is None (Model B)."""

    id: int
    started_at: datetime
    ended_at: datetime | None
    title: str | None

    _columns = columns(id=int)


@dataclass(frozen=True, slots=True)
class Message(FromRow):
    """One stored event. ``id`` is its position in the stream: replay orders by it."""

    id: int
    session_id: int
    agent_uuid: str | None
    kind: str
    content: str | None
    data: Any
    created_at: datetime

    _columns = columns(id=int, session_id=int, agent_uuid=Column(optional=True))


@dataclass(frozen=True, slots=True)
class UnsavedMessage:
    """An event built in memory, not yet stored: ``store.append(s, m.kind, m.content, m.data)``."""

    kind: str
    content: str | None
    data: Any


def tool_result(
    tool_call_id: str, name: str, output: str, success: bool, content: str
) -> UnsavedMessage:
    """Build the canonical ``tool_result`` event (seed ``ik_msg_create_tool_result``)."""
    return UnsavedMessage(
        kind="tool_result",
        content=content,
        data={"tool_call_id": tool_call_id, "name": name, "output": output, "success": success},
    )


@dataclass(frozen=True, slots=True)
class Mark:
    """A checkpoint on the replay mark stack: the mark event and its index in the context."""

    message_id: int
    label: str | None
    context_idx: int


@dataclass(slots=True)
class ReplayContext:
    """The context an LLM sees after replay, the live mark stack, and the rewinds and pops
    skipped since the newest clear (their target was no longer on the stack, or in the
    context)."""

    messages: list[Message] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    @property
    def message_ids(self) -> list[int]:
        """Ids of the context's messages, in order."""
        return [m.id for m in self.messages]


@dataclass(frozen=True, slots=True)
class SearchHit(FromRow):
    """A full-text search hit: the message, its rank and a snippet with matches in [brackets].

    ``rank`` is ``ts_rank_cd`` normalised by document length, in [0, 1), plus 1 for an
    exact-phrase match. ``horizon`` is the newest message id the search that found this hit
    looked at: ``search(..., before=hit)`` gives the next page and looks no further (see
    ``ikigai_store.search``)."""

    message: Message
    rank: float
    snippet: str
    horizon: int = 0

    _columns = columns(message=Message, rank=float, horizon=None)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], horizon: int = 0) -> Self:
        """Build the hit from one row of its search, which looked no further than ``horizon``."""
        return _loader(cls)(row, horizon)


AGENT_STATUSES: frozenset[str] = frozenset({"running", "dead", "reaped"})


@dataclass(frozen=True, slots=True)
class Agent(FromRow):
    """One agent of a session. A fork points at its parent and inherits the parent's history up
    to ``fork_message_id`` (0: none of the parent's own events) without copying rows."""

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

    _columns = columns(session_id=int, fork_message_id=int, idle=bool)


@dataclass(frozen=True, slots=True)
class ReplayRange(FromRow):
    """A slice of one agent's own events: ``start_id < id <= end_id`` (no upper bound if None)."""

    agent_uuid: str
    start_id: int
    end_id: int | None

    _columns = columns(start_id=int, end_id=_int_or_none)


# ---------------------------------------------------------------- identities and mail

#: A recipient's states of a mail (see ``Store.mail.set_state`` for the allowed moves).
MAIL_STATES: tuple[str, ...] = ("unread", "read", "starred", "snoozed", "archived", "trash")
#: Priorities of a mail, most pressing first.
PRIORITIES: tuple[str, ...] = ("urgent", "normal", "low")


@dataclass(frozen=True, slots=True)
class Identity(FromRow):
    """A named, long-lived participant (a person, an agent instance); retired, not deleted
    (``identities.prune`` deletes only retired identities nothing refers to). ``agent_uuid``
    binds it to one runtime agent when set; ``parent`` names the identity that started it (a
    coding agent's subagent)."""

    id: int
    name: str
    project_key: str | None
    git_branch: str | None
    purpose: str | None
    working_dir: str | None
    hostname: str | None
    agent_uuid: str | None
    created_at: datetime
    last_active_at: datetime
    retired_at: datetime | None
    parent: str | None = None

    _columns = columns(id=int)


@dataclass(frozen=True, slots=True)
class IdentityStatus(FromRow):
    """An identity, its unread count and ``status``: ``active`` (seen in the last 5 minutes),
    ``idle`` (in the last 30) or ``offline``."""

    identity: Identity
    unread: int
    status: str

    _columns = columns(identity=Identity, unread=int)


@dataclass(frozen=True, slots=True)
class Mail(FromRow):
    """One sent mail: ``id`` is its order; ``to`` the recipients' names (sorted). A topic mail
    has its ``topic`` and its ``log_offset`` there (None for direct mail)."""

    id: int
    thread_id: str
    parent_id: int | None
    sender: str
    to: tuple[str, ...]
    subject: str
    body: str
    priority: str
    deadline_at: datetime | None
    attachments: Any
    metadata: Any
    idempotency_key: str | None
    deleted_by_sender: bool
    created_at: datetime
    topic: str | None = None
    log_offset: int | None = None

    _columns = columns(
        id=int,
        parent_id=_int_or_none,
        to=Column("recipients", _tuple_or_empty),
        deleted_by_sender=bool,
        topic=Column(optional=True),
        log_offset=Column(convert=_int_or_none, optional=True),
    )


@dataclass(frozen=True, slots=True)
class InboxItem(FromRow):
    """A mail as one recipient holds it. A snooze that has passed reads as ``unread`` (with
    ``snoozed_until`` None), exactly as if ``wake_snoozed()`` had run."""

    mail: Mail
    state: str
    read_at: datetime | None
    acked_at: datetime | None
    snoozed_until: datetime | None

    _columns = columns(mail=Mail)


@dataclass(frozen=True, slots=True)
class MailCounts(FromRow):
    """One identity's mailbox counts (``unread`` includes passed snoozes; ``snoozed`` only
    sleeping ones)."""

    unread: int
    urgent_unread: int
    starred: int
    snoozed: int
    archived: int
    trash: int

    _columns = columns(
        unread=int, urgent_unread=int, starred=int, snoozed=int, archived=int, trash=int
    )


@dataclass(frozen=True, slots=True)
class MailHit(FromRow):
    """A mail search hit: the mail, its rank (a subject match weighs more than a body match;
    otherwise as ``SearchHit.rank``), a snippet, and the ``horizon`` (newest mail id) of its
    search, for ``mail.search(..., before=hit)``."""

    mail: Mail
    rank: float
    snippet: str
    horizon: int = 0

    _columns = columns(mail=Mail, rank=float, horizon=None)

    @classmethod
    def from_row(cls, row: Mapping[str, Any], horizon: int = 0) -> Self:
        """Build the hit from one row of its search, which looked no further than ``horizon``."""
        return _loader(cls)(row, horizon)


# ---------------------------------------------------------------- topics and queues

#: Kinds of topic: a broadcast log every subscriber reads, or a queue whose messages are each
#: processed by one subscriber.
TOPIC_KINDS: tuple[str, ...] = ("broadcast", "queue")


@dataclass(frozen=True, slots=True)
class Topic(FromRow):
    """A named log of mail. ``retention`` is how long its mail is kept (see
    ``apply_retention``); ``max_attempts`` how often a queue message may be claimed;
    ``searchable`` whether its mail is indexed for full-text search (fixed at creation)."""

    id: int
    name: str
    kind: str
    retention: timedelta
    max_attempts: int
    created_at: datetime
    searchable: bool = True

    _columns = columns(id=int, max_attempts=int)


@dataclass(frozen=True, slots=True)
class TopicInfo(FromRow):
    """A topic with its subscriber count, retained message count and last offset (0: none);
    for a queue, its messages ``available`` to a claim (a delayed one too, before it is
    due), ``claimed`` (under a lease, or one that expired and no claim took over yet) and
    ``dead`` letters (0 for a broadcast topic).
    """

    topic: Topic
    subscribers: int
    messages: int
    last_offset: int
    available: int = 0
    claimed: int = 0
    dead: int = 0

    _columns = columns(
        topic=Topic,
        subscribers=int,
        messages=int,
        last_offset=int,
        available=int,
        claimed=int,
        dead=int,
    )


@dataclass(frozen=True, slots=True)
class Poll:
    """What ``poll`` found: the unread inbox, and for each subscribed broadcast topic the mail
    after the stored offset (``topics``) and that stored offset (``offsets``)."""

    inbox: list[InboxItem]
    topics: dict[str, list[Mail]]
    offsets: dict[str, int]


@dataclass(frozen=True, slots=True)
class Claim(FromRow):
    """A queue message held under a lease. ``token`` identifies this claim: ``complete``,
    ``release`` and ``extend`` need it, so a holder whose lease was taken over cannot act."""

    mail: Mail
    attempt: int
    lease_until: datetime
    token: str

    _columns = columns(mail=Mail, attempt=Column("attempts", int))


@dataclass(frozen=True, slots=True)
class DeadLetter(FromRow):
    """A queue message that used all its attempts; ``requeue`` makes it claimable again."""

    mail: Mail
    attempts: int
    last_error: str | None

    _columns = columns(mail=Mail, attempts=int)


#: What the offline outbox can hold: the store call each operation is delivered with.
OUTBOX_OPERATIONS = ("send", "reply", "publish", "heartbeat")

#: States of an outbox operation (``pending_operations.status``).
OUTBOX_STATUSES = ("pending", "delivering", "delivered", "failed", "expired")


@dataclass(frozen=True, slots=True)
class PendingOperation(FromRow):
    """An operation in the offline outbox. ``payload`` holds the keyword arguments of its store
    call (``mail.send`` for ``send``, ``mail.reply``, ``mail.publish``,
    ``identities.heartbeat``); ``attempts`` counts delivery attempts, ``last_error`` the last
    failure; ``mail_id`` is the delivered mail's id (send, reply, publish)."""

    idempotency_key: str
    operation: str
    payload: dict[str, Any]
    sender: str
    status: str
    attempts: int
    last_error: str | None
    created_at: datetime
    expires_at: datetime
    changed_at: datetime
    mail_id: int | None

    _columns = columns(
        payload=json.loads,
        attempts=int,
        created_at=_utc_from_timestamp,
        expires_at=_utc_from_timestamp,
        changed_at=_utc_from_timestamp,
    )


@dataclass(frozen=True, slots=True)
class Queued:
    """What ``send_or_queue`` (``Outbox.submit``) returns when the database was unreachable:
    the operation waits in the outbox under ``idempotency_key`` until ``expires_at``."""

    idempotency_key: str
    operation: str
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class DrainReport:
    """What one ``Outbox.drain`` did: operations ``delivered`` (including ones the server
    already had), ``failed`` (refused by the store: they are not retried), ``expired`` (their
    time to live passed first); ``pending``: operations still waiting when it ended (the
    database became unreachable again, or they were queued meanwhile)."""

    delivered: int = 0
    failed: int = 0
    expired: int = 0
    pending: int = 0


# ---------------------------------------------------------------- tasks (lists, tasks, deps)

#: States of a task (``tasks.status``); completed and deleted tasks no longer block others.
TASK_STATUSES: tuple[str, ...] = ("pending", "in_progress", "completed", "deleted")


@dataclass(frozen=True, slots=True)
class TaskList(FromRow):
    """A list of tasks (e.g. one Claude Code task list), identified by its public ``list_id``
    and owned by an identity; ``watch_path`` is where its source lives (for a watcher), and
    ``last_synced_at`` when ``sync_list`` last mirrored it (None: never)."""

    id: int
    list_id: str
    owner: str
    watch_path: str | None
    created_at: datetime
    last_synced_at: datetime | None

    _columns = columns(id=int)


@dataclass(frozen=True, slots=True)
class Task(FromRow):
    """One task of a list, known by its ``external_id`` there. ``blocked_by``: the external ids
    of the tasks it waits for, ``blocks``: of those waiting for it (both in id order, whatever
    their status). ``owner`` is free text (an agent's name), None when unowned;
    ``started_at``/``completed_at`` are set the first time the task became in_progress /
    completed and never change after."""

    id: int
    list_id: str
    external_id: str
    subject: str
    description: str | None
    active_form: str | None
    metadata: dict[str, Any]
    status: str
    owner: str | None
    blocked_by: tuple[str, ...]
    blocks: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None
    completed_at: datetime | None

    _columns = columns(id=int, blocked_by=tuple, blocks=tuple)


@dataclass(frozen=True, slots=True)
class TaskStats(FromRow):
    """Counts of a list's tasks (or of every list's): per status; ``available`` (pending,
    unowned, every blocker completed or deleted: what ``available_tasks`` returns) and
    ``blocked`` (pending with a blocker neither completed nor deleted, owned or not)."""

    total: int
    pending: int
    in_progress: int
    completed: int
    deleted: int
    available: int
    blocked: int

    _columns = columns(
        total=int,
        pending=int,
        in_progress=int,
        completed=int,
        deleted=int,
        available=int,
        blocked=int,
    )


# ---------------------------------------------------------------- activities, summaries, leases

#: Every type of activity the code writes (the CHECK of ``activities.type`` lists the same, and
#: a test checks both against every activity any query inserts).
ACTIVITY_TYPES: tuple[str, ...] = (
    "commit",
    "message",
    "session_start",
    "session_complete",
    "decision",
    "error",
    "blocker",
    "heartbeat",
    "task_complete",
    "review_requested",
    "review_started",
    "review_approved",
    "review_rejected",
    "review_completed",
    "plan_submitted",
    "plan_decided",
)


@dataclass(frozen=True, slots=True)
class Activity(FromRow):
    """One entry of the activity feed: what ``identity`` did. ``id`` is its order (the feed
    is newest first by id); ``metadata`` is a JSON object or None."""

    id: int
    identity: str
    type: str
    description: str
    metadata: Any
    created_at: datetime

    _columns = columns(id=int)


@dataclass(frozen=True, slots=True)
class AgentSummary(FromRow):
    """A summary of an identity's work (seed 004's agent_summaries): the text, what changed
    since the previous one (``delta``), the hash of the transcript it summarises and what
    producing it cost."""

    id: int
    identity: str
    summary: str
    delta: str | None
    transcript_hash: str | None
    cost_usd: float | None
    created_at: datetime

    _columns = columns(id=int, cost_usd=_float_or_none)


@dataclass(frozen=True, slots=True)
class ContextSummary(FromRow):
    """A runtime agent's summary of the messages ``start_msg_id``..``end_msg_id`` (both
    included) of its replayable history, and its size in tokens."""

    id: int
    agent_uuid: str
    summary: str
    start_msg_id: int
    end_msg_id: int
    token_count: int
    created_at: datetime

    _columns = columns(id=int, start_msg_id=int, end_msg_id=int, token_count=int)


@dataclass(frozen=True, slots=True)
class Lease(FromRow):
    """A lease on ``resource`` held by ``holder`` until ``expires_at`` (live while that is in
    the future, by the database's clock). ``exclusive`` leases exclude every other holder;
    shared ones (``exclusive=False``) only exclusive ones. ``token`` identifies this grant:
    ``renew`` and ``release`` need it, so a holder whose lease was taken over cannot act."""

    id: int
    resource: str
    holder: str
    exclusive: bool
    token: str
    acquired_at: datetime
    expires_at: datetime

    _columns = columns(id=int, exclusive=bool)


# ---------------------------------------------------------------- watch

#: What a watcher reports: new unread mail, a task that became available, a waited resource
#: that became free (see ``ikigai_store.watch``).
NOTICE_KINDS: tuple[str, ...] = ("mail", "task", "lease")


@dataclass(frozen=True, slots=True)
class Seen:
    """What a watcher has reported that is still pending: ids of unread mail and available
    tasks, and freed resources (whose waits are forgotten when it is saved)."""

    mail: frozenset[int] = frozenset()
    tasks: frozenset[int] = frozenset()
    leases: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing that concerns a watched identity: ``kind`` (one of ``NOTICE_KINDS``), ``id``
    (the mail's or the task's row id; None for a freed resource or a summary), ``text`` (one
    printable line) and ``detail`` (its fields, for JSON)."""

    kind: str
    id: int | None
    text: str
    detail: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """What ``watch.next`` found: the new notices (oldest first) and the watcher's ``seen``
    once they are reported."""

    notices: tuple[Notice, ...]
    seen: Seen


@dataclass(frozen=True, slots=True)
class Watch:
    """A running watcher: the lease ``watch:<identity>`` it holds (renew it before it
    expires) and what its identity's watchers reported before (``Seen``)."""

    identity: str
    lease: Lease
    seen: Seen


# ---------------------------------------------------------------- reviews and plan reviews

#: States of a review (seed 004's state machine); see ``REVIEW_TRANSITIONS`` in reviews.py.
REVIEW_STATES: tuple[str, ...] = (
    "new",
    "pending_review",
    "under_review",
    "changes_requested",
    "re_review",
    "approved",
    "rejected",
    "cancelled",
)
#: Review states no event leaves.
REVIEW_TERMINAL_STATES: frozenset[str] = frozenset({"approved", "rejected", "cancelled"})
#: Events of the review state machine (``store.reviews.fire``).
REVIEW_EVENTS: tuple[str, ...] = (
    "submit",
    "start",
    "approve",
    "request_changes",
    "reject",
    "resubmit",
    "cancel",
)
#: Kinds of review (the seed's four, plus architecture, which Subtrate's CHECK lacked).
REVIEW_TYPES: tuple[str, ...] = ("full", "incremental", "security", "performance", "architecture")
#: What a review iteration decides (``comment`` changes no state).
REVIEW_DECISIONS: tuple[str, ...] = ("approve", "request_changes", "comment", "reject")
#: Kinds of review issue (the seed's; anything else is refused, never mapped to ``other``).
ISSUE_TYPES: tuple[str, ...] = (
    "bug",
    "security",
    "claude_md_violation",
    "logic_error",
    "performance",
    "style",
    "documentation",
    "other",
)
#: Severities of a review issue, most severe first (``open_issues`` sorts by this rank).
SEVERITIES: tuple[str, ...] = ("critical", "high", "medium", "low")
#: Statuses of a review issue: open, or resolved one of three ways.
ISSUE_STATUSES: tuple[str, ...] = ("open", "fixed", "wont_fix", "duplicate")
#: States of a plan review.
PLAN_STATES: tuple[str, ...] = ("pending", "approved", "rejected", "changes_requested")


@dataclass(frozen=True, slots=True)
class Review(FromRow):
    """A code review request. ``review_id`` is a UUID (text); ``thread_id`` (``"review-"`` and
    its first 8 hex digits, unique) is the mail thread of everything said about it;
    ``reviewers`` are identity names in the order given (the first is the default actor of
    the reviewer's events); ``iterations`` counts its recorded iterations; ``completed_at`` is
    set exactly when ``state`` is terminal."""

    id: int
    review_id: str
    thread_id: str
    requester: str
    reviewers: tuple[str, ...]
    pr_number: int | None
    branch: str | None
    base_branch: str
    commit_sha: str | None
    repo_path: str | None
    remote_url: str | None
    review_type: str
    priority: str
    state: str
    iterations: int
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None

    _columns = columns(
        id=int,
        review_id=str,
        reviewers=tuple,
        pr_number=_int_or_none,
        iterations=int,
    )

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of ``review_id`` (unique: ``resolve_prefix`` takes it)."""
        return self.review_id[:8]

    @property
    def terminal(self) -> bool:
        """True when the review is approved, rejected or cancelled (no event leaves these)."""
        return self.state in REVIEW_TERMINAL_STATES


@dataclass(frozen=True, slots=True)
class ReviewIssue(FromRow):
    """One issue found in a review iteration (``iteration_num``). ``status`` is ``open`` until
    resolved (``fixed``, ``wont_fix`` or ``duplicate``), which sets ``resolved_at`` and
    ``resolved_in_iteration``. ``file_path``/``line_start``/``line_end`` are None for an
    issue about the change as a whole."""

    id: int
    review_id: str
    iteration_num: int
    issue_type: str
    severity: str
    title: str
    description: str
    file_path: str | None
    line_start: int | None
    line_end: int | None
    code_snippet: str | None
    suggestion: str | None
    claude_md_ref: str | None
    status: str
    resolved_at: datetime | None
    resolved_in_iteration: int | None
    created_at: datetime

    _columns = columns(
        id=int,
        review_id=str,
        iteration_num=int,
        line_start=_int_or_none,
        line_end=_int_or_none,
        resolved_in_iteration=_int_or_none,
    )

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, prefix: str = "") -> Self:
        """From an issue row; ``prefix="issue_"`` reads an iteration row joined with its
        issues (``issue_id``; the review, iteration and time are the iteration's)."""
        if prefix:
            row = {**row, "id": row[f"{prefix}id"]}
        return _loader(cls)(row)


@dataclass(frozen=True, slots=True)
class ReviewIteration:
    """One round of review: numbered 1, 2, 3... per review without gaps, by ``reviewer`` (an
    identity), with its ``decision`` (approve, request_changes, reject: the matching event was
    applied; comment: no state change), ``summary``, the ``issues`` it raised (in the order
    given) and what the reviewer reported (``suggestions`` JSON, counts, cost; None when not
    reported)."""

    id: int
    review_id: str
    iteration_num: int
    reviewer: str
    reviewer_session_id: str | None
    decision: str
    summary: str
    suggestions: Any
    files_reviewed: int | None
    lines_analyzed: int | None
    duration_ms: int | None
    cost_usd: float | None
    created_at: datetime
    issues: tuple[ReviewIssue, ...] = ()

    _columns = columns(
        id=int,
        review_id=str,
        iteration_num=int,
        files_reviewed=_int_or_none,
        lines_analyzed=_int_or_none,
        duration_ms=_int_or_none,
        cost_usd=_float_or_none,
        issues=None,
    )

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> ReviewIteration:
        """From the rows of one iteration joined with its issues (``issue_id`` None: none)."""
        issues = tuple(
            ReviewIssue.from_row(r, prefix="issue_") for r in rows if r["issue_id"] is not None
        )
        return _loader(cls)(rows[0], issues)


@dataclass(frozen=True, slots=True)
class PlanReview(FromRow):
    """A plan submitted for approval before it is carried out. ``state``: pending, then
    approved, rejected or changes_requested (and pending again after a resubmission, which
    increments ``revision``); ``reviewed_by``, ``reviewer_comment`` and ``reviewed_at`` belong
    to the current decision (None while pending). ``thread_id`` (``"plan-"`` and 8 hex digits)
    is its mail thread; ``mail_id`` the latest request mail (None when the reviewer is the
    requester: nobody is mailed about their own action)."""

    id: int
    plan_review_id: str
    thread_id: str
    mail_id: int | None
    requester: str
    reviewer: str
    plan_path: str
    title: str
    summary: str
    state: str
    reviewer_comment: str | None
    reviewed_by: str | None
    session_key: str | None
    revision: int
    created_at: datetime
    updated_at: datetime
    reviewed_at: datetime | None

    _columns = columns(id=int, plan_review_id=str, mail_id=_int_or_none, revision=int)

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of ``plan_review_id`` (unique, like the thread id)."""
        return self.plan_review_id[:8]
