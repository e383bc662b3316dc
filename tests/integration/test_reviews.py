"""Code reviews: creation, the seed's state machine in SQL (every event from every state), the
mail and activity of each change, iterations and issues, prefixes, and refusals that write
nothing."""

from __future__ import annotations

import itertools
import re
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store import reviews as reviews_module
from tests.mailtools import Clock, rows
from tests.reference_reviews import SEED_TRANSITIONS

pytestmark = pytest.mark.db

#: The tables a review call may write (a refusal must leave every count as it was).
TABLES = ("reviews", "review_iterations", "review_issues", "mail", "mail_recipients", "activities")
#: Events that lead from new to each state.
PATHS = {
    "new": [],
    "pending_review": ["submit"],
    "under_review": ["submit", "start"],
    "changes_requested": ["submit", "start", "request_changes"],
    "re_review": ["submit", "start", "request_changes", "resubmit"],
    "approved": ["submit", "start", "approve"],
    "rejected": ["submit", "start", "reject"],
    "cancelled": ["cancel"],
}
BUG = {
    "issue_type": "bug",
    "severity": "high",
    "title": "off by one",
    "description": "The loop stops one short.",
    "file_path": "src/parse.c",
    "line_start": 120,
    "line_end": 124,
    "code_snippet": "for (i = 0; i < n - 1; i++)",
    "suggestion": "i < n",
    "claude_md_ref": "CLAUDE.md: loops",
}


def counts(store: Any) -> dict[str, int]:
    return {t: rows(store, t) for t in TABLES}


def activities(store: Any) -> list[dict[str, Any]]:
    with store._connection() as conn:
        return conn.execute(
            "SELECT i.name, a.type, a.description, a.metadata FROM activities AS a "
            "JOIN identities AS i ON i.id = a.identity_id ORDER BY a.id"
        ).fetchall()


@pytest.fixture
def team(ikigai_store: ik.Store) -> ik.Store:
    """alice (requester), bob and carol (reviewers), dave (someone else)."""
    for name in ("alice", "bob", "carol", "dave"):
        ikigai_store.identities.register(name)
    return ikigai_store


def make(store: Any, **kw: Any) -> ik.Review:
    return store.reviews.create("alice", reviewers=["bob", "carol"], branch="feature/x", **kw)


def drive(store: Any, review: ik.Review, state: str) -> ik.Review:
    for event in PATHS[state]:
        review = store.reviews.fire(review, event)
    assert review.state == state
    return review


# ---------------------------------------------------------------- creating and reading


def test_create_stores_everything_and_starts_new(team: ik.Store) -> None:
    """create returns a new review: uuid id, its thread, reviewers in order (once each), the
    fields given, defaults, no iterations, created = updated, not completed; nothing mailed."""
    made = team.reviews.create(
        "alice",
        reviewers=["carol", "bob", "carol"],
        branch="feature/x",
        commit_sha="abc123",
        repo_path="/src/repo",
        remote_url="git@example.com:repo.git",
        pr_number=42,
        review_type="architecture",
        priority="urgent",
    )
    assert str(uuid.UUID(made.review_id)) == made.review_id
    assert made.thread_id == "review-" + made.review_id[:8] == "review-" + made.short_id
    assert (made.requester, made.reviewers, made.state, made.iterations) == (
        "alice",
        ("carol", "bob"),
        "new",
        0,
    )
    assert (made.branch, made.base_branch, made.commit_sha, made.pr_number) == (
        "feature/x",
        "main",
        "abc123",
        42,
    )
    assert (made.review_type, made.priority, made.remote_url, made.repo_path) == (
        "architecture",
        "urgent",
        "git@example.com:repo.git",
        "/src/repo",
    )
    assert made.created_at == made.updated_at and made.completed_at is None
    assert not made.terminal
    assert team.reviews.get(made.review_id) == made
    assert team.reviews.get(uuid.UUID(made.review_id)) == made
    assert team.reviews.get(made) == made
    assert team.reviews.get(made.review_id.upper()) == made
    plain = team.reviews.create("alice", reviewers="bob")
    assert (plain.reviewers, plain.review_type, plain.priority, plain.branch) == (
        ("bob",),
        "full",
        "normal",
        None,
    )
    assert rows(team, "mail") == rows(team, "activities") == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"reviewers": []},
        {"reviewers": "bad name"},
        {"reviewers": ["bob"] * 101},
        {"reviewers": {"bob": 1}},
        {"reviewers": ["bob"], "review_type": "quick"},
        {"reviewers": ["bob"], "review_type": "Full"},
        {"reviewers": ["bob"], "priority": "high"},
        {"reviewers": ["bob"], "pr_number": 0},
        {"reviewers": ["bob"], "pr_number": True},
        {"reviewers": ["bob"], "branch": ""},
        {"reviewers": ["bob"], "base_branch": ""},
        {"reviewers": ["bob"], "commit_sha": "a\x00b"},
        {"reviewers": ["bob"], "repo_path": 7},
    ],
)
def test_create_refuses_bad_arguments(team: ik.Store, kwargs: dict[str, Any]) -> None:
    """Bad reviewers, types, priorities, numbers and texts: InvalidArgument, nothing written."""
    before = counts(team)
    with pytest.raises(ik.InvalidArgument):
        team.reviews.create("alice", **kwargs)
    assert counts(team) == before


