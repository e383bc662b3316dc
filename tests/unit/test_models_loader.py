"""Every model's ``from_row`` (and ``ReviewIteration.from_rows``) builds exactly the expected value
from a dict row; no database.

Numbers arrive as strings, flags as strings, arrays as lists and UUIDs as ``uuid.UUID`` so that a
missing or wrong conversion changes the result; ``same`` compares values and their types, field
by field, nested models included.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ikigai_store.models import (
    Activity,
    Agent,
    AgentSummary,
    Claim,
    ContextSummary,
    DeadLetter,
    FromRow,
    Identity,
    IdentityStatus,
    InboxItem,
    Lease,
    Mail,
    MailCounts,
    MailHit,
    Message,
    PendingOperation,
    PlanReview,
    ReplayRange,
    Review,
    ReviewIssue,
    ReviewIteration,
    SearchHit,
    Session,
    Task,
    TaskList,
    TaskStats,
    Topic,
    TopicInfo,
    columns,
)

T1 = datetime(2025, 1, 1, tzinfo=UTC)
T2 = datetime(2025, 1, 2, tzinfo=UTC)
T3 = datetime(2025, 1, 3, tzinfo=UTC)
RID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def same(a: Any, b: Any) -> bool:
    """Equal, of the same type, and so for every field of a dataclass (recursively)."""
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        return all(
            same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        ) and bool(a == b)
    if isinstance(a, tuple | list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


MESSAGE_ROW: dict[str, Any] = {
    "id": "5",
    "session_id": "2",
    "agent_uuid": "a-1",
    "kind": "user",
    "content": "hello",
    "data": {"k": [1]},
    "created_at": T1,
}
MESSAGE = Message(5, 2, "a-1", "user", "hello", {"k": [1]}, T1)

MAIL_ROW: dict[str, Any] = {
    "id": "11",
    "thread_id": "t-1",
    "parent_id": "10",
    "sender": "ann",
    "recipients": ["bob", "cy"],
    "subject": "subj",
    "body": "text",
    "priority": "urgent",
    "deadline_at": T2,
    "attachments": [{"n": 1}],
    "metadata": {"m": 2},
    "idempotency_key": "key-1",
    "deleted_by_sender": "",
    "created_at": T1,
    "topic": "news",
    "log_offset": "4",
}
MAIL = Mail(
    11, "t-1", 10, "ann", ("bob", "cy"), "subj", "text", "urgent", T2, [{"n": 1}], {"m": 2},
    "key-1", False, T1, "news", 4,
)  # fmt: skip

IDENTITY_ROW: dict[str, Any] = {
    "id": "3",
    "name": "ann",
    "project_key": "pk",
    "git_branch": "main",
    "purpose": "p",
    "working_dir": "/w",
    "hostname": "h",
    "agent_uuid": None,
    "created_at": T1,
    "last_active_at": T2,
    "retired_at": None,
    "parent": "lead",
}
IDENTITY = Identity(3, "ann", "pk", "main", "p", "/w", "h", None, T1, T2, None, "lead")

TOPIC_ROW: dict[str, Any] = {
    "id": "8",
    "name": "news",
    "kind": "broadcast",
    "retention": timedelta(days=7),
    "max_attempts": "3",
    "created_at": T1,
    "searchable": False,
}
TOPIC = Topic(8, "news", "broadcast", timedelta(days=7), 3, T1, False)

ISSUE_ROW: dict[str, Any] = {
    "id": "21",
    "review_id": RID,
    "iteration_num": "2",
    "issue_type": "bug",
    "severity": "high",
    "title": "t",
    "description": "d",
    "file_path": "a.py",
    "line_start": "3",
    "line_end": None,
    "code_snippet": "x",
    "suggestion": None,
    "claude_md_ref": None,
    "status": "fixed",
    "resolved_at": T2,
    "resolved_in_iteration": "3",
    "created_at": T1,
}
ISSUE = ReviewIssue(
    21, str(RID), 2, "bug", "high", "t", "d", "a.py", 3, None, "x", None, None, "fixed", T2, 3, T1
)

ITERATION_ROW: dict[str, Any] = {
    "id": "30",
    "review_id": RID,
    "iteration_num": "2",
    "reviewer": "bob",
    "reviewer_session_id": None,
    "decision": "request_changes",
    "summary": "sum",
    "suggestions": ["s"],
    "files_reviewed": "4",
    "lines_analyzed": None,
    "duration_ms": "1200",
    "cost_usd": "0.5",
    "created_at": T3,
}
ITERATION = ReviewIteration(
    30, str(RID), 2, "bob", None, "request_changes", "sum", ["s"], 4, None, 1200, 0.5, T3
)

# (model, row, expected): one case per model whose from_row takes only the row.
CASES: list[tuple[type[Any], dict[str, Any], Any]] = [
    (
        Session,
        {"id": "1", "started_at": T1, "ended_at": None, "title": "t"},
        Session(1, T1, None, "t"),
    ),
    (Message, MESSAGE_ROW, MESSAGE),
    (
        Agent,
        {
            "uuid": "u",
            "session_id": "2",
            "name": "n",
            "parent_uuid": None,
            "fork_message_id": "0",
            "status": "running",
            "created_at": T1,
            "ended_at": None,
            "provider": "p",
            "model": "m",
            "thinking_level": None,
            "idle": "yes",
        },
        Agent("u", 2, "n", None, 0, "running", T1, None, "p", "m", None, True),
    ),
    (
        ReplayRange,
        {"agent_uuid": "u", "start_id": "4", "end_id": "9"},
        ReplayRange("u", 4, 9),
    ),
    (
        ReplayRange,
        {"agent_uuid": "u", "start_id": "4", "end_id": None},
        ReplayRange("u", 4, None),
    ),
    (Identity, IDENTITY_ROW, IDENTITY),
    (
        IdentityStatus,
        {**IDENTITY_ROW, "unread": "6", "status": "idle"},
        IdentityStatus(IDENTITY, 6, "idle"),
    ),
    (Mail, MAIL_ROW, MAIL),
    (
        InboxItem,
        {**MAIL_ROW, "state": "read", "read_at": T2, "acked_at": None, "snoozed_until": T3},
        InboxItem(MAIL, "read", T2, None, T3),
    ),
    (
        MailCounts,
        {
            "unread": "1",
            "urgent_unread": "2",
            "starred": "3",
            "snoozed": "4",
            "archived": "5",
            "trash": "6",
        },
        MailCounts(1, 2, 3, 4, 5, 6),
    ),
    (Topic, TOPIC_ROW, TOPIC),
    (
        TopicInfo,
        {
            **TOPIC_ROW,
            "subscribers": "2",
            "messages": "40",
            "last_offset": "39",
            "available": "3",
            "claimed": "2",
            "dead": "1",
        },
        TopicInfo(TOPIC, 2, 40, 39, 3, 2, 1),
    ),
    (
        Claim,
        {**MAIL_ROW, "attempts": "2", "lease_until": T3, "token": "tok"},
        Claim(MAIL, 2, T3, "tok"),
    ),
    (
        DeadLetter,
        {**MAIL_ROW, "attempts": "5", "last_error": "boom"},
        DeadLetter(MAIL, 5, "boom"),
    ),
    (
        PendingOperation,
        {
            "idempotency_key": "k",
            "operation": "send",
            "payload": json.dumps({"to": ["bob"]}),
            "sender": "ann",
            "status": "pending",
            "attempts": "1",
            "last_error": None,
            "created_at": T1.timestamp(),
            "expires_at": T3.timestamp(),
            "changed_at": T2.timestamp(),
            "mail_id": 12,
        },
        PendingOperation("k", "send", {"to": ["bob"]}, "ann", "pending", 1, None, T1, T3, T2, 12),
    ),
    (
        TaskList,
        {
            "id": "2",
            "list_id": "L",
            "owner": "ann",
            "watch_path": None,
            "created_at": T1,
            "last_synced_at": T2,
        },
        TaskList(2, "L", "ann", None, T1, T2),
    ),
    (
        Task,
        {
            "id": "9",
            "list_id": "L",
            "external_id": "7",
            "subject": "s",
            "description": None,
            "active_form": "doing",
            "metadata": {"a": 1},
            "status": "pending",
            "owner": None,
            "blocked_by": ["1", "2"],
            "blocks": [],
            "created_at": T1,
            "updated_at": T2,
            "started_at": None,
            "completed_at": None,
        },
        Task(
            id=9,
            list_id="L",
            external_id="7",
            subject="s",
            description=None,
            active_form="doing",
            metadata={"a": 1},
            status="pending",
            owner=None,
            blocked_by=("1", "2"),
            blocks=(),
            created_at=T1,
            updated_at=T2,
            started_at=None,
            completed_at=None,
        ),
    ),
    (
        TaskStats,
        {
            "total": "7",
            "pending": "1",
            "in_progress": "2",
            "completed": "3",
            "deleted": "1",
            "available": "1",
            "blocked": "0",
        },
        TaskStats(7, 1, 2, 3, 1, 1, 0),
    ),
    (
        Activity,
        {
            "id": "4",
            "identity": "ann",
            "type": "commit",
            "description": "d",
            "metadata": None,
            "created_at": T1,
        },
        Activity(4, "ann", "commit", "d", None, T1),
    ),
    (
        AgentSummary,
        {
            "id": "4",
            "identity": "ann",
            "summary": "s",
            "delta": None,
            "transcript_hash": "h",
            "cost_usd": "0.25",
            "created_at": T1,
        },
        AgentSummary(4, "ann", "s", None, "h", 0.25, T1),
    ),
    (
        AgentSummary,
        {
            "id": "4",
            "identity": "ann",
            "summary": "s",
            "delta": "d",
            "transcript_hash": None,
            "cost_usd": None,
            "created_at": T1,
        },
        AgentSummary(4, "ann", "s", "d", None, None, T1),
    ),
    (
        ContextSummary,
        {
            "id": "4",
            "agent_uuid": "u",
            "summary": "s",
            "start_msg_id": "10",
            "end_msg_id": "20",
            "token_count": "300",
            "created_at": T1,
        },
        ContextSummary(4, "u", "s", 10, 20, 300, T1),
    ),
    (
        Lease,
        {
            "id": "4",
            "resource": "r",
            "holder": "ann",
            "exclusive": "",
            "token": "tok",
            "acquired_at": T1,
            "expires_at": T2,
        },
        Lease(4, "r", "ann", False, "tok", T1, T2),
    ),
    (
        Review,
        {
            "id": "6",
            "review_id": RID,
            "thread_id": "review-12345678",
            "requester": "ann",
            "reviewers": ["bob"],
            "pr_number": "42",
            "branch": "b",
            "base_branch": "main",
            "commit_sha": None,
            "repo_path": "/r",
            "remote_url": None,
            "review_type": "full",
            "priority": "normal",
            "state": "new",
            "iterations": "0",
            "created_at": T1,
            "updated_at": T2,
            "completed_at": None,
        },
        Review(
            id=6,
            review_id=str(RID),
            thread_id="review-12345678",
            requester="ann",
            reviewers=("bob",),
            pr_number=42,
            branch="b",
            base_branch="main",
            commit_sha=None,
            repo_path="/r",
            remote_url=None,
            review_type="full",
            priority="normal",
            state="new",
            iterations=0,
            created_at=T1,
            updated_at=T2,
            completed_at=None,
        ),
    ),
    (ReviewIssue, ISSUE_ROW, ISSUE),
    (
        PlanReview,
        {
            "id": "7",
            "plan_review_id": RID,
            "thread_id": "plan-12345678",
            "mail_id": "15",
            "requester": "ann",
            "reviewer": "bob",
            "plan_path": "p.md",
            "title": "t",
            "summary": "s",
            "state": "pending",
            "reviewer_comment": None,
            "reviewed_by": None,
            "session_key": "sk",
            "revision": "2",
            "created_at": T1,
            "updated_at": T2,
            "reviewed_at": None,
        },
        PlanReview(
            id=7,
            plan_review_id=str(RID),
            thread_id="plan-12345678",
            mail_id=15,
            requester="ann",
            reviewer="bob",
            plan_path="p.md",
            title="t",
            summary="s",
            state="pending",
            reviewer_comment=None,
            reviewed_by=None,
            session_key="sk",
            revision=2,
            created_at=T1,
            updated_at=T2,
            reviewed_at=None,
        ),
    ),
]


@pytest.mark.parametrize(
    ("model", "row", "expected"),
    CASES,
    ids=[f"{i}-{case[0].__name__}" for i, case in enumerate(CASES)],
)
def test_from_row_builds_the_expected_model(
    model: type[Any], row: dict[str, Any], expected: Any
) -> None:
    """Each model's from_row gives exactly the expected value (conversions, renames, nesting)."""
    assert same(model.from_row(row), expected)


