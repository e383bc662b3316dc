"""Value types returned by the store, and the event-kind vocabulary.

Owns the frozen dataclasses callers receive and their ``from_row`` constructors (aiosql returns
untyped rows; conversion happens here, once). Invariants: a ``Message`` is an immutable copy of one
``messages`` row; ``data`` is the parsed JSON value (or None); ``VALID_KINDS`` is the closed set of
kinds ``Store.append`` accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "ACTIVITY_TYPES",
    "AGENT_STATUSES",
    "ISSUE_STATUSES",
    "ISSUE_TYPES",
    "MAIL_STATES",
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
    "Session",
    "Task",
    "TaskList",
    "TaskStats",
    "Topic",
    "TopicInfo",
    "UnsavedMessage",
    "decode_json",
    "is_valid_kind",
    "tool_result",
]

#: Kinds of the seed schema followed by the kinds the ikigai program added later.
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


@dataclass(frozen=True, slots=True)
class Session:
    """One conversation session; active while ``ended_at`` is None (Model B)."""

    id: int
    started_at: datetime
    ended_at: datetime | None
    title: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Session:
        return cls(
            id=int(row["id"]),
            started_at=row["started_at"],
            ended_at=row["ended_at"],
            title=row["title"],
        )


@dataclass(frozen=True, slots=True)
class Message:
    """One stored event. ``id`` is its position in the stream: replay orders by it."""

    id: int
    session_id: int
    agent_uuid: str | None
    kind: str
    content: str | None
    data: Any
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Message:
        return cls(
            id=int(row["id"]),
            session_id=int(row["session_id"]),
            agent_uuid=row.get("agent_uuid"),
            kind=row["kind"],
            content=row["content"],
            data=row["data"],
            created_at=row["created_at"],
        )


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
    """The context an LLM sees after replay, the live mark stack, and the rewinds skipped since the
    newest clear (their target was no longer on the stack)."""

    messages: list[Message] = field(default_factory=list)
    marks: list[Mark] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    @property
    def message_ids(self) -> list[int]:
        """Ids of the context's messages, in order."""
        return [m.id for m in self.messages]


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A full-text search hit: the message, its rank and a snippet with matches in [brackets].

    ``rank`` is ``ts_rank_cd`` normalised by document length, in [0, 1), plus 1 for an
    exact-phrase match. ``horizon`` is the newest message id the search that found this hit
    looked at: ``search(..., before=hit)`` gives the next page and looks no further (see
    ``ikigai_store.search``)."""

    message: Message
    rank: float
    snippet: str
    horizon: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any], horizon: int = 0) -> SearchHit:
        return cls(
            message=Message.from_row(row),
            rank=float(row["rank"]),
            snippet=row["snippet"],
            horizon=horizon,
        )


AGENT_STATUSES: frozenset[str] = frozenset({"running", "dead", "reaped"})


@dataclass(frozen=True, slots=True)
class Agent:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Agent:
        return cls(
            uuid=row["uuid"],
            session_id=int(row["session_id"]),
            name=row["name"],
            parent_uuid=row["parent_uuid"],
            fork_message_id=int(row["fork_message_id"]),
            status=row["status"],
            created_at=row["created_at"],
            ended_at=row["ended_at"],
            provider=row["provider"],
            model=row["model"],
            thinking_level=row["thinking_level"],
            idle=bool(row["idle"]),
        )


@dataclass(frozen=True, slots=True)
class ReplayRange:
    """A slice of one agent's own events: ``start_id < id <= end_id`` (no upper bound if None)."""

    agent_uuid: str
    start_id: int
    end_id: int | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ReplayRange:
        end = row["end_id"]
        return cls(
            agent_uuid=row["agent_uuid"],
            start_id=int(row["start_id"]),
            end_id=None if end is None else int(end),
        )


# ---------------------------------------------------------------- identities and mail

#: A recipient's states of a mail (see ``Store.mail.set_state`` for the allowed moves).
MAIL_STATES: tuple[str, ...] = ("unread", "read", "starred", "snoozed", "archived", "trash")
#: Priorities of a mail, most pressing first.
PRIORITIES: tuple[str, ...] = ("urgent", "normal", "low")


