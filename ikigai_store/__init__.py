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

from typing import TYPE_CHECKING

from .activities import ActivityCalls
from .agents import UNSET, new_agent_uuid
from .aio import AsyncStore, open_async
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
from .identities import IdentityCalls
from .leases import LeaseCalls
from .mail import MailCalls
from .models import (
    ACTIVITY_TYPES,
    AGENT_STATUSES,
    ISSUE_STATUSES,
    ISSUE_TYPES,
    MAIL_STATES,
    OUTBOX_OPERATIONS,
    OUTBOX_STATUSES,
    PLAN_STATES,
    PRIORITIES,
    REVIEW_DECISIONS,
    REVIEW_EVENTS,
    REVIEW_STATES,
    REVIEW_TERMINAL_STATES,
    REVIEW_TYPES,
    SEVERITIES,
    TASK_STATUSES,
    TOPIC_KINDS,
    VALID_KINDS,
    Activity,
    Agent,
    AgentSummary,
    Claim,
    ContextSummary,
    DeadLetter,
    DeepJSON,
    DrainReport,
    Identity,
    IdentityStatus,
    InboxItem,
    Lease,
    Mail,
    MailCounts,
    MailHit,
    Mark,
    Message,
    Notice,
    PendingOperation,
    PlanReview,
    Poll,
    Queued,
    ReplayContext,
    ReplayRange,
    Review,
    ReviewIssue,
    ReviewIteration,
    SearchHit,
    Seen,
    Session,
    Task,
    TaskList,
    TaskStats,
    Topic,
    TopicInfo,
    UnsavedMessage,
    Watch,
    WatchBatch,
    is_valid_kind,
    tool_result,
)
from .outbox import Outbox
from .plans import PlanCalls
from .portability import ExportSummary, ImportSummary, PruneReport
from .reviews import ReviewCalls
from .search import MAX_SEARCH_LIMIT
from .sql import queries
from .store import Store, open
from .summaries import SummaryCalls
from .tasks import TaskCalls
from .topics import TopicCalls
from .validate import MAX_CONTENT_BYTES, MAX_DATA_BYTES, MAX_JSON_DEPTH
from .watch import WatchCalls

if TYPE_CHECKING:  # loaded on first use (module __getattr__, below)
    from .sql import aqueries

__version__ = "0.7.0"

__all__ = [
    "ACTIVITY_TYPES",
    "AGENT_STATUSES",
    "ISSUE_STATUSES",
    "ISSUE_TYPES",
    "MAIL_STATES",
    "MAX_CONTENT_BYTES",
    "MAX_DATA_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_SEARCH_LIMIT",
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
    "UNSET",
    "VALID_KINDS",
    "Activity",
    "ActivityCalls",
    "Agent",
    "AgentSummary",
    "AsyncStore",
    "Claim",
    "Conflict",
    "ConnectError",
    "ConnectionLost",
    "ContextSummary",
    "DatabaseError",
    "DatabaseUnavailable",
    "DeadLetter",
    "DeepJSON",
    "DrainReport",
    "ExportSummary",
    "Identity",
    "IdentityCalls",
    "IdentityStatus",
    "IkigaiStoreError",
    "ImportSummary",
    "InboxItem",
    "InvalidArgument",
    "Lease",
    "LeaseCalls",
    "Mail",
    "MailCalls",
    "MailCounts",
    "MailHit",
    "Mark",
    "Message",
    "MigrationError",
    "NotFound",
    "Notice",
    "Outbox",
    "OutboxError",
    "OutboxFull",
    "PendingOperation",
    "PlanCalls",
    "PlanReview",
    "Poll",
    "PruneReport",
    "Queued",
    "ReplayContext",
    "ReplayRange",
    "Review",
    "ReviewCalls",
    "ReviewIssue",
    "ReviewIteration",
    "SearchHit",
    "Seen",
    "Session",
    "Store",
    "StoreClosed",
    "SummaryCalls",
    "Task",
    "TaskCalls",
    "TaskList",
    "TaskStats",
    "Topic",
    "TopicCalls",
    "TopicInfo",
    "UnsavedMessage",
    "Watch",
    "WatchBatch",
    "WatchCalls",
    "__version__",
    "aqueries",
    "is_valid_kind",
    "new_agent_uuid",
    "open",
    "open_async",
    "queries",
    "tool_result",
]

#: Names of 0.5 that 0.6 replaced: the async namespaces are the same generic classes as the
#: sync ones (``MailCalls[AsyncFace]``).
_RENAMED = {
    f"Async{name}Calls": f"{name}Calls"
    for name in (
        "Activity",
        "Identity",
        "Lease",
        "Mail",
        "Plan",
        "Review",
        "Summary",
        "Task",
        "Topic",
    )
}


def __getattr__(name: str) -> object:
    if name == "aqueries":  # loaded on first use (see ikigai_store.sql)
        from . import sql

        return sql.aqueries
    if name in _RENAMED:
        import warnings

        new = _RENAMED[name]
        warnings.warn(
            f"ikigai_store.{name} is deprecated; use ikigai_store.{new} (one class for both faces)",
            DeprecationWarning,
            stacklevel=2,
        )
        return globals()[new]
    raise AttributeError(f"module 'ikigai_store' has no attribute {name!r}")