def test_from_row_reads_optional_columns_as_none() -> None:
    """Absent agent_uuid, topic and log_offset columns read as None, NULL recipients as ()."""
    message_row = {k: v for k, v in MESSAGE_ROW.items() if k != "agent_uuid"}
    assert same(Message.from_row(message_row), dataclasses.replace(MESSAGE, agent_uuid=None))
    mail_row = {
        **{k: v for k, v in MAIL_ROW.items() if k not in ("topic", "log_offset")},
        "recipients": None,
        "parent_id": None,
    }
    expected = dataclasses.replace(MAIL, to=(), parent_id=None, topic=None, log_offset=None)
    assert same(Mail.from_row(mail_row), expected)


def test_from_row_of_a_hit_takes_its_horizon() -> None:
    """A hit reads its model, rank and snippet from the row and its horizon from the caller."""
    row = {**MESSAGE_ROW, "rank": "1.5", "snippet": "[hello]"}
    assert same(SearchHit.from_row(row, 99), SearchHit(MESSAGE, 1.5, "[hello]", 99))
    assert same(SearchHit.from_row(row), SearchHit(MESSAGE, 1.5, "[hello]", 0))
    row = {**MAIL_ROW, "rank": "2", "snippet": "[subj]"}
    assert same(MailHit.from_row(row, 12), MailHit(MAIL, 2.0, "[subj]", 12))
    assert same(MailHit.from_row(row), MailHit(MAIL, 2.0, "[subj]", 0))