@dataclass(frozen=True, slots=True)
class Identity:
    """A named, long-lived participant (a person, an agent instance); never deleted, only
    retired. ``agent_uuid`` binds it to one runtime agent when set."""

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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Identity:
        return cls(
            id=int(row["id"]),
            name=row["name"],
            project_key=row["project_key"],
            git_branch=row["git_branch"],
            purpose=row["purpose"],
            working_dir=row["working_dir"],
            hostname=row["hostname"],
            agent_uuid=row["agent_uuid"],
            created_at=row["created_at"],
            last_active_at=row["last_active_at"],
            retired_at=row["retired_at"],
        )


@dataclass(frozen=True, slots=True)
class IdentityStatus:
    """An identity, its unread count and ``status``: ``active`` (seen in the last 5 minutes),
    ``idle`` (in the last 30) or ``offline``."""

    identity: Identity
    unread: int
    status: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> IdentityStatus:
        return cls(Identity.from_row(row), int(row["unread"]), row["status"])


@dataclass(frozen=True, slots=True)
class Mail:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Mail:
        parent = row["parent_id"]
        offset = row.get("log_offset")
        return cls(
            id=int(row["id"]),
            thread_id=row["thread_id"],
            parent_id=None if parent is None else int(parent),
            sender=row["sender"],
            to=tuple(row["recipients"] or ()),
            subject=row["subject"],
            body=row["body"],
            priority=row["priority"],
            deadline_at=row["deadline_at"],
            attachments=row["attachments"],
            metadata=row["metadata"],
            idempotency_key=row["idempotency_key"],
            deleted_by_sender=bool(row["deleted_by_sender"]),
            created_at=row["created_at"],
            topic=row.get("topic"),
            log_offset=None if offset is None else int(offset),
        )


@dataclass(frozen=True, slots=True)
class InboxItem:
    """A mail as one recipient holds it. A snooze that has passed reads as ``unread`` (with
    ``snoozed_until`` None), exactly as if ``wake_snoozed()`` had run."""

    mail: Mail
    state: str
    read_at: datetime | None
    acked_at: datetime | None
    snoozed_until: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> InboxItem:
        return cls(
            mail=Mail.from_row(row),
            state=row["state"],
            read_at=row["read_at"],
            acked_at=row["acked_at"],
            snoozed_until=row["snoozed_until"],
        )


@dataclass(frozen=True, slots=True)
class MailCounts:
    """One identity's mailbox counts (``unread`` includes passed snoozes; ``snoozed`` only
    sleeping ones)."""

    unread: int
    urgent_unread: int
    starred: int
    snoozed: int
    archived: int
    trash: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MailCounts:
        return cls(**{f: int(row[f]) for f in cls.__dataclass_fields__})


@dataclass(frozen=True, slots=True)
class MailHit:
    """A mail search hit: the mail, its rank (a subject match weighs more than a body match;
    otherwise as ``SearchHit.rank``), a snippet, and the ``horizon`` (newest mail id) of its
    search, for ``mail.search(..., before=hit)``."""

    mail: Mail
    rank: float
    snippet: str
    horizon: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any], horizon: int = 0) -> MailHit:
        return cls(
            mail=Mail.from_row(row),
            rank=float(row["rank"]),
            snippet=row["snippet"],
            horizon=horizon,
        )


# ---------------------------------------------------------------- topics and queues

#: Kinds of topic: a broadcast log every subscriber reads, or a queue whose messages are each
#: processed by one subscriber.
TOPIC_KINDS: tuple[str, ...] = ("broadcast", "queue")


