"""Code reviews and plan reviews through the real database agree with the reference model.

A Hypothesis state machine registers and retires identities, creates reviews (some with bad
arguments, unknown or retired requesters and reviewers), fires random events at random reviews
(legal and illegal, from every state, with and without an explicit actor, also at unknown
reviews), drives reviews along legal edges so that every state is visited, records iterations
with every decision and valid or invalid issues, resolves issues (also twice, or in an
iteration out of range), resolves id prefixes, submits, decides and resubmits plan reviews
(also re-deciding and resubmitting in the wrong state), and moves the database's clock
(``ikigai.now``, see tests/mailtools.py). Every call is mirrored in ``RefReviewWorld``
(tests/reference_reviews.py). A refusal must be the same ``ik`` error as the model's, name what
the model names, and write nothing (reviews, iterations, issues, plans, mail, recipient rows,
activities, identities). After each step the review list, the active reviews, every review's
iterations (with their issues) and open issues, the plan list and pending plans, one review by
``get`` and one plan by ``by_thread``, every mail (thread, sender, recipients, metadata; each
recipient with an unread copy) and every activity (identity, type, metadata, its mail) must
equal the model.

Each example runs in a savepoint of the ``ikigai_store`` fixture's rolled-back transaction (on
each face), so examples do not see each other's rows or clock.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import ikigai_store as ik
from tests.mailtools import EPOCH, Clock
from tests.reference_mail import RefError, RefInvalid, RefNotFound
from tests.reference_reviews import (
    EVENTS,
    SEED_TRANSITIONS,
    RefIssue,
    RefIteration,
    RefReview,
    RefReviewWorld,
)

pytestmark = pytest.mark.db

NAMES = ["ann", "bob", "cat", "dan", "eve"]
GHOST = "ghost"
UNKNOWN_REVIEW = "00000000-0000-4000-8000-00000000dead"
UNKNOWN_PLAN = "00000000-0000-4000-8000-00000000beef"
MAX_REVIEWS = 5
MAX_PLANS = 4
STEPS = [timedelta(seconds=1), timedelta(minutes=5), timedelta(days=1)]

VALID_ISSUES: list[dict[str, Any]] = [
    {
        "issue_type": "bug",
        "severity": "high",
        "title": "off by one",
        "description": "the loop stops early",
        "file_path": "src/a.c",
        "line_start": 3,
        "line_end": 5,
    },
    {"issue_type": "security", "severity": "critical", "title": "sql injection", "description": ""},
    {
        "issue_type": "style",
        "severity": "low",
        "title": "long line",
        "description": "wrap it",
        "file_path": "b.py",
        "line_start": 9,
        "code_snippet": "x = 1  # 100% sure",
        "suggestion": "wrap",
        "claude_md_ref": "section 3",
    },
    {"issue_type": "other", "severity": "medium", "title": "naming", "description": "rename"},
    {
        "issue_type": "claude_md_violation",
        "severity": "low",
        "title": "rule",
        "description": "see CLAUDE.md",
        "file_path": "c.md",
    },
]
BAD_ISSUES: list[Any] = [
    {"issue_type": "typo", "severity": "low", "title": "t", "description": "d"},
    {"issue_type": "Bug", "severity": "low", "title": "t", "description": "d"},
    {"issue_type": "bug", "severity": "urgent", "title": "t", "description": "d"},
    {
        "issue_type": "bug",
        "severity": "low",
        "title": "t",
        "description": "d",
        "file_path": "a",
        "line_start": 5,
        "line_end": 4,
    },
    {"issue_type": "bug", "severity": "low", "title": "t", "description": "d", "colour": "red"},
    {"issue_type": "bug", "severity": "low", "title": "t"},
    "not a dict",
]

ERRORS: dict[type[RefError], type[Exception]] = {
    RefInvalid: ik.InvalidArgument,
    RefNotFound: ik.NotFound,
}
STORE_ERRORS = (ik.InvalidArgument, ik.NotFound, ik.Conflict)

#: Everything a review or plan call may write, in one round trip (a refusal changes none).
FOOTPRINT = """
SELECT (SELECT count(*) FROM mail) AS mail,
       (SELECT count(*) FROM mail_recipients) AS copies,
       (SELECT count(*) FROM activities) AS activities,
       (SELECT count(*) FROM identities) AS identities,
       (SELECT count(*) FROM review_iterations) AS iterations,
       (SELECT string_agg(review_id::text || state || iterations || updated_at::text, ','
                          ORDER BY id) FROM reviews) AS reviews,
       (SELECT string_agg(id || status, ',' ORDER BY id) FROM review_issues) AS issues,
       (SELECT string_agg(plan_review_id::text || state || revision, ',' ORDER BY id)
        FROM plan_reviews) AS plans
