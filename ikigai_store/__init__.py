"""ikigai_store: the PostgreSQL persistence layer for LLM coding agents.

Sessions that persist across launches, an append-only event stream, replay that rebuilds the exact
context (honouring clear, mark and rewind), full-text search, yoyo migrations, and an embedded
PostgreSQL that starts itself when no database URL is configured. Agents coordinate through
identities, mail, topics and work queues; an ``Outbox`` keeps their mail while offline.

    import ikigai_store as ik
    with ik.open() as store:
        sid = store.get_active_session() or store.create_session()
        store.append(sid, "user", "hello")
        ctx = store.replay_session(sid)
"""

from __future__ import annotations

from .aio import AsyncIdentityCalls, AsyncMailCalls, AsyncStore, AsyncTopicCalls, open_async
from .errors import (
    Conflict,
    ConnectError,
    ConnectionLost,
    DatabaseError,
    DatabaseUnavailable,
    IkigaiStoreError,
    InvalidArgument,
    MigrationError,
    NotFound,
    OutboxError,
    OutboxFull,
    StoreClosed,
)
from .models import (
    AGENT_STATUSES,
    MAIL_STATES,
    OUTBOX_OPERATIONS,
    OUTBOX_STATUSES,
    PRIORITIES,
    TOPIC_KINDS,
    VALID_KINDS,
    Agent,
    Claim,
    DeadLetter,
    DeepJSON,
    DrainReport,
    Identity,
    IdentityStatus,
    InboxItem,
    Mail,
    MailCounts,
    MailHit,
    Mark,
    Message,
    PendingOperation,
    Poll,
    Queued,
    ReplayContext,
    ReplayRange,
    SearchHit,
    Session,
    Topic,
    TopicInfo,
    UnsavedMessage,
    is_valid_kind,
    tool_result,
)
from .outbox import Outbox
from .sql import aqueries, queries
from .store import (
    MAX_SEARCH_LIMIT,
    UNSET,
    IdentityCalls,
    MailCalls,
    Store,
    TopicCalls,
    new_agent_uuid,
    open,
)
from .validate import MAX_CONTENT_BYTES, MAX_DATA_BYTES, MAX_JSON_DEPTH

__version__ = "0.4.0"

__all__ = [
    "AGENT_STATUSES",
    "MAIL_STATES",
    "MAX_CONTENT_BYTES",
    "MAX_DATA_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_SEARCH_LIMIT",
    "OUTBOX_OPERATIONS",
    "OUTBOX_STATUSES",
    "PRIORITIES",
    "TOPIC_KINDS",
    "UNSET",
    "VALID_KINDS",
    "Agent",
    "AsyncIdentityCalls",
    "AsyncMailCalls",
    "AsyncStore",
    "AsyncTopicCalls",
    "Claim",
    "Conflict",
    "ConnectError",
    "ConnectionLost",
    "DatabaseError",
    "DatabaseUnavailable",
    "DeadLetter",
    "DeepJSON",
    "DrainReport",
    "Identity",
    "IdentityCalls",
    "IdentityStatus",
    "IkigaiStoreError",
    "InboxItem",
    "InvalidArgument",
    "Mail",
    "MailCalls",
    "MailCounts",
    "MailHit",
    "Mark",
    "Message",
    "MigrationError",
    "NotFound",
    "Outbox",
    "OutboxError",
    "OutboxFull",
    "PendingOperation",
    "Poll",
    "Queued",
    "ReplayContext",
    "ReplayRange",
    "SearchHit",
    "Session",
    "Store",
    "StoreClosed",
    "Topic",
    "TopicCalls",
    "TopicInfo",
    "UnsavedMessage",
    "__version__",
    "aqueries",
    "is_valid_kind",
    "new_agent_uuid",
    "open",
    "open_async",
    "queries",
    "tool_result",
]