def test_review_issue_from_a_joined_row_reads_the_prefixed_id() -> None:
    """prefix="issue_" takes the issue's id from issue_id and everything else unprefixed."""
    row = {**ISSUE_ROW, "id": "30", "issue_id": "21"}
    assert same(ReviewIssue.from_row(row, prefix="issue_"), ISSUE)
    assert same(ReviewIssue.from_row(row), dataclasses.replace(ISSUE, id=30))


def test_review_iteration_from_rows_collects_its_issues() -> None:
    """from_rows reads the iteration from rows[0] and one issue per row with an issue_id."""
    first = {**ISSUE_ROW, **ITERATION_ROW, "issue_id": "21"}
    rows = [first, {**first, "issue_id": "22", "title": "t2", "line_start": None}]
    expected_issues = (
        dataclasses.replace(ISSUE, created_at=T3),
        dataclasses.replace(ISSUE, id=22, title="t2", line_start=None, created_at=T3),
    )
    assert same(
        ReviewIteration.from_rows(rows), dataclasses.replace(ITERATION, issues=expected_issues)
    )
    lone = [{**ITERATION_ROW, "issue_id": None}]
    assert same(ReviewIteration.from_rows(lone), ITERATION)


def test_from_row_refuses_a_row_missing_a_column() -> None:
    """A row without a required column raises KeyError naming it (no silent default)."""
    row = {k: v for k, v in MAIL_ROW.items() if k != "subject"}
    with pytest.raises(KeyError, match="subject"):
        Mail.from_row(row)