@dataclass(frozen=True, slots=True)
class Topic:
    """A named log of mail. ``retention`` is how long its mail is kept (see
    ``apply_retention``); ``max_attempts`` how often a queue message may be claimed."""

    id: int
    name: str
    kind: str
    retention: timedelta
    max_attempts: int
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Topic:
        return cls(
            id=int(row["id"]),
            name=row["name"],
            kind=row["kind"],
            retention=row["retention"],
            max_attempts=int(row["max_attempts"]),
            created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class TopicInfo:
    """A topic with its subscriber count, retained message count and last offset (0: none)."""

    topic: Topic
    subscribers: int
    messages: int
    last_offset: int

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TopicInfo:
        return cls(
            Topic.from_row(row),
            int(row["subscribers"]),
            int(row["messages"]),
            int(row["last_offset"]),
        )


@dataclass(frozen=True, slots=True)
class Poll:
    """What ``poll`` found: the unread inbox, and for each subscribed broadcast topic the mail
    after the stored offset (``topics``) and that stored offset (``offsets``)."""

    inbox: list[InboxItem]
    topics: dict[str, list[Mail]]
    offsets: dict[str, int]


@dataclass(frozen=True, slots=True)
class Claim:
    """A queue message held under a lease. ``token`` identifies this claim: ``complete``,
    ``release`` and ``extend`` need it, so a holder whose lease was taken over cannot act."""

    mail: Mail
    attempt: int
    lease_until: datetime
    token: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Claim:
        return cls(
            mail=Mail.from_row(row),
            attempt=int(row["attempts"]),
            lease_until=row["lease_until"],
            token=row["token"],
        )


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A queue message that used all its attempts; ``requeue`` makes it claimable again."""

    mail: Mail
    attempts: int
    last_error: str | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> DeadLetter:
        return cls(Mail.from_row(row), int(row["attempts"]), row["last_error"])


#: What the offline outbox can hold: the store call each operation is delivered with.
OUTBOX_OPERATIONS = ("send", "reply", "publish", "heartbeat")

#: States of an outbox operation (``pending_operations.status``).
OUTBOX_STATUSES = ("pending", "delivering", "delivered", "failed", "expired")


@dataclass(frozen=True, slots=True)
class PendingOperation:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PendingOperation:
        def when(seconds: float) -> datetime:
            return datetime.fromtimestamp(seconds, UTC)

        return cls(
            idempotency_key=row["idempotency_key"],
            operation=row["operation"],
            payload=json.loads(row["payload"]),
            sender=row["sender"],
            status=row["status"],
            attempts=int(row["attempts"]),
            last_error=row["last_error"],
            created_at=when(row["created_at"]),
            expires_at=when(row["expires_at"]),
            changed_at=when(row["changed_at"]),
            mail_id=row["mail_id"],
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
class TaskList:
    """A list of tasks (e.g. one Claude Code task list), identified by its public ``list_id``
    and owned by an identity; ``watch_path`` is where its source lives (for a watcher), and
    ``last_synced_at`` when ``sync_list`` last mirrored it (None: never)."""

    id: int
    list_id: str
    owner: str
    watch_path: str | None
    created_at: datetime
    last_synced_at: datetime | None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TaskList:
        return cls(
            id=int(row["id"]),
            list_id=row["list_id"],
            owner=row["owner"],
            watch_path=row["watch_path"],
            created_at=row["created_at"],
            last_synced_at=row["last_synced_at"],
        )


@dataclass(frozen=True, slots=True)
class Task:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Task:
        return cls(
            id=int(row["id"]),
            list_id=row["list_id"],
            external_id=row["external_id"],
            subject=row["subject"],
            description=row["description"],
            active_form=row["active_form"],
            metadata=row["metadata"],
            status=row["status"],
            owner=row["owner"],
            blocked_by=tuple(row["blocked_by"]),
            blocks=tuple(row["blocks"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            started_at=row["started_at"],
            completed_at=row["completed_at"],
        )


@dataclass(frozen=True, slots=True)
class TaskStats:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> TaskStats:
        return cls(**{name: int(row[name]) for name in cls.__dataclass_fields__})


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
class Activity:
    """One entry of the activity feed: what ``identity`` did. ``id`` is its order (the feed
    is newest first by id); ``metadata`` is a JSON object or None."""

    id: int
    identity: str
    type: str
    description: str
    metadata: Any
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Activity:
        return cls(
            id=int(row["id"]),
            identity=row["identity"],
            type=row["type"],
            description=row["description"],
            metadata=row["metadata"],
            created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class AgentSummary:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> AgentSummary:
        cost = row["cost_usd"]
        return cls(
            id=int(row["id"]),
            identity=row["identity"],
            summary=row["summary"],
            delta=row["delta"],
            transcript_hash=row["transcript_hash"],
            cost_usd=None if cost is None else float(cost),
            created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class ContextSummary:
    """A runtime agent's summary of the messages ``start_msg_id``..``end_msg_id`` (both
    included) of its replayable history, and its size in tokens."""

    id: int
    agent_uuid: str
    summary: str
    start_msg_id: int
    end_msg_id: int
    token_count: int
    created_at: datetime

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ContextSummary:
        return cls(
            id=int(row["id"]),
            agent_uuid=row["agent_uuid"],
            summary=row["summary"],
            start_msg_id=int(row["start_msg_id"]),
            end_msg_id=int(row["end_msg_id"]),
            token_count=int(row["token_count"]),
            created_at=row["created_at"],
        )


@dataclass(frozen=True, slots=True)
class Lease:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Lease:
        return cls(
            id=int(row["id"]),
            resource=row["resource"],
            holder=row["holder"],
            exclusive=bool(row["exclusive"]),
            token=row["token"],
            acquired_at=row["acquired_at"],
            expires_at=row["expires_at"],
        )


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
class Review:
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

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of ``review_id`` (unique: ``resolve_prefix`` takes it)."""
        return self.review_id[:8]

    @property
    def terminal(self) -> bool:
        """True when the review is approved, rejected or cancelled (no event leaves these)."""
        return self.state in REVIEW_TERMINAL_STATES

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Review:
        pr = row["pr_number"]
        return cls(
            id=int(row["id"]),
            review_id=str(row["review_id"]),
            thread_id=row["thread_id"],
            requester=row["requester"],
            reviewers=tuple(row["reviewers"]),
            pr_number=None if pr is None else int(pr),
            branch=row["branch"],
            base_branch=row["base_branch"],
            commit_sha=row["commit_sha"],
            repo_path=row["repo_path"],
            remote_url=row["remote_url"],
            review_type=row["review_type"],
            priority=row["priority"],
            state=row["state"],
            iterations=int(row["iterations"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            completed_at=row["completed_at"],
        )


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class ReviewIssue:
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

    @classmethod
    def from_row(cls, row: Mapping[str, Any], *, prefix: str = "") -> ReviewIssue:
        """From an issue row; ``prefix="issue_"`` reads an iteration row joined with its
        issues (``issue_id``; the review, iteration and time are the iteration's)."""
        return cls(
            id=int(row[f"{prefix}id"]),
            review_id=str(row["review_id"]),
            iteration_num=int(row["iteration_num"]),
            issue_type=row["issue_type"],
            severity=row["severity"],
            title=row["title"],
            description=row["description"],
            file_path=row["file_path"],
            line_start=_int_or_none(row["line_start"]),
            line_end=_int_or_none(row["line_end"]),
            code_snippet=row["code_snippet"],
            suggestion=row["suggestion"],
            claude_md_ref=row["claude_md_ref"],
            status=row["status"],
            resolved_at=row["resolved_at"],
            resolved_in_iteration=_int_or_none(row["resolved_in_iteration"]),
            created_at=row["created_at"],
        )


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

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]]) -> ReviewIteration:
        """From the rows of one iteration joined with its issues (``issue_id`` None: none)."""
        row = rows[0]
        cost = row["cost_usd"]
        return cls(
            id=int(row["id"]),
            review_id=str(row["review_id"]),
            iteration_num=int(row["iteration_num"]),
            reviewer=row["reviewer"],
            reviewer_session_id=row["reviewer_session_id"],
            decision=row["decision"],
            summary=row["summary"],
            suggestions=row["suggestions"],
            files_reviewed=_int_or_none(row["files_reviewed"]),
            lines_analyzed=_int_or_none(row["lines_analyzed"]),
            duration_ms=_int_or_none(row["duration_ms"]),
            cost_usd=None if cost is None else float(cost),
            created_at=row["created_at"],
            issues=tuple(
                ReviewIssue.from_row(r, prefix="issue_") for r in rows if r["issue_id"] is not None
            ),
        )


@dataclass(frozen=True, slots=True)
class PlanReview:
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

    @property
    def short_id(self) -> str:
        """The first 8 hex digits of ``plan_review_id`` (unique, like the thread id)."""
        return self.plan_review_id[:8]

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> PlanReview:
        return cls(
            id=int(row["id"]),
            plan_review_id=str(row["plan_review_id"]),
            thread_id=row["thread_id"],
            mail_id=_int_or_none(row["mail_id"]),
            requester=row["requester"],
            reviewer=row["reviewer"],
            plan_path=row["plan_path"],
            title=row["title"],
            summary=row["summary"],
            state=row["state"],
            reviewer_comment=row["reviewer_comment"],
            reviewed_by=row["reviewed_by"],
            session_key=row["session_key"],
            revision=int(row["revision"]),
            created_at=row["created_at"],
            updated_at=row["updated_at"],
            reviewed_at=row["reviewed_at"],
        )