"""
MAIL = """
SELECT m.id, m.thread_id, s.name AS sender, m.recipients, m.metadata,
       ARRAY(SELECT i.name FROM mail_recipients AS r JOIN identities AS i ON i.id = r.identity_id
             WHERE r.mail_id = m.id AND r.state = 'unread' ORDER BY i.name COLLATE "C") AS copies
FROM mail AS m JOIN identities AS s ON s.id = m.sender_id
ORDER BY m.id
"""
ACTIVITIES = """
SELECT i.name, a.type, a.metadata
FROM activities AS a JOIN identities AS i ON i.id = a.identity_id
ORDER BY a.id
"""


class Refused(Exception):
    """Both store and model refused the call (the same way)."""


def review_view(r: ik.Review) -> tuple[Any, ...]:
    return (
        r.id,
        r.review_id,
        r.thread_id,
        r.requester,
        r.reviewers,
        r.pr_number,
        r.branch,
        r.base_branch,
        r.commit_sha,
        r.repo_path,
        r.remote_url,
        r.review_type,
        r.priority,
        r.state,
        r.iterations,
        r.created_at,
        r.updated_at,
        r.completed_at,
    )


def issue_view(i: ik.ReviewIssue) -> tuple[Any, ...]:
    return (
        i.id,
        i.review_id,
        i.iteration_num,
        i.issue_type,
        i.severity,
        i.title,
        i.description,
        i.file_path,
        i.line_start,
        i.line_end,
        i.code_snippet,
        i.suggestion,
        i.claude_md_ref,
        i.status,
        i.resolved_at,
        i.resolved_in_iteration,
        i.created_at,
    )


def iteration_view(it: ik.ReviewIteration) -> tuple[Any, ...]:
    return (
        it.review_id,
        it.iteration_num,
        it.reviewer,
        it.reviewer_session_id,
        it.decision,
        it.summary,
        it.suggestions,
        it.files_reviewed,
        it.lines_analyzed,
        it.duration_ms,
        it.cost_usd,
        it.created_at,
        tuple(issue_view(i) for i in it.issues),
    )


class ReviewMachine(RuleBasedStateMachine):
    """Drives reviews and plan reviews through the store and checks them against the model."""

    def __init__(self, store: ik.Store) -> None:
        super().__init__()
        self.store = store
        self.model = RefReviewWorld()
        self.scope = ExitStack()
        self.scope.enter_context(store.transaction(force_rollback=True))
        self.clock = Clock(store, EPOCH)
        self.steps = 0

    def teardown(self) -> None:
        self.scope.close()

    # -- helpers -----------------------------------------------------------------------------

    def pick(self, data: st.DataObject, choices: list[Any], label: str) -> Any:
        return data.draw(st.sampled_from(choices), label=label)

    def known(self) -> list[str]:
        return list(self.model.identities)

    def live(self) -> list[str]:
        return [n for n, retired in self.model.identities.items() if not retired]

    def anyone(self, data: st.DataObject, label: str) -> str:
        """Mostly a registered identity (retired or not), sometimes an unknown name."""
        if data.draw(st.integers(0, 6), label=f"{label} known?"):
            return str(self.pick(data, self.known(), label))
        return GHOST

    def a_review(self, data: st.DataObject) -> str:
        """Mostly an existing review, sometimes an unknown uuid."""
        if self.model.reviews and data.draw(st.integers(0, 8), label="review exists?"):
            return str(self.pick(data, list(self.model.reviews), "review"))
        return UNKNOWN_REVIEW

    def a_plan(self, data: st.DataObject) -> str:
        if self.model.plans and data.draw(st.integers(0, 8), label="plan exists?"):
            return str(self.pick(data, list(self.model.plans), "plan"))
        return UNKNOWN_PLAN

    def footprint(self) -> dict[str, Any]:
        with self.store._connection() as conn:
            return dict(conn.execute(FOOTPRINT).fetchone())

    def both(self, store_call: Callable[[], Any], model_call: Callable[[Any], Any]) -> Any:
        """Run the call on the store, then on the model (given the store's result, or None).

        Either both succeed (the store's result is returned), or both refuse with the matching
        ``ik`` error whose message contains what the model names, nothing was written, and
        ``Refused`` is raised.
        """
        before = self.footprint()
        try:
            got = store_call()
        except STORE_ERRORS as exc:
            try:
                model_call(None)
            except RefError as ref:
                wanted = ERRORS[type(ref)]
                assert type(exc) is wanted, f"store raised {exc!r}, model {ref!r}"
                for named in ref.named:
                    assert named in str(exc), f"{exc!r} does not name {named!r} ({ref!r})"
                assert self.footprint() == before, "a refused call wrote rows"
                event(f"refused: {type(exc).__name__}")
                raise Refused from exc
            raise AssertionError(f"store raised {exc!r}; the model accepted") from exc
        try:
            model_call(got)
        except RefError as ref:
            raise AssertionError(f"store returned {got!r}; the model refused: {ref!r}") from ref
        return got

    # -- identities and the clock ----------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        """ann, bob and cat; a review of ann's for bob and cat, under review, and a new one of
        bob's for ann."""
        for name in NAMES[:3]:
            self.store.identities.register(name)
            self.model.register(name)
        got = self.store.reviews.create("ann", reviewers=["bob", "cat"], branch="feature/x")
        self.model.create(got.review_id, got.id, "ann", ["bob", "cat"], branch="feature/x")
        for name in ("submit", "start"):
            self.store.reviews.fire(got.review_id, name)
            self.model.fire(got.review_id, name)
        got = self.store.reviews.create("bob", reviewers="ann")
        self.model.create(got.review_id, got.id, "bob", "ann")

    @precondition(lambda self: any(n not in self.model.identities for n in NAMES))
    @rule(data=st.data())
    def register(self, data: st.DataObject) -> None:
        """A late identity joins."""
        name = self.pick(data, [n for n in NAMES if n not in self.model.identities], "name")
        self.store.identities.register(name)
        self.model.register(name)

    @precondition(lambda self: len(self.live()) > 3)
    @rule(data=st.data())
    def retire(self, data: st.DataObject) -> None:
        """A retired identity can no longer act, and gets no more mail (now and then)."""
        if data.draw(st.integers(0, 2), label="retire now?"):
            return
        name = self.pick(data, self.live(), "name")
        self.store.identities.retire(name)
        self.model.retire(name)

    @rule(step=st.sampled_from(STEPS))
    def advance(self, step: timedelta) -> None:
        """The database's clock moves on (updated_at, completed_at, resolved_at follow it)."""
        self.clock.advance(seconds=step.total_seconds())
        self.model.now = self.clock.now

    # -- reviews ---------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model.reviews) < MAX_REVIEWS)
    @rule(
        data=st.data(),
        review_type=st.sampled_from(["full", "security", "architecture", "bogus"]),
        priority=st.sampled_from(["normal", "urgent", "low"]),
        pr_number=st.sampled_from([None, 7, 0]),
        branch=st.sampled_from([None, "feature/x", "feature/y", ""]),
    )
    def create(
        self,
        data: st.DataObject,
        review_type: str,
        priority: str,
        pr_number: int | None,
        branch: str | None,
    ) -> None:
        """create: a new review, or the model's refusal (bad arguments, unknown or retired
        requester or reviewer)."""
        requester = self.anyone(data, "requester")
        count = data.draw(st.sampled_from([1, 1, 2, 2, 3, 0]), label="reviewers")
        reviewers = [self.anyone(data, f"reviewer {k}") for k in range(count)]
        kw: dict[str, Any] = {
            "review_type": review_type,
            "priority": priority,
            "pr_number": pr_number,
            "branch": branch,
            "commit_sha": "abc123",
        }
        try:
            got = self.both(
                lambda: self.store.reviews.create(requester, reviewers=reviewers, **kw),
                lambda got: (
                    self.model.create(got.review_id, got.id, requester, reviewers, **kw)
                    if got is not None
                    else self.model.check_create(requester, reviewers, **kw)
                ),
            )
        except Refused:
            return
        assert review_view(got) == self.model.reviews[got.review_id].view()

    def fire(self, review_id: str, name: str, by: str | None) -> None:
        try:
            got = self.both(
                lambda: self.store.reviews.fire(review_id, name, by=by),
                lambda _: self.model.fire(review_id, name, by),
            )
        except Refused:
            return
        event(f"fired {name}")
        assert review_view(got) == self.model.reviews[review_id].view()

    @precondition(lambda self: bool(self.model.reviews))
    @rule(data=st.data(), name=st.sampled_from([*EVENTS, *EVENTS, "explode"]))
    def random_event(self, data: st.DataObject, name: str) -> None:
        """Any event at any review (legal or not), by the default actor or a named one."""
        review_id = self.a_review(data)
        review = self.model.reviews.get(review_id)
        if review is not None and data.draw(st.booleans(), label="a legal one?"):
            legal = sorted(e for (s, e) in SEED_TRANSITIONS if s == review.state)
            name = self.pick(data, legal or [name], "legal event")
        by = None
        if data.draw(st.integers(0, 3), label="explicit actor?") == 0:
            by = self.anyone(data, "by")
        self.fire(review_id, name, by)

    @precondition(
        lambda self: any(
            r.state not in {"approved", "rejected", "cancelled"}
            for r in self.model.reviews.values()
        )
    )
    @rule(data=st.data(), steps=st.integers(1, 3))
    def legal_events(self, data: st.DataObject, steps: int) -> None:
        """1-3 events the seed allows from the review's state, other than cancel (so every
        state is reached): start, decisions and resubmissions."""
        live = [
            r
            for r in self.model.reviews.values()
            if r.state not in {"approved", "rejected", "cancelled"}
        ]
        review: RefReview = self.pick(data, live, "review")
        for _ in range(steps):
            allowed = sorted(
                e for (s, e) in SEED_TRANSITIONS if s == review.state and e != "cancel"
            )
            if not allowed:
                return
            name = self.pick(data, allowed, "event")
            event(f"from {review.state}")
            self.fire(review.review_id, name, None)

    @precondition(lambda self: bool(self.model.reviews))
    @rule(
        data=st.data(),
        decision=st.sampled_from(["approve", "request_changes", "reject", "comment", "comment"]),
        suggestions=st.sampled_from([None, [{"file": "a.c", "text": "x"}], "note"]),
        files_reviewed=st.sampled_from([None, 0, 3]),
        cost_usd=st.sampled_from([None, 0.25]),
        duration_ms=st.sampled_from([None, 1200]),
        bad=st.sampled_from([None] * 12 + ["decision", "cost", "issue", "files"]),
    )
    def record_iteration(
        self,
        data: st.DataObject,
        decision: str,
        suggestions: Any,
        files_reviewed: int | None,
        cost_usd: float | None,
        duration_ms: int | None,
        bad: str | None,
    ) -> None:
        """An iteration with 0-3 issues and any decision; now and then one bad argument (an
        unknown decision, a negative cost or count, an invalid issue)."""
        reviewing = [r for r, v in self.model.reviews.items() if v.state == "under_review"]
        if reviewing and data.draw(st.integers(0, 3), label="one under review?"):
            review_id = self.pick(data, reviewing, "review")
        else:
            review_id = self.a_review(data)
        if review_id in self.model.reviews and data.draw(st.integers(0, 2), label="reviewer?"):
            reviewer = self.pick(data, list(self.model.reviews[review_id].reviewers), "reviewer")
        else:
            reviewer = self.anyone(data, "reviewer")
        issues = data.draw(st.lists(st.sampled_from(VALID_ISSUES), max_size=3), label="issues")
        if bad == "issue":
            issues = [*issues, self.pick(data, BAD_ISSUES, "bad issue")]
        decision = "maybe" if bad == "decision" else decision
        cost_usd = -1.0 if bad == "cost" else cost_usd
        files_reviewed = -1 if bad == "files" else files_reviewed
        kw: dict[str, Any] = {
            "issues": issues,
            "suggestions": suggestions,
            "files_reviewed": files_reviewed,
            "cost_usd": cost_usd,
            "duration_ms": duration_ms,
            "reviewer_session_id": "sess-1",
        }
        fake = max(self.model.issues_by_id, default=0) + 1

        def model(got: ik.ReviewIteration | None) -> RefIteration:
            ids = [i.id for i in got.issues] if got is not None else range(fake, fake + len(issues))
            return self.model.record_iteration(
                review_id, reviewer, decision, "summary", issue_ids=ids, **kw
            )

        try:
            got = self.both(
                lambda: self.store.reviews.record_iteration(
                    review_id, reviewer, decision, "summary", **kw
                ),
                model,
            )
        except Refused:
            return
        event(f"iteration {decision} with {len(issues)} issue(s)")
        review = self.model.reviews[review_id]
        assert iteration_view(got) == review.iterations[-1].view()

    @precondition(lambda self: bool(self.model.issues_by_id))
    @rule(
        data=st.data(),
        status=st.sampled_from(["fixed", "wont_fix", "duplicate", "open"]),
        iteration=st.sampled_from([None, None, 1, 2, 3, 9]),
    )
    def resolve_issue(self, data: st.DataObject, status: str, iteration: int | None) -> None:
        """Resolve an issue (also twice, in a wrong iteration, or an unknown one)."""
        if data.draw(st.integers(0, 9), label="unknown issue?"):
            issue_id = self.pick(data, sorted(self.model.issues_by_id), "issue")
        else:
            issue_id = 2**62
        try:
            got = self.both(
                lambda: self.store.reviews.resolve_issue(issue_id, status, iteration=iteration),
                lambda _: self.model.resolve_issue(issue_id, status, iteration),
            )
        except Refused:
            return
        issue: RefIssue = self.model.issues_by_id[issue_id]
        assert issue_view(got) == issue.view()

    @rule(
        data=st.data(),
        length=st.integers(4, 9),
        state=st.sampled_from([None, "new", "under_review", "approved", "cancelled"]),
    )
    def reads(self, data: st.DataObject, length: int, state: str | None) -> None:
        """resolve_prefix of a review id's prefix (sometimes mangled: too short, wildcards,
        not hex), and list(state=, requester=), newest first."""
        if self.model.reviews and data.draw(st.integers(0, 4), label="real prefix?"):
            prefix = self.pick(data, list(self.model.reviews), "review")[:length]
        else:
            prefix = self.pick(data, ["0000", "ffff", "abc", "ab%c", "a_bc", "wxyz"], "prefix")
        try:
            got = self.both(
                lambda: self.store.reviews.resolve_prefix(prefix),
                lambda _: self.model.resolve_prefix(prefix),
            )
            assert review_view(got) == self.model.resolve_prefix(prefix).view()
        except Refused:
            pass
        requester = None if data.draw(st.booleans(), label="all?") else self.anyone(data, "who")
        try:
            listed = self.both(
                lambda: self.store.reviews.list(state=state, requester=requester, limit=3),
                lambda _: self.model.list(state, requester, limit=3),
            )
        except Refused:
            return
        assert [review_view(r) for r in listed] == [
            r.view() for r in self.model.list(state, requester, limit=3)
        ]

    # -- plans -------------------------------------------------------------------------------

    @precondition(lambda self: len(self.model.plans) < MAX_PLANS)
    @rule(
        data=st.data(),
        session_key=st.sampled_from([None, "s1", "s2"]),
        title=st.sampled_from(
            ["Refactor the parser", "Split lexer.c", "Port tests", "Fix CI", "Doc", ""]
        ),
    )
    def submit_plan(self, data: st.DataObject, session_key: str | None, title: str) -> None:
        """A plan to the human (registered on first use) or to a named reviewer."""
        requester = self.anyone(data, "requester")
        kw: dict[str, Any] = {"session_key": session_key}
        if data.draw(st.booleans(), label="named reviewer?"):
            kw["reviewer"] = self.anyone(data, "reviewer")
        try:
            got = self.both(
                lambda: self.store.plans.submit(requester, "plans/p.md", title, "sum", **kw),
                lambda got: (
                    self.model.submit_plan(
                        got.plan_review_id, got.id, requester, "plans/p.md", title, "sum", **kw
                    )
                    if got is not None
                    else self.model.check_submit(requester, "plans/p.md", title, "sum", **kw)
                ),
            )
        except Refused:
            return
        self.check_plan(got)

    @precondition(lambda self: bool(self.model.plans))
    @rule(
        data=st.data(),
        state=st.sampled_from(["approved", "rejected", "changes_requested", "pending"]),
        comment=st.sampled_from([None, "needs tests"]),
    )
    def decide(self, data: st.DataObject, state: str, comment: str | None) -> None:
        """Decide a plan (also one already decided, or waiting for its resubmission)."""
        plan_id = self.a_plan(data)
        by = None if data.draw(st.integers(0, 3), label="named?") else self.anyone(data, "by")
        try:
            got = self.both(
                lambda: self.store.plans.decide(plan_id, state, comment=comment, reviewed_by=by),
                lambda _: self.model.decide(plan_id, state, comment, by),
            )
        except Refused:
            return
        self.check_plan(got)

    @precondition(lambda self: bool(self.model.plans))
    @rule(data=st.data(), summary=st.sampled_from([None, "revised"]))
    def resubmit_plan(self, data: st.DataObject, summary: str | None) -> None:
        """Resubmit a plan (legal only after changes were requested)."""
        plan_id = self.a_plan(data)
        try:
            got = self.both(
                lambda: self.store.plans.resubmit(plan_id, summary=summary),
                lambda _: self.model.resubmit_plan(plan_id, summary),
            )
        except Refused:
            return
        self.check_plan(got)

    # -- invariants ----------------------------------------------------------------------------

    def mail_ids(self) -> list[int]:
        with self.store._connection() as conn:
            return [int(r["id"]) for r in conn.execute("SELECT id FROM mail ORDER BY id")]

    def plan_view(self, plan: ik.PlanReview, ids: list[int]) -> tuple[Any, ...]:
        mail = None if plan.mail_id is None else ids.index(plan.mail_id)
        return (
            plan.id,
            plan.plan_review_id,
            plan.thread_id,
            mail,
            plan.requester,
            plan.reviewer,
            plan.plan_path,
            plan.title,
            plan.summary,
            plan.state,
            plan.reviewer_comment,
            plan.reviewed_by,
            plan.session_key,
            plan.revision,
            plan.created_at,
            plan.updated_at,
            plan.reviewed_at,
        )

    def check_plan(self, got: ik.PlanReview) -> None:
        assert self.plan_view(got, self.mail_ids()) == self.model.plans[got.plan_review_id].view()

    @invariant()
    def everything_matches(self) -> None:
        """Reviews (list, active, get, iterations, open issues), plans (list, pending,
        by_thread), mail and activities equal the model's."""
        self.steps += 1
        self.model.check()
        listed = self.store.reviews.list(limit=1000)
        assert [review_view(r) for r in listed] == [r.view() for r in self.model.list(limit=1000)]
        active = self.store.reviews.active()
        assert [review_view(r) for r in active] == [r.view() for r in self.model.active()]
        for review_id, review in self.model.reviews.items():
            got = self.store.reviews.iterations(review_id)
            assert [iteration_view(it) for it in got] == [it.view() for it in review.iterations]
            opened = self.store.reviews.open_issues(review_id)
            assert [issue_view(i) for i in opened] == [
                i.view() for i in self.model.open_issues(review_id)
            ]
        if self.model.reviews:
            one = list(self.model.reviews.values())[self.steps % len(self.model.reviews)]
            assert review_view(self.store.reviews.get(one.review_id)) == one.view()
            event(f"invariant: a review {one.state}")
        ids = self.mail_ids()
        plans = self.store.plans.list(limit=1000)
        assert [self.plan_view(p, ids) for p in plans] == [
            p.view() for p in self.model.list_plans()
        ]
        for key in ("s1", "s2"):
            assert [p.plan_review_id for p in self.store.plans.pending_for_session(key)] == [
                p.plan_review_id for p in self.model.pending_for_session(key)
            ]
        if self.model.plans:
            plan = list(self.model.plans.values())[self.steps % len(self.model.plans)]
            got_plan = self.store.plans.by_thread(plan.thread_id)
            assert self.plan_view(got_plan, ids) == plan.view()
        with self.store._connection() as conn:
            mails = conn.execute(MAIL).fetchall()
            acts = conn.execute(ACTIVITIES).fetchall()
        assert [
            (m["thread_id"], m["sender"], tuple(m["recipients"]), m["metadata"]) for m in mails
        ] == [(m.thread_id, m.sender, m.to, m.metadata) for m in self.model.mail]
        assert all(list(m["recipients"]) == list(m["copies"]) for m in mails)
        got_acts = []
        for a in acts:
            meta = dict(a["metadata"])
            mail_id = meta.pop("mail_id")
            got_acts.append(
                (a["name"], a["type"], meta, None if mail_id is None else ids.index(mail_id))
            )
        assert got_acts == [(a.identity, a.type, a.metadata, a.mail) for a in self.model.activities]
        assert sorted(i.name for i in self.store.identities.list(include_retired=True)) == sorted(
            self.model.identities
        )


def test_review_machine(ikigai_store: ik.Store) -> None:
    """Reviews, iterations, issues and plan reviews, with their mail and activities, equal the
    model after every step."""

    class OnThisStore(ReviewMachine):
        def __init__(self) -> None:
            super().__init__(ikigai_store)

    run_state_machine_as_test(
        OnThisStore, settings=settings(suppress_health_check=[HealthCheck.too_slow])
    )