def test_loader_refuses_a_columns_entry_that_is_not_a_field() -> None:
    """A misspelt _columns key is a TypeError naming it, not a silently unconverted field."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Misspelt(FromRow):
        id: int
        _columns = columns(idd=int)

    with pytest.raises(TypeError, match="idd"):
        Misspelt.from_row({"id": "1"})


def test_loader_refuses_a_row_field_after_a_passed_one() -> None:
    """Passed fields (None in _columns) come last: the loader appends them positionally."""

    @dataclasses.dataclass(frozen=True, slots=True)
    class Misordered(FromRow):
        horizon: int
        id: int
        _columns = columns(horizon=None)

    with pytest.raises(TypeError, match=r"Misordered\.id"):
        Misordered.from_row({"id": "1"})


def test_models_keep_their_shape() -> None:
    """FromRow adds no instance __dict__ and no pseudo-field to __dataclass_fields__."""
    assert not hasattr(Message.from_row(MESSAGE_ROW), "__dict__")
    assert not hasattr(Mail.from_row(MAIL_ROW), "__dict__")
    models: list[type[Any]] = [case[0] for case in CASES]
    models += [SearchHit, MailHit, ReviewIteration]
    for model in models:
        names = [f.name for f in dataclasses.fields(model)]
        assert list(model.__dataclass_fields__) == names, model