def test_create_needs_existing_active_people(team: ik.Store) -> None:
    """An unknown requester or reviewer is NotFound naming it; a retired one InvalidArgument."""
    with pytest.raises(ik.NotFound, match="ghost"):
        team.reviews.create("ghost", reviewers=["bob"])
    with pytest.raises(ik.NotFound, match="'nobody'"):
        team.reviews.create("alice", reviewers=["bob", "nobody"])
    team.identities.retire("dave")
    with pytest.raises(ik.InvalidArgument, match="'dave' is retired"):
        team.reviews.create("alice", reviewers=["bob", "dave"])
    with pytest.raises(ik.InvalidArgument, match="'dave' is retired"):
        team.reviews.create("dave", reviewers=["bob"])
    assert rows(team, "reviews") == 0


def test_a_taken_thread_prefix_draws_another_id(
    team: ik.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two uuids sharing their first 8 hex digits would share a thread: the second create
    draws again, so every 8-digit prefix (and thread) names one review."""
    first = make(team)
    twin = uuid.UUID(first.review_id[:8] + "-0000-4000-8000-000000000000")
    fresh = uuid.UUID("abcdef01-0000-4000-8000-000000000000")
    draws = iter([twin, fresh])
    monkeypatch.setattr(reviews_module, "new_review_uuid", lambda: next(draws))
    second = make(team)
    assert second.review_id == str(fresh)
    assert len({first.thread_id, second.thread_id}) == 2
    monkeypatch.setattr(reviews_module, "new_review_uuid", lambda: twin)
    with pytest.raises(ik.Conflict, match="prefixes"):
        make(team)
    assert rows(team, "reviews") == 2


def test_list_active_and_pagination(team: ik.Store) -> None:
    """list is newest first with state/requester filters and keyset pages; active_reviews is
    every unfinished review, oldest first."""
    team.identities.register("erin")
    made = [make(team) for _ in range(4)]
    other = team.reviews.create("erin", reviewers="bob")
    drive(team, made[0], "approved")
    drive(team, made[1], "under_review")
    drive(team, made[2], "cancelled")
    assert [r.id for r in team.reviews.list()] == [r.id for r in [other, *made[::-1]]]
    assert [r.id for r in team.reviews.list(requester="erin")] == [other.id]
    assert [r.id for r in team.reviews.list(state="new")] == [other.id, made[3].id]
    page = team.reviews.list(limit=2)
    rest = team.reviews.list(limit=10, before=page[-1].id)
    assert [r.id for r in page + rest] == [r.id for r in team.reviews.list()]
    assert team.reviews.list(limit=10, before=page[-1]) == rest  # the Review itself
    assert [r.id for r in team.reviews.active()] == [made[1].id, made[3].id, other.id]
    assert team.reviews.list(requester="dave") == []
    with pytest.raises(ik.NotFound):
        team.reviews.list(requester="ghost")
    for bad in ({"state": "open"}, {"limit": 0}, {"before": -1}, {"requester": "a b"}):
        with pytest.raises(ik.InvalidArgument):
            team.reviews.list(**bad)


def test_resolve_prefix(team: ik.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unique prefix (4+ hex digits, any case, hyphens ignored) resolves; a shared one is
    InvalidArgument naming the count; none is NotFound; wildcards and junk are refused."""
    ids = [
        uuid.UUID("1a2b3c4d-1111-4000-8000-000000000000"),
        uuid.UUID("1a2b3c4e-2222-4000-8000-000000000000"),
        uuid.UUID("1a2b3c4f-3333-4000-8000-000000000000"),
    ]
    draws = iter(ids)
    monkeypatch.setattr(reviews_module, "new_review_uuid", lambda: next(draws))
    made = [make(team) for _ in ids]
    assert team.reviews.resolve_prefix("1a2b3c4d") == made[0]
    assert team.reviews.resolve_prefix("1A2B3C4E-2") == made[1]
    assert team.reviews.resolve_prefix(made[2].review_id) == made[2]
    with pytest.raises(ik.InvalidArgument, match="3 reviews"):
        team.reviews.resolve_prefix("1a2b")
    with pytest.raises(ik.InvalidArgument, match="3 reviews"):
        team.reviews.resolve_prefix("1a2b3c4")
    with pytest.raises(ik.NotFound, match="ffff"):
        team.reviews.resolve_prefix("ffff")
    for bad in ("1a2", "1a2%", "1a_b", "%%%%", "____", "zzzz", "1a2b 3c", "", "1" * 33, 1234):
        with pytest.raises(ik.InvalidArgument):
            team.reviews.resolve_prefix(bad)  # type: ignore[arg-type]


def test_bad_review_ids_and_unknown_reviews(team: ik.Store) -> None:
    """A malformed id is InvalidArgument; an unknown one NotFound, for reads and events."""
    missing = str(uuid.uuid4())
    for bad in ("1a2b3c4d", "not-a-uuid", 42, None):
        with pytest.raises(ik.InvalidArgument):
            team.reviews.get(bad)  # type: ignore[arg-type]
    for call in (
        lambda: team.reviews.get(missing),
        lambda: team.reviews.submit(missing),
        lambda: team.reviews.iterations(missing),
        lambda: team.reviews.issues(missing),
        lambda: team.reviews.open_issues(missing),
        lambda: team.reviews.record_iteration(missing, "bob", "comment", "x"),
    ):
        with pytest.raises(ik.NotFound, match=missing):
            call()
    assert counts(team) == dict.fromkeys(TABLES, 0)


# ---------------------------------------------------------------- the state machine


@pytest.mark.parametrize(("state", "event"), list(itertools.product(PATHS, ik.REVIEW_EVENTS)))
def test_every_event_from_every_state(team: ik.Store, state: str, event: str) -> None:
    """The seed's table, exactly: a legal event moves the state and writes one activity (and
    its mail, if anyone is to hear of it); an illegal one is InvalidArgument naming the state
    and the event, and writes nothing at all."""
    review = drive(team, make(team), state)
    before = counts(team)
    target = SEED_TRANSITIONS.get((state, event))
    if target is None:
        with pytest.raises(ik.InvalidArgument) as refused:
            team.reviews.fire(review, event)
        message = str(refused.value)
        assert f"review {review.short_id} is {state}" in message
        assert f"cannot {event}" in message
        assert ("(terminal)" in message) == (state in ik.REVIEW_TERMINAL_STATES)
        assert counts(team) == before
        assert team.reviews.get(review) == review
        return
    changed = team.reviews.fire(review, event)
    assert changed.state == target
    after = counts(team)
    assert after["activities"] == before["activities"] + 1
    mails = after["mail"] - before["mail"]
    assert mails == (0 if event == "start" or (event == "cancel" and state == "new") else 1)
    assert (changed.completed_at is not None) == (target in ik.REVIEW_TERMINAL_STATES)


def test_the_refusal_message(team: ik.Store) -> None:
    """The refusal says where the review is and what it allows."""
    review = drive(team, make(team), "approved")
    with pytest.raises(
        ik.InvalidArgument,
        match=re.escape(f"review {review.short_id} is approved (terminal); cannot start"),
    ):
        team.reviews.start(review)
    fresh = make(team)
    with pytest.raises(
        ik.InvalidArgument,
        match=re.escape(f"review {fresh.short_id} is new; cannot approve (from new: submit, "),
    ):
        team.reviews.approve(fresh)


def test_lifecycle_mail_activities_and_times(team: ik.Store) -> None:
    """Each change is announced on the review's thread by its actor, with its activity;
    updated_at follows every change, completed_at is set on approval."""
    clock = Clock(team)
    review = make(team, commit_sha="abc123", pr_number=7)
    assert review.created_at == clock.now
    clock.advance(minutes=1)
    review = team.reviews.submit(review)
    assert review.updated_at == clock.now and review.completed_at is None
    clock.advance(minutes=1)
    review = team.reviews.start(review, by="carol")
    clock.advance(minutes=1)
    review = team.reviews.request_changes(review, by="carol")
    clock.advance(minutes=1)
    review = team.reviews.resubmit(review)
    review = team.reviews.start(review)
    clock.advance(minutes=1)
    review = team.reviews.approve(review)
    assert (review.state, review.updated_at, review.completed_at) == (
        "approved",
        clock.now,
        clock.now,
    )
    thread = team.mail.thread(review.thread_id)
    assert [(m.sender, m.to) for m in thread] == [
        ("alice", ("bob", "carol")),
        ("carol", ("alice",)),
        ("alice", ("bob", "carol")),
        ("bob", ("alice",)),
    ]
    request, changes, again, approved = thread
    assert request.subject == "Review requested: feature/x"
    assert "branch: feature/x -> main" in request.body and "commit: abc123" in request.body
    assert "pull request: #7" in request.body and review.review_id in request.body
    assert changes.subject == "Changes requested: feature/x"
    assert again.subject == "Review again: feature/x"
    assert approved.subject == "Approved: feature/x"
    assert approved.metadata == {
        "review_id": review.review_id,
        "event": "approve",
        "state": "approved",
    }
    assert {m.priority for m in thread} == {"normal"}
    assert [(a["name"], a["type"]) for a in activities(team)] == [
        ("alice", "review_requested"),
        ("carol", "review_started"),
        ("carol", "review_completed"),
        ("alice", "review_requested"),
        ("bob", "review_started"),
        ("bob", "review_approved"),
    ]
    last = activities(team)[-1]
    assert last["metadata"] == {
        "review_id": review.review_id,
        "event": "approve",
        "from": "under_review",
        "to": "approved",
        "mail_id": approved.id,
    }
    assert last["description"] == f"approved review {review.short_id} (feature/x)"
    [item] = [i for i in team.mail.inbox("alice") if i.mail.id == approved.id]
    assert item.state == "unread"


def test_reject_and_cancel_audiences(team: ik.Store) -> None:
    """reject mails the requester (review_rejected); cancel mails everyone told so far except
    the actor, and nobody for a review that was never submitted."""
    rejected = drive(team, make(team), "rejected")
    [*_, last] = team.mail.thread(rejected.thread_id)
    assert (last.sender, last.to, last.subject) == ("bob", ("alice",), "Rejected: feature/x")
    assert activities(team)[-1]["type"] == "review_rejected"
    quiet = team.reviews.cancel(make(team))
    assert team.mail.thread(quiet.thread_id) == []
    assert activities(team)[-1]["metadata"]["mail_id"] is None
    loud = drive(team, make(team), "under_review")
    loud = team.reviews.cancel(loud, by="carol")
    [*_, bye] = team.mail.thread(loud.thread_id)
    assert (bye.sender, bye.to) == ("carol", ("alice", "bob"))
    assert "it was under_review" in bye.body
    assert activities(team)[-1]["type"] == "review_completed"


def test_actors(team: ik.Store) -> None:
    """by names the actor; it must exist (NotFound) and not be retired (InvalidArgument),
    checked before the state; the default reviewer actor is the first reviewer."""
    review = make(team)
    before = counts(team)
    with pytest.raises(ik.NotFound, match="ghost"):
        team.reviews.submit(review, by="ghost")
    with pytest.raises(ik.NotFound, match="ghost"):
        team.reviews.approve(review, by="ghost")  # unknown actor before the illegal state
    with pytest.raises(ik.InvalidArgument, match="by must be a name"):
        team.reviews.submit(review, by="not a name")
    team.identities.retire("dave")
    with pytest.raises(ik.InvalidArgument, match="'dave' is retired"):
        team.reviews.submit(review, by="dave")
    assert counts(team) == before
    team.reviews.submit(review, by=team.identities.get("carol"))
    assert activities(team)[-1]["name"] == "carol"
    team.identities.retire("bob")
    with pytest.raises(ik.InvalidArgument, match="'bob' is retired"):
        team.reviews.start(review)  # the default actor, bob, is retired
    assert team.reviews.start(review, by="carol").state == "under_review"


def test_a_retired_requester_is_not_mailed(team: ik.Store) -> None:
    """A decision still applies when the requester retired meanwhile; only the mail is left
    out (a retired identity receives nothing), the activity is written."""
    review = drive(team, make(team), "under_review")
    team.identities.retire("alice")
    before = counts(team)
    assert team.reviews.approve(review).state == "approved"
    after = counts(team)
    assert (after["mail"], after["activities"]) == (before["mail"], before["activities"] + 1)


def test_a_refusal_inside_a_transaction_leaves_it_usable(team: ik.Store) -> None:
    """Inside store.transaction() a refused event rolls back its savepoint only."""
    review = make(team)
    with team.transaction():
        with pytest.raises(ik.InvalidArgument):
            team.reviews.approve(review)
        assert team.reviews.submit(review).state == "pending_review"
    assert team.reviews.get(review).state == "pending_review"


def test_fire_checks_the_event(team: ik.Store) -> None:
    """An unknown event name is InvalidArgument before anything is read."""
    review = make(team)
    for bad in ("Submit", "approved", "", None):
        with pytest.raises(ik.InvalidArgument, match="event must be one of"):
            team.reviews.fire(review, bad)  # type: ignore[arg-type]


# ---------------------------------------------------------------- iterations


def test_iterations_number_and_apply_decisions(team: ik.Store) -> None:
    """Iterations count 1, 2, 3 across rounds; comment keeps the state, request_changes and
    approve apply their events in the same call; each mails the requester its summary and
    issues, with the activity of its decision."""
    clock = Clock(team)
    review = drive(team, make(team), "under_review")
    first = team.reviews.record_iteration(
        review,
        "bob",
        "comment",
        "Reading it.",
        issues=[BUG, {**BUG, "severity": "critical", "title": "crash", "line_end": None}],
        suggestions=[{"file": "src/parse.c", "text": "use size_t"}],
        files_reviewed=3,
        lines_analyzed=400,
        duration_ms=12_000,
        cost_usd=0.42,
        reviewer_session_id="sess-9",
    )
    assert (first.iteration_num, first.reviewer, first.decision) == (1, "bob", "comment")
    assert (first.files_reviewed, first.lines_analyzed, first.duration_ms, first.cost_usd) == (
        3,
        400,
        12_000,
        0.42,
    )
    assert first.suggestions == [{"file": "src/parse.c", "text": "use size_t"}]
    assert (first.reviewer_session_id, first.created_at) == ("sess-9", clock.now)
    assert [i.title for i in first.issues] == ["off by one", "crash"]
    bug = first.issues[0]
    assert (bug.file_path, bug.line_start, bug.line_end, bug.code_snippet, bug.suggestion) == (
        "src/parse.c",
        120,
        124,
        "for (i = 0; i < n - 1; i++)",
        "i < n",
    )
    assert (bug.claude_md_ref, bug.status, bug.iteration_num) == ("CLAUDE.md: loops", "open", 1)
    assert team.reviews.get(review).state == "under_review"
    second = team.reviews.record_iteration(review, "carol", "request_changes", "Fix the loop.")
    assert (second.iteration_num, second.issues, second.files_reviewed) == (2, (), None)
    assert team.reviews.get(review).state == "changes_requested"
    review = team.reviews.start(team.reviews.resubmit(review))
    third = team.reviews.record_iteration(review, "bob", "approve", "Good now.")
    done = team.reviews.get(review)
    assert (third.iteration_num, done.state, done.iterations) == (3, "approved", 3)
    assert done.completed_at is not None
    assert [it.iteration_num for it in team.reviews.iterations(review)] == [1, 2, 3]
    assert team.reviews.iterations(review)[0] == first
    mails = [m for m in team.mail.thread(review.thread_id) if m.sender != "alice"]
    assert [(m.sender, m.to, m.subject) for m in mails] == [
        ("bob", ("alice",), "Review comments: feature/x"),
        ("carol", ("alice",), "Changes requested: feature/x"),
        ("bob", ("alice",), "Approved: feature/x"),
    ]
    assert "Reading it." in mails[0].body and "2 issue(s): 1 critical, 1 high" in mails[0].body
    assert mails[0].body.index("crash") < mails[0].body.index("off by one")
    assert "- [high] bug: off by one (src/parse.c:120-124)" in mails[0].body
    assert mails[0].metadata == {
        "review_id": review.review_id,
        "iteration": 1,
        "decision": "comment",
        "state": "under_review",
    }
    kinds = [(a["name"], a["type"]) for a in activities(team) if "iteration" in a["metadata"]]
    assert kinds == [
        ("bob", "review_completed"),
        ("carol", "review_completed"),
        ("bob", "review_approved"),
    ]
    assert activities(team)[-1]["metadata"]["issues"] == 0


def test_reject_iteration(team: ik.Store) -> None:
    """A reject iteration rejects the review (Subtrate's CHECK had no reject)."""
    review = drive(team, make(team), "under_review")
    team.reviews.record_iteration(review, "bob", "reject", "Wrong approach.")
    assert team.reviews.get(review).state == "rejected"
    assert activities(team)[-1]["type"] == "review_rejected"


@pytest.mark.parametrize("state", [s for s in PATHS if s != "under_review"])
@pytest.mark.parametrize("decision", ik.REVIEW_DECISIONS)
def test_iterations_only_under_review(team: ik.Store, state: str, decision: str) -> None:
    """Outside under_review an iteration of any decision is InvalidArgument naming the state;
    nothing is written, the iteration and its issues included."""
    review = drive(team, make(team), state)
    before = counts(team)
    with pytest.raises(ik.InvalidArgument, match=f"is {state}"):
        team.reviews.record_iteration(review, "bob", decision, "x", issues=[BUG])
    assert counts(team) == before


def test_iteration_reviewer_must_exist(team: ik.Store) -> None:
    """The reviewer must exist (NotFound) and not be retired (InvalidArgument)."""
    review = drive(team, make(team), "under_review")
    before = counts(team)
    with pytest.raises(ik.NotFound, match="ghost"):
        team.reviews.record_iteration(review, "ghost", "approve", "x")
    team.identities.retire("dave")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        team.reviews.record_iteration(review, "dave", "approve", "x")
    assert counts(team) == before


BAD_ISSUES: list[Any] = [
    {**BUG, "issue_type": "typo"},
    {**BUG, "issue_type": "Bug"},
    {**BUG, "issue_type": "architecture"},
    {**BUG, "severity": "urgent"},
    {**BUG, "severity": "High"},
    {**BUG, "line_start": 0},
    {**BUG, "line_start": -3},
    {**BUG, "line_start": 10, "line_end": 9},
    {**BUG, "line_start": None},
    {**BUG, "line_start": 2**31},
    {**BUG, "line_start": True},
    {**BUG, "file_path": None},
    {**BUG, "colour": "red"},
    {k: v for k, v in BUG.items() if k != "title"},
    {k: v for k, v in BUG.items() if k != "description"},
    {**BUG, "title": ""},
    {**BUG, "title": "x" * 1001},
    {**BUG, "description": None},
    {**BUG, "suggestion": 5},
    {**BUG, "code_snippet": "a\x00b"},
    "a bug",
    ["issue_type", "bug"],
]


@pytest.mark.parametrize("bad", BAD_ISSUES)
def test_bad_issues_write_nothing(team: ik.Store, bad: Any) -> None:
    """Unknown keys and types (never mapped to other), bad severities and lines, missing or
    bad text: InvalidArgument, and neither the iteration nor any issue is written."""
    review = drive(team, make(team), "under_review")
    before = counts(team)
    with pytest.raises(ik.InvalidArgument):
        team.reviews.record_iteration(review, "bob", "approve", "x", issues=[BUG, bad])
    assert counts(team) == before
    assert team.reviews.get(review).state == "under_review"


@pytest.mark.parametrize(
    ("summary", "issue", "named"),
    [
        ("a\x00b", BUG, "summary contains a NUL"),
        ("ok", {**BUG, "description": "a\x00b"}, r"issues\[0\]\.description contains a NUL"),
    ],
)
def test_nul_errors_name_the_argument(
    team: ik.Store, summary: str, issue: dict[str, Any], named: str
) -> None:
    """A NUL is refused naming the argument the caller passed, not an internal mail field."""
    review = drive(team, make(team), "under_review")
    with pytest.raises(ik.InvalidArgument, match=named):
        team.reviews.record_iteration(review, "bob", "comment", summary, issues=[issue])


@pytest.mark.parametrize(
    "kwargs",
    [
        {"decision": "approved"},
        {"decision": "lgtm"},
        {"summary": None},
        {"summary": "a\x00b"},
        {"issues": "bug"},
        {"issues": BUG},
        {"issues": [BUG] * 1001},
        {"suggestions": {1: "x"}},
        {"suggestions": float("nan")},
        {"files_reviewed": -1},
        {"files_reviewed": 2**31},
        {"lines_analyzed": 1.5},
        {"duration_ms": -5},
        {"cost_usd": -0.01},
        {"cost_usd": float("inf")},
        {"reviewer_session_id": ""},
        {"reviewer": "no such name!"},
    ],
)
def test_bad_iteration_arguments(team: ik.Store, kwargs: dict[str, Any]) -> None:
    """Every bad argument of record_iteration is InvalidArgument before anything is written."""
    review = drive(team, make(team), "under_review")
    args: dict[str, Any] = {"reviewer": "bob", "decision": "approve", "summary": "ok"}
    args.update(kwargs)
    before = counts(team)
    with pytest.raises(ik.InvalidArgument):
        team.reviews.record_iteration(
            review,
            args.pop("reviewer"),
            args.pop("decision"),
            args.pop("summary"),
            **args,
        )
    assert counts(team) == before


def test_review_wide_issues_and_unknown_type_other(team: ik.Store) -> None:
    """An issue may have no file (about the whole change); 'other' is a type of its own."""
    review = drive(team, make(team), "under_review")
    it = team.reviews.record_iteration(
        review,
        "bob",
        "comment",
        "x",
        issues=[{"issue_type": "other", "severity": "medium", "title": "t", "description": ""}],
    )
    [issue] = it.issues
    assert (issue.issue_type, issue.file_path, issue.line_start, issue.description) == (
        "other",
        None,
        None,
        "",
    )


# ---------------------------------------------------------------- issues


@pytest.fixture
def raised(team: ik.Store) -> Iterator[tuple[ik.Review, list[ik.ReviewIssue]]]:
    """A review under review with five issues (low, critical, medium, high, critical) from
    iteration 1 and a comment-only iteration 2."""
    review = drive(team, make(team), "under_review")
    severities = ["low", "critical", "medium", "high", "critical"]
    it = team.reviews.record_iteration(
        review,
        "bob",
        "comment",
        "x",
        issues=[{**BUG, "severity": s, "title": f"#{k}"} for k, s in enumerate(severities)],
    )
    team.reviews.record_iteration(review, "carol", "comment", "y")
    yield review, list(it.issues)


def test_open_issues_by_severity_rank(
    team: ik.Store, raised: tuple[ik.Review, list[ik.ReviewIssue]]
) -> None:
    """critical, high, medium, low (Subtrate sorted alphabetically: critical, high, low,
    medium), then id."""
    review, issues = raised
    got = team.reviews.open_issues(review)
    assert [i.severity for i in got] == ["critical", "critical", "high", "medium", "low"]
    assert [i.title for i in got] == ["#1", "#4", "#3", "#2", "#0"]
    assert team.reviews.issues(review) == issues


def test_resolve_issue(team: ik.Store, raised: tuple[ik.Review, list[ik.ReviewIssue]]) -> None:
    """Resolving sets status, time and iteration (default: the latest); the issue leaves
    open_issues; resolving it again is refused (no reopening); iterations before the issue's
    own or after the latest are refused."""
    clock = Clock(team)
    review, issues = raised
    clock.advance(hours=1)
    fixed = team.reviews.resolve_issue(issues[1], "fixed")  # the ReviewIssue, or its id
    assert (fixed.status, fixed.resolved_at, fixed.resolved_in_iteration) == (
        "fixed",
        clock.now,
        2,
    )
    assert (
        team.reviews.resolve_issue(issues[4].id, "duplicate", iteration=1).resolved_in_iteration
        == 1
    )
    assert team.reviews.resolve_issue(issues[0].id, "wont_fix", iteration=2).status == "wont_fix"
    assert [i.title for i in team.reviews.open_issues(review)] == ["#3", "#2"]
    before = counts(team)
    with pytest.raises(ik.InvalidArgument, match=r"already fixed.*not reopened"):
        team.reviews.resolve_issue(issues[1].id, "wont_fix")
    with pytest.raises(ik.InvalidArgument, match=re.escape("iterations 1..2, not 3")):
        team.reviews.resolve_issue(issues[2].id, "fixed", iteration=3)
    with pytest.raises(ik.NotFound):
        team.reviews.resolve_issue(2**62, "fixed")
    for status in ("open", "done", "Fixed", None):
        with pytest.raises(ik.InvalidArgument):
            team.reviews.resolve_issue(issues[2].id, status)  # type: ignore[arg-type]
    for iteration in (0, -1, True, 2**31):
        with pytest.raises(ik.InvalidArgument):
            team.reviews.resolve_issue(issues[2].id, "fixed", iteration=iteration)
    with pytest.raises(ik.InvalidArgument):
        team.reviews.resolve_issue(0, "fixed")
    assert counts(team) == before
    assert team.reviews.get(review).state == "under_review"  # resolving changes no state


def test_an_issue_cannot_be_resolved_before_it_was_raised(team: ik.Store) -> None:
    """An issue of iteration 2 cannot be resolved in iteration 1."""
    review = drive(team, make(team), "under_review")
    team.reviews.record_iteration(review, "bob", "comment", "x")
    [issue] = team.reviews.record_iteration(review, "bob", "comment", "y", issues=[BUG]).issues
    with pytest.raises(ik.InvalidArgument, match="raised in iteration 2"):
        team.reviews.resolve_issue(issue.id, "fixed", iteration=1)
    assert team.reviews.resolve_issue(issue.id, "fixed", iteration=2).status == "fixed"


# ---------------------------------------------------------------- the schema


def check_values(store: Any, table: str, constraint: str) -> set[str]:
    with store._connection() as conn:
        definition = conn.execute(
            "SELECT pg_get_constraintdef(oid) AS d FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND conname = %s",
            (table, constraint),
        ).fetchone()["d"]
    return set(re.findall(r"'([^']+)'::text", definition))


def test_python_vocabularies_equal_the_schema_checks(ikigai_store: ik.Store) -> None:
    """The exported vocabularies are exactly what the CHECKs allow, and every activity type
    the reviews and plans write is one the activities CHECK allows."""
    s = ikigai_store
    assert check_values(s, "reviews", "reviews_state_check") == set(ik.REVIEW_STATES)
    assert check_values(s, "reviews", "reviews_review_type_check") == set(ik.REVIEW_TYPES)
    assert check_values(s, "reviews", "reviews_priority_check") == set(ik.PRIORITIES)
    assert check_values(s, "review_iterations", "review_iterations_decision_check") == set(
        ik.REVIEW_DECISIONS
    )
    assert check_values(s, "review_issues", "review_issues_type_check") == set(ik.ISSUE_TYPES)
    assert check_values(s, "review_issues", "review_issues_severity_check") == set(ik.SEVERITIES)
    assert check_values(s, "review_issues", "review_issues_status_check") == set(ik.ISSUE_STATUSES)
    assert check_values(s, "plan_reviews", "plan_reviews_state_check") == set(ik.PLAN_STATES)
    written = reviews_module.WRITTEN_ACTIVITY_TYPES | {"plan_submitted", "plan_decided"}
    assert written == {
        "review_requested",
        "review_started",
        "review_approved",
        "review_rejected",
        "review_completed",
        "plan_submitted",
        "plan_decided",
    }
    assert written <= check_values(s, "activities", "activities_type_check")
    assert written <= set(ik.ACTIVITY_TYPES)


def test_the_schema_keeps_its_invariants(team: ik.Store) -> None:
    """Writes that bypass the library still cannot break the invariants: completed_at only on
    terminal states, a thread derived from the id, gapless-safe unique iteration numbers."""
    review = make(team)
    statements = [
        "UPDATE reviews SET state = 'approved' WHERE id = %(id)s",
        "UPDATE reviews SET completed_at = now() WHERE id = %(id)s",
        "UPDATE reviews SET state = 'merged' WHERE id = %(id)s",
        "UPDATE reviews SET reviewers = '{}' WHERE id = %(id)s",
        "UPDATE reviews SET thread_id = 'x' WHERE id = %(id)s",
    ]
    for sql in statements:
        with pytest.raises((ik.Conflict, ik.DatabaseError)), team._connection() as conn:
            conn.execute(sql, {"id": review.id})
    assert team.reviews.get(review) == review


def test_iteration_numbers_are_unique_in_the_schema(team: ik.Store) -> None:
    """A duplicate (review, iteration) is a Conflict naming the constraint."""
    review = drive(team, make(team), "under_review")
    team.reviews.record_iteration(review, "bob", "comment", "x")
    with pytest.raises(ik.Conflict) as clash, team._connection() as conn:
        conn.execute(
            "INSERT INTO review_iterations (review_id, iteration_num, reviewer_id, decision, "
            "summary) SELECT review_id, 1, requester_id, 'comment', 'dup' FROM reviews "
            "WHERE id = %s",
            (review.id,),
        )
    assert clash.value.constraint == "review_iterations_num_key"


def test_time_moves_with_the_clock(team: ik.Store) -> None:
    """created_at, updated_at and completed_at come from the database's clock."""
    clock = Clock(team)
    review = make(team)
    clock.advance(seconds=30)
    cancelled = team.reviews.cancel(review)
    assert cancelled.created_at == clock.now - timedelta(seconds=30)
    assert cancelled.updated_at == cancelled.completed_at == clock.now
