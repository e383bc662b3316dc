"""Value types returned by the store, and the event-kind vocabulary.

Owns the frozen dataclasses callers receive and their ``from_row`` constructors (aiosql returns
untyped rows; conversion happens here, once). Invariants: a ``Message`` is an immutable copy of one
``messages`` row; ``data`` is the parsed JSON value (or None); ``VALID_KINDS`` is the closed set of
kinds ``Store.append`` accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = [
    "AGENT_STATUSES",
    "MAIL_STATES",
    "OUTBOX_OPERATIONS",
    "OUTBOX_STATUSES",
    "PRIORITIES",
    "TOPIC_KINDS",
    "VALID_KINDS",
    "Agent",
    "Claim",
    "DeadLetter",
    "DeepJSON",
    "DrainReport",
    "Identity",
    "IdentityStatus",
    "InboxItem",
    "Mail",
    "MailCounts",
    "MailHit",
    "Mark",
    "Message",
    "PendingOperation",
    "Poll",
    "Queued",
    "ReplayContext",
    "ReplayRange",
    "SearchHit",
    "Session",
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
    """A full-text search hit: the message, its ``ts_rank_cd`` rank and a highlighted snippet."""

    message: Message
    rank: float
    snippet: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> SearchHit:
        return cls(message=Message.from_row(row), rank=float(row["rank"]), snippet=row["snippet"])


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
    """A mail search hit: the mail, its rank (subject weighs more than body) and a snippet."""

    mail: Mail
    rank: float
    snippet: str

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MailHit:
        return cls(mail=Mail.from_row(row), rank=float(row["rank"]), snippet=row["snippet"])


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
