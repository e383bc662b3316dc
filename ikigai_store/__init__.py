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

from ._version import __version__

#: ``typing.TYPE_CHECKING`` without importing ``typing`` (7 ms; mypy reads this spelling too).
TYPE_CHECKING = False

if TYPE_CHECKING:
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
        NodeUnavailable,
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
    from .sql import aqueries, queries
    from .store import Store, open
    from .summaries import SummaryCalls
    from .tasks import TaskCalls
    from .topics import TopicCalls
    from .validate import MAX_CONTENT_BYTES, MAX_DATA_BYTES, MAX_JSON_DEPTH
    from .watch import WatchCalls

#: Every public name by the module it is defined in: imported on first use (PEP 562), so
#: ``import ikigai_store`` stays cheap for the hook and MCP thin clients (``service``).
_LAZY: dict[str, str] = {
    "ACTIVITY_TYPES": "models",
    "AGENT_STATUSES": "models",
    "Activity": "models",
    "ActivityCalls": "activities",
    "Agent": "models",
    "AgentSummary": "models",
    "AsyncStore": "aio",
    "Claim": "models",
    "Conflict": "errors",
    "ConnectError": "errors",
    "ConnectionLost": "errors",
    "ContextSummary": "models",
    "DatabaseError": "errors",
    "DatabaseUnavailable": "errors",
    "DeadLetter": "models",
    "DeepJSON": "models",
    "DrainReport": "models",
    "ExportSummary": "portability",
    "ISSUE_STATUSES": "models",
    "ISSUE_TYPES": "models",
    "Identity": "models",
    "IdentityCalls": "identities",
    "IdentityStatus": "models",
    "IkigaiStoreError": "errors",
    "ImportSummary": "portability",
    "InboxItem": "models",
    "InvalidArgument": "errors",
    "Lease": "models",
    "LeaseCalls": "leases",
    "MAIL_STATES": "models",
    "MAX_CONTENT_BYTES": "validate",
    "MAX_DATA_BYTES": "validate",
    "MAX_JSON_DEPTH": "validate",
    "MAX_SEARCH_LIMIT": "search",
    "Mail": "models",
    "MailCalls": "mail",
    "MailCounts": "models",
    "MailHit": "models",
    "Mark": "models",
    "Message": "models",
    "MigrationError": "errors",
    "NodeUnavailable": "errors",
    "NotFound": "errors",
    "Notice": "models",
    "OUTBOX_OPERATIONS": "models",
    "OUTBOX_STATUSES": "models",
    "Outbox": "outbox",
    "OutboxError": "errors",
    "OutboxFull": "errors",
    "PLAN_STATES": "models",
    "PRIORITIES": "models",
    "PendingOperation": "models",
    "PlanCalls": "plans",
    "PlanReview": "models",
    "Poll": "models",
    "PruneReport": "portability",
    "Queued": "models",
    "REVIEW_DECISIONS": "models",
    "REVIEW_EVENTS": "models",
    "REVIEW_STATES": "models",
    "REVIEW_TERMINAL_STATES": "models",
    "REVIEW_TYPES": "models",
    "ReplayContext": "models",
    "ReplayRange": "models",
    "Review": "models",
    "ReviewCalls": "reviews",
    "ReviewIssue": "models",
    "ReviewIteration": "models",
    "SEVERITIES": "models",
    "SearchHit": "models",
    "Seen": "models",
    "Session": "models",
    "Store": "store",
    "StoreClosed": "errors",
    "SummaryCalls": "summaries",
    "TASK_STATUSES": "models",
    "TOPIC_KINDS": "models",
    "Task": "models",
    "TaskCalls": "tasks",
    "TaskList": "models",
    "TaskStats": "models",
    "Topic": "models",
    "TopicCalls": "topics",
    "TopicInfo": "models",
    "UNSET": "agents",
    "UnsavedMessage": "models",
    "VALID_KINDS": "models",
    "Watch": "models",
    "WatchBatch": "models",
    "WatchCalls": "watch",
    "is_valid_kind": "models",
    "new_agent_uuid": "agents",
    "open": "store",
    "open_async": "aio",
    "queries": "sql",
    "tool_result": "models",
}


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
    "NodeUnavailable",
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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is not None:
        import importlib

        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value
        return value
    if name == "aqueries":  # loaded on first use (see ikigai_store.sql)
        from . import sql

        return sql.aqueries
    raise AttributeError(f"module 'ikigai_store' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
