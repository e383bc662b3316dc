"""In-memory reference model of code reviews and plan reviews: the store's oracle.

Written from issue 10 ("Reviews", "Plan reviews"), the seed's state diagram (seed 004, "Review
State Machine", copied below edge by edge) and the README draft (notes/reviews-readme.md), not
from the SQL; it imports nothing from ``ikigai_store``. Plain dicts and lists, recomputed on
every read.

Identities: a name (``NAME``) and whether it is retired. Reviews, iterations, issues and plans
name identities; unknown names are ``RefNotFound``, retired ones ``RefInvalid`` (a retired
identity neither acts nor is asked to).

Reviews: ``create(requester, reviewers, ...)`` checks its arguments, then the requester (missing,
retired), then the reviewers (any missing, then any retired); reviewers keep the order given,
each once. The review starts ``new``, with ``iterations`` 0, ``created_at = updated_at = now``,
``thread_id = "review-" + first 8 hex digits``. ``fire(review_id, event, by)``: arguments; an
unknown review ``RefNotFound``; the actor (``by``, else the requester for submit, resubmit and
cancel, the first reviewer for the others) missing or retired; then ``SEED_TRANSITIONS[(state,
event)]`` must exist, else ``RefInvalid`` naming the short id, the state and the event. A legal
event sets the state, ``updated_at = now`` and, entering a terminal state, ``completed_at =
now``; it appends the event's activity (the actor's) and, when its audience minus the actor
and the retired is not empty, one mail on the review's thread from the actor to that audience
(names sorted by code point): submit and resubmit the reviewers, start nobody, approve,
request_changes and reject the requester, cancel the requester and, unless the review was new,
the reviewers.

Iterations: ``record_iteration`` checks its arguments (issues: ``check_issue``), then the
review, then the reviewer, then the state, which must be under_review (``RefInvalid`` naming
the state). It numbers the iteration ``iterations + 1``, stores its issues in order (ids are
the store's, increasing), applies the decision's event (comment: none) and mails the
requester (unless it is the reviewer, or retired) with the decision's activity.
``open_issues`` sorts open issues by severity rank (critical, high, medium, low), then id.
``resolve_issue(issue_id, status, iteration)``: status fixed, wont_fix or duplicate; unknown
issue ``RefNotFound``; not open ``RefInvalid`` (no reopening); the iteration (None: the
review's latest) must be between the issue's own and the review's latest, else ``RefInvalid``.

Reads: ``active()`` non-terminal reviews by id; ``list(state, requester, limit, before_id)``
newest first (an unknown requester with nothing found is ``RefNotFound``); ``resolve_prefix``:
4 to 32 hex digits (hyphens dropped, case ignored), else ``RefInvalid``; no match
``RefNotFound``; several ``RefInvalid`` naming the count.

Plans: ``submit_plan`` checks arguments, the requester, then the reviewer: ``"User"`` is
registered if missing (only once the requester may submit), any other must exist and not be
retired. A plan is pending, revision 1, thread ``"plan-" + 8 hex``; a mail goes from the
requester to the reviewer (none when they are the same identity) and ``plan_submitted`` is
recorded. ``decide``: state approved, rejected or changes_requested; unknown plan; the decider
(``reviewed_by``, else the reviewer) missing or retired; the plan must be pending (else
``RefInvalid`` naming the state); it sets the decision, mails the requester (unless the decider,
or retired) and records ``plan_decided``. ``resubmit_plan``: unknown plan; requester retired;
must be changes_requested; pending again, revision + 1, decision cleared, mails the reviewer
(unless the requester or retired), ``plan_submitted``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tests.reference_mail import EPOCH, NAME, RefInvalid, RefNotFound

__all__ = [
    "EVENTS",
    "ISSUE_TYPES",
    "PLAN_STATES",
    "SEED_TRANSITIONS",
    "SEVERITIES",
    "STATES",
    "TERMINAL",
    "RefActivity",
    "RefIssue",
    "RefIteration",
    "RefMail",
    "RefPlan",
    "RefReview",
    "RefReviewWorld",
    "check_issue",
]

STATES = (
    "new",
    "pending_review",
    "under_review",
    "changes_requested",
    "re_review",
    "approved",
    "rejected",
    "cancelled",
)
TERMINAL = frozenset({"approved", "rejected", "cancelled"})
EVENTS = ("submit", "start", "approve", "request_changes", "reject", "resubmit", "cancel")

#: The seed's diagram, one edge per line (SubmitForReview = submit, StartReview = start, ...).
SEED_TRANSITIONS: dict[tuple[str, str], str] = {
    ("new", "submit"): "pending_review",
    ("new", "cancel"): "cancelled",
    ("pending_review", "start"): "under_review",
    ("pending_review", "cancel"): "cancelled",
    ("under_review", "approve"): "approved",
    ("under_review", "request_changes"): "changes_requested",
    ("under_review", "reject"): "rejected",
    ("under_review", "cancel"): "cancelled",
    ("changes_requested", "resubmit"): "re_review",
    ("changes_requested", "cancel"): "cancelled",
    ("re_review", "start"): "under_review",
    ("re_review", "cancel"): "cancelled",
}

REQUESTER_EVENTS = frozenset({"submit", "resubmit", "cancel"})
ACTIVITY = {
    "submit": "review_requested",
    "resubmit": "review_requested",
    "start": "review_started",
    "approve": "review_approved",
    "reject": "review_rejected",
    "request_changes": "review_completed",
    "cancel": "review_completed",
}
DECISIONS = {
    "approve": ("approve", "review_approved"),
    "request_changes": ("request_changes", "review_completed"),
    "reject": ("reject", "review_rejected"),
    "comment": (None, "review_completed"),
}
REVIEW_TYPES = ("full", "incremental", "security", "performance", "architecture")
PRIORITIES = ("urgent", "normal", "low")
ISSUE_TYPES = (
    "bug",
    "security",
    "claude_md_violation",
    "logic_error",
    "performance",
    "style",
    "documentation",
    "other",
)
SEVERITIES = ("critical", "high", "medium", "low")
RESOLUTIONS = ("fixed", "wont_fix", "duplicate")
ISSUE_KEYS = frozenset(
    {
        "issue_type",
        "severity",
        "title",
        "description",
        "file_path",
        "line_start",
        "line_end",
        "code_snippet",
        "suggestion",
        "claude_md_ref",
    }
)
PLAN_STATES = ("pending", "approved", "rejected", "changes_requested")
PLAN_DECISIONS = ("approved", "rejected", "changes_requested")
HUMAN = "User"


# ---------------------------------------------------------------- argument checks


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise RefInvalid(f"bad {what} {value!r}")
    return value


def _text(value: object, what: str, max_chars: int, *, empty: bool = False) -> str:
    if not isinstance(value, str) or len(value) > max_chars or (not value and not empty):
        raise RefInvalid(f"bad {what} {value!r}")
    if "\x00" in value:
        raise RefInvalid(f"{what} holds NUL")
    return value


def _maybe_text(value: object, what: str, max_chars: int) -> str | None:
    return None if value is None else _text(value, what, max_chars)


def _choice(value: object, what: str, choices: Iterable[str]) -> str:
    if not isinstance(value, str) or value not in tuple(choices):
        raise RefInvalid(f"bad {what} {value!r}")
    return value


def _count(value: object, what: str, top: int = 2**63 - 1) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
        raise RefInvalid(f"bad {what} {value!r}")
    return value


def _line(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value < 2**31:
        raise RefInvalid(f"bad {what} {value!r}")
    return value


def check_issue(issue: object) -> dict[str, Any]:
    """An issue as documented: a dict of known keys; issue_type, severity, title (1-1000
    characters) and description (text) required; file_path optional, a line needs it; lines
    positive, line_end needs line_start <= line_end; code_snippet, suggestion, claude_md_ref
    optional text. Missing optional keys become None."""
    if not isinstance(issue, Mapping):
        raise RefInvalid("an issue is a dict")
    if set(issue) - ISSUE_KEYS:
        raise RefInvalid(f"unknown issue keys {sorted(map(str, set(issue) - ISSUE_KEYS))}")
    out = {k: issue.get(k) for k in ISSUE_KEYS}
    for key in ("issue_type", "severity", "title", "description"):
        if out[key] is None:
            raise RefInvalid(f"issue lacks {key}")
    _choice(out["issue_type"], "issue_type", ISSUE_TYPES)
    _choice(out["severity"], "severity", SEVERITIES)
    _text(out["title"], "title", 1000)
    _text(out["description"], "description", 2**24, empty=True)
    _maybe_text(out["file_path"], "file_path", 4096)
    start = _line(out["line_start"], "line_start")
    end = _line(out["line_end"], "line_end")
    if end is not None and (start is None or end < start):
        raise RefInvalid("line_end before line_start")
    if start is not None and out["file_path"] is None:
        raise RefInvalid("a line needs a file")
    for key in ("code_snippet", "suggestion", "claude_md_ref"):
        if out[key] is not None:
            _text(out[key], key, 2**24, empty=True)
    return out


def _json_ok(value: Any) -> bool:
    if value is None or isinstance(value, (bool, str)):
        return "\x00" not in value if isinstance(value, str) else True
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_json_ok(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_ok(v) for k, v in value.items())
    return False


# ---------------------------------------------------------------- the world


@dataclass
class RefMail:
    """A mail as the machine compares it: thread, sender, recipients (sorted), metadata."""

    thread_id: str
    sender: str
    to: tuple[str, ...]
    metadata: dict[str, Any]


@dataclass
class RefActivity:
    """An activity row: whose, its type, and its metadata (``mail``: index of its mail in
    ``RefReviewWorld.mail``, or None)."""

    identity: str
    type: str
    metadata: dict[str, Any]
    mail: int | None


@dataclass
class RefIssue:
    id: int
    review_id: str
    iteration_num: int
    fields: dict[str, Any]
    created_at: datetime
    status: str = "open"
    resolved_at: datetime | None = None
    resolved_in_iteration: int | None = None

    def view(self) -> tuple[Any, ...]:
        f = self.fields
        return (
            self.id,
            self.review_id,
            self.iteration_num,
            f["issue_type"],
            f["severity"],
            f["title"],
            f["description"],
            f["file_path"],
            f["line_start"],
            f["line_end"],
            f["code_snippet"],
            f["suggestion"],
            f["claude_md_ref"],
            self.status,
            self.resolved_at,
            self.resolved_in_iteration,
            self.created_at,
        )


@dataclass
class RefIteration:
    review_id: str
    iteration_num: int
    reviewer: str
    decision: str
    summary: str
    extra: dict[str, Any]
    created_at: datetime
    issues: list[RefIssue]

    def view(self) -> tuple[Any, ...]:
        e = self.extra
        return (
            self.review_id,
            self.iteration_num,
            self.reviewer,
            e["reviewer_session_id"],
            self.decision,
            self.summary,
            e["suggestions"],
            e["files_reviewed"],
            e["lines_analyzed"],
            e["duration_ms"],
            e["cost_usd"],
            self.created_at,
            tuple(i.view() for i in self.issues),
        )


@dataclass
class RefReview:
    id: int
    review_id: str
    requester: str
    reviewers: tuple[str, ...]
    fields: dict[str, Any]
    created_at: datetime
    state: str = "new"
    updated_at: datetime = EPOCH
    completed_at: datetime | None = None
    iterations: list[RefIteration] = field(default_factory=list)

    @property
    def short(self) -> str:
        return self.review_id[:8]

    @property
    def thread_id(self) -> str:
        return "review-" + self.short

    def view(self) -> tuple[Any, ...]:
        f = self.fields
        return (
            self.id,
            self.review_id,
            self.thread_id,
            self.requester,
            self.reviewers,
            f["pr_number"],
            f["branch"],
            f["base_branch"],
            f["commit_sha"],
            f["repo_path"],
            f["remote_url"],
            f["review_type"],
            f["priority"],
            self.state,
            len(self.iterations),
            self.created_at,
            self.updated_at,
            self.completed_at,
        )


@dataclass
class RefPlan:
    id: int
    plan_review_id: str
    requester: str
    reviewer: str
    plan_path: str
    title: str
    summary: str
    session_key: str | None
    created_at: datetime
    updated_at: datetime
    mail: int | None
    state: str = "pending"
    reviewer_comment: str | None = None
    reviewed_by: str | None = None
    reviewed_at: datetime | None = None
    revision: int = 1

    @property
    def thread_id(self) -> str:
        return "plan-" + self.plan_review_id[:8]

    def view(self) -> tuple[Any, ...]:
        """The PlanReview's fields; ``mail`` as the index of the request mail."""
        return (
            self.id,
            self.plan_review_id,
            self.thread_id,
            self.mail,
            self.requester,
            self.reviewer,
            self.plan_path,
            self.title,
            self.summary,
            self.state,
            self.reviewer_comment,
            self.reviewed_by,
            self.session_key,
            self.revision,
            self.created_at,
            self.updated_at,
            self.reviewed_at,
        )


@dataclass
class RefReviewWorld:
    """Identities (name -> retired?), reviews, issues, plans, and the mail and activities
    their changes wrote, with a clock."""

    now: datetime = EPOCH
    identities: dict[str, bool] = field(default_factory=dict)
    reviews: dict[str, RefReview] = field(default_factory=dict)
    issues_by_id: dict[int, RefIssue] = field(default_factory=dict)
    plans: dict[str, RefPlan] = field(default_factory=dict)
    mail: list[RefMail] = field(default_factory=list)
    activities: list[RefActivity] = field(default_factory=list)

    # -- identities ----------------------------------------------------------------------------

    def register(self, name: str) -> None:
        if name in self.identities:
            raise ValueError(f"{name} exists")
        self.identities[name] = False

    def retire(self, name: str) -> None:
        self.identities[name] = True

    def _active(self, name: str, what: str) -> None:
        if name not in self.identities:
            raise RefNotFound(f"identity {name!r} does not exist", name)
        if self.identities[name]:
            raise RefInvalid(f"identity {name!r} is retired: it cannot {what}", name, "retired")

    def _announce(
        self,
        actor: str,
        thread: str,
        audience: Iterable[str],
        metadata: dict[str, Any],
    ) -> int | None:
        """The mail of a change (None when nobody is left to tell): index in ``mail``."""
        to = sorted(
            {n for n in audience if n != actor and not self.identities[n]},
            key=lambda n: n.encode("utf-8"),
        )
        if not to:
            return None
        self.mail.append(RefMail(thread, actor, tuple(to), metadata))
        return len(self.mail) - 1

    # -- reviews -------------------------------------------------------------------------------

    def review(self, review_id: str) -> RefReview:
        if review_id not in self.reviews:
            raise RefNotFound(f"review {review_id} does not exist", review_id)
        return self.reviews[review_id]

    def check_create(
        self,
        requester: object,
        reviewers: object,
        *,
        branch: object = None,
        base_branch: object = "main",
        commit_sha: object = None,
        repo_path: object = None,
        remote_url: object = None,
        pr_number: object = None,
        review_type: object = "full",
        priority: object = "normal",
    ) -> tuple[str, tuple[str, ...], dict[str, Any]]:
        """(requester, reviewers, fields) of a valid create; the refusal otherwise."""
        who = _name(requester, "requester")
        if isinstance(reviewers, str):
            items: list[object] = [reviewers]
        elif isinstance(reviewers, (list, tuple)):
            items = list(reviewers)
        else:
            raise RefInvalid("reviewers must be a name or a list")
        if not 1 <= len(items) <= 100:
            raise RefInvalid("1 to 100 reviewers")
        names = tuple(dict.fromkeys(_name(n, "reviewer") for n in items))
        fields = {
            "branch": _maybe_text(branch, "branch", 4096),
            "base_branch": _text(base_branch, "base_branch", 4096),
            "commit_sha": _maybe_text(commit_sha, "commit_sha", 1000),
            "repo_path": _maybe_text(repo_path, "repo_path", 4096),
            "remote_url": _maybe_text(remote_url, "remote_url", 4096),
            "pr_number": None,
            "review_type": _choice(review_type, "review_type", REVIEW_TYPES),
            "priority": _choice(priority, "priority", PRIORITIES),
        }
        if pr_number is not None:
            if isinstance(pr_number, bool) or not isinstance(pr_number, int):
                raise RefInvalid("pr_number")
            if not 0 < pr_number < 2**63:
                raise RefInvalid("pr_number")
            fields["pr_number"] = pr_number
        self._active(who, "request a review")
        for n in names:
            if n not in self.identities:
                raise RefNotFound(f"identity {n!r} does not exist", n)
        for n in names:
            if self.identities[n]:
                raise RefInvalid(f"identity {n!r} is retired", n, "retired")
        return who, names, fields

    def create(
        self, review_id: str, id: int, requester: object, reviewers: object, **kw: Any
    ) -> RefReview:
        """A new review with the store's uuid and id (which must be new and increasing)."""
        who, names, fields = self.check_create(requester, reviewers, **kw)
        if review_id in self.reviews or any(
            r.short == review_id[:8] for r in self.reviews.values()
        ):
            raise ValueError(f"review id {review_id} (or its 8-digit prefix) is taken")
        if self.reviews and id <= max(r.id for r in self.reviews.values()):
            raise ValueError(f"review id {id} is not increasing")
        review = RefReview(id, review_id, who, names, fields, self.now, updated_at=self.now)
        self.reviews[review_id] = review
        return review

    def fire(self, review_id: str, event: object, by: object = None) -> RefReview:
        name = _choice(event, "event", EVENTS)
        actor_arg = None if by is None else _name(by, "by")
        review = self.review(review_id)
        default = review.requester if name in REQUESTER_EVENTS else review.reviewers[0]
        actor = actor_arg or default
        self._active(actor, name.replace("_", " "))
        target = SEED_TRANSITIONS.get((review.state, name))
        if target is None:
            raise RefInvalid(
                f"review {review.short} is {review.state}; cannot {name}",
                review.short,
                review.state,
                name,
            )
        before = review.state
        review.state, review.updated_at = target, self.now
        if target in TERMINAL:
            review.completed_at = self.now
        if name in ("submit", "resubmit"):
            audience: list[str] = list(review.reviewers)
        elif name == "cancel":
            audience = [review.requester] + (list(review.reviewers) if before != "new" else [])
        elif name == "start":
            audience = []
        else:
            audience = [review.requester]
        mail = self._announce(
            actor,
            review.thread_id,
            audience,
            {"review_id": review.review_id, "event": name, "state": target},
        )
        self.activities.append(
            RefActivity(
                actor,
                ACTIVITY[name],
                {"review_id": review.review_id, "event": name, "from": before, "to": target},
                mail,
            )
        )
        return review

    def record_iteration(
        self,
        review_id: str,
        reviewer: object,
        decision: object,
        summary: object,
        *,
        issue_ids: Iterable[int] = (),
        issues: object = (),
        suggestions: Any = None,
        files_reviewed: object = None,
        lines_analyzed: object = None,
        duration_ms: object = None,
        cost_usd: object = None,
        reviewer_session_id: object = None,
    ) -> RefIteration:
        """Record an iteration; its issues take ``issue_ids`` (the store's), in order."""
        who = _name(reviewer, "reviewer")
        choice = _choice(decision, "decision", DECISIONS)
        if not isinstance(summary, str) or "\x00" in summary:
            raise RefInvalid("summary")
        if isinstance(issues, (str, bytes, dict)) or not isinstance(issues, (list, tuple)):
            raise RefInvalid("issues must be a list")
        if len(issues) > 1000:
            raise RefInvalid("at most 1000 issues")
        checked = [check_issue(i) for i in issues]
        if not _json_ok(suggestions):
            raise RefInvalid("suggestions are not JSON")
        extra = {
            "suggestions": suggestions,
            "files_reviewed": _count(files_reviewed, "files_reviewed", 2**31 - 1),
            "lines_analyzed": _count(lines_analyzed, "lines_analyzed"),
            "duration_ms": _count(duration_ms, "duration_ms"),
            "cost_usd": None,
            "reviewer_session_id": _maybe_text(reviewer_session_id, "session", 1000),
        }
        if cost_usd is not None:
            if (
                isinstance(cost_usd, bool)
                or not isinstance(cost_usd, (int, float))
                or not math.isfinite(cost_usd)
                or cost_usd < 0
            ):
                raise RefInvalid("cost_usd")
            extra["cost_usd"] = float(cost_usd)
        review = self.review(review_id)
        self._active(who, "review")
        if review.state != "under_review":
            raise RefInvalid(
                f"review {review.short} is {review.state}; cannot record an iteration",
                review.short,
                review.state,
            )
        ids = list(issue_ids)
        if len(ids) != len(checked):
            raise ValueError(f"{len(checked)} issues but {len(ids)} ids")
        known = max(self.issues_by_id, default=0)
        if ids != sorted(ids) or len(set(ids)) != len(ids) or (ids and ids[0] <= known):
            raise ValueError(f"issue ids {ids} are not new and increasing")
        number = len(review.iterations) + 1
        made = [
            RefIssue(i, review.review_id, number, f, self.now)
            for i, f in zip(ids, checked, strict=True)
        ]
        iteration = RefIteration(
            review.review_id, number, who, choice, summary, extra, self.now, made
        )
        review.iterations.append(iteration)
        for issue in made:
            self.issues_by_id[issue.id] = issue
        event, activity = DECISIONS[choice]
        before = review.state
        if event is not None:
            review.state = SEED_TRANSITIONS[(before, event)]
            if review.state in TERMINAL:
                review.completed_at = self.now
        review.updated_at = self.now
        mail = self._announce(
            who,
            review.thread_id,
            [review.requester],
            {
                "review_id": review.review_id,
                "iteration": number,
                "decision": choice,
                "state": review.state,
            },
        )
        self.activities.append(
            RefActivity(
                who,
                activity,
                {
                    "review_id": review.review_id,
                    "iteration": number,
                    "decision": choice,
                    "from": before,
                    "to": review.state,
                    "issues": len(made),
                },
                mail,
            )
        )
        return iteration

    def resolve_issue(self, issue_id: object, status: object, iteration: object = None) -> RefIssue:
        if isinstance(issue_id, bool) or not isinstance(issue_id, int) or not 0 < issue_id < 2**63:
            raise RefInvalid("issue_id")
        choice = _choice(status, "status", RESOLUTIONS)
        if iteration is not None and (
            isinstance(iteration, bool)
            or not isinstance(iteration, int)
            or not 1 <= iteration < 2**31
        ):
            raise RefInvalid("iteration")
        if issue_id not in self.issues_by_id:
            raise RefNotFound(f"issue {issue_id} does not exist", str(issue_id))
        issue = self.issues_by_id[issue_id]
        if issue.status != "open":
            raise RefInvalid(f"issue {issue_id} is already {issue.status}", issue.status)
        latest = len(self.reviews[issue.review_id].iterations)
        when = latest if iteration is None else iteration
        if not issue.iteration_num <= when <= latest:
            raise RefInvalid(f"iteration {when} is outside {issue.iteration_num}..{latest}")
        issue.status, issue.resolved_at, issue.resolved_in_iteration = choice, self.now, when
        return issue

    # -- review reads --------------------------------------------------------------------------

    def active(self) -> list[RefReview]:
        return sorted(
            (r for r in self.reviews.values() if r.state not in TERMINAL), key=lambda r: r.id
        )

    def list(
        self, state: str | None = None, requester: str | None = None, limit: int = 50
    ) -> list[RefReview]:
        found = [
            r
            for r in sorted(self.reviews.values(), key=lambda r: -r.id)
            if (state is None or r.state == state)
            and (requester is None or r.requester == requester)
        ]
        if not found and requester is not None and requester not in self.identities:
            raise RefNotFound(f"identity {requester!r} does not exist", requester)
        return found[:limit]

    def issues(self, review_id: str) -> list[RefIssue]:
        review = self.review(review_id)
        return [i for it in review.iterations for i in it.issues]

    def open_issues(self, review_id: str) -> list[RefIssue]:
        rank = {s: k for k, s in enumerate(SEVERITIES)}
        return sorted(
            (i for i in self.issues(review_id) if i.status == "open"),
            key=lambda i: (rank[i.fields["severity"]], i.id),
        )

    def resolve_prefix(self, prefix: object) -> RefReview:
        if not isinstance(prefix, str):
            raise RefInvalid("prefix must be text")
        digits = prefix.replace("-", "").lower()
        if not 4 <= len(digits) <= 32 or not all(c in "0123456789abcdef" for c in digits):
            raise RefInvalid(f"bad prefix {prefix!r}")
        found = [
            r for r in self.reviews.values() if r.review_id.replace("-", "").startswith(digits)
        ]
        if not found:
            raise RefNotFound(f"no review id starts with {digits}", digits)
        if len(found) > 1:
            raise RefInvalid(f"{len(found)} reviews start with {digits}", str(len(found)))
        return found[0]

    # -- plans ---------------------------------------------------------------------------------

    def plan(self, plan_id: str) -> RefPlan:
        if plan_id not in self.plans:
            raise RefNotFound(f"plan review {plan_id} does not exist", plan_id)
        return self.plans[plan_id]

    def check_submit(
        self,
        requester: object,
        plan_path: object,
        title: object,
        summary: object,
        reviewer: object = HUMAN,
        session_key: object = None,
    ) -> tuple[str, str]:
        """(requester, reviewer) of a valid submission (registering "User" if need be)."""
        who = _name(requester, "requester")
        _text(plan_path, "plan_path", 4096)
        _text(title, "title", 1000)
        _text(summary, "summary", 2**24, empty=True)
        rv = _name(reviewer, "reviewer")
        if session_key is not None:
            _text(session_key, "session_key", 200)
        self._active(who, "submit a plan")
        if rv == HUMAN and rv not in self.identities:
            self.identities[rv] = False
        self._active(rv, "review a plan")
        return who, rv

    def submit_plan(
        self,
        plan_id: str,
        id: int,
        requester: object,
        plan_path: object,
        title: object,
        summary: object,
        reviewer: object = HUMAN,
        session_key: object = None,
    ) -> RefPlan:
        who, rv = self.check_submit(requester, plan_path, title, summary, reviewer, session_key)
        if plan_id in self.plans or any(
            p.plan_review_id[:8] == plan_id[:8] for p in self.plans.values()
        ):
            raise ValueError(f"plan id {plan_id} (or its prefix) is taken")
        if self.plans and id <= max(p.id for p in self.plans.values()):
            raise ValueError(f"plan id {id} is not increasing")
        mail = self._announce(
            who,
            "plan-" + plan_id[:8],
            [rv],
            {"plan_review_id": plan_id, "state": "pending", "revision": 1},
        )
        plan = RefPlan(
            id,
            plan_id,
            who,
            rv,
            str(plan_path),
            str(title),
            str(summary),
            None if session_key is None else str(session_key),
            self.now,
            self.now,
            mail,
        )
        self.plans[plan_id] = plan
        self.activities.append(
            RefActivity(
                who,
                "plan_submitted",
                {"plan_review_id": plan_id, "revision": 1, "reviewer": rv},
                mail,
            )
        )
        return plan

    def decide(
        self, plan_id: str, state: object, comment: object = None, reviewed_by: object = None
    ) -> RefPlan:
        choice = _choice(state, "state", PLAN_DECISIONS)
        if comment is not None:
            _text(comment, "comment", 2**24, empty=True)
        by = None if reviewed_by is None else _name(reviewed_by, "reviewed_by")
        plan = self.plan(plan_id)
        actor = by or plan.reviewer
        self._active(actor, "decide a plan")
        if plan.state != "pending":
            raise RefInvalid(f"plan review {plan_id[:8]} is {plan.state}", plan_id[:8], plan.state)
        plan.state, plan.reviewer_comment, plan.reviewed_by = choice, comment, actor
        plan.reviewed_at = plan.updated_at = self.now
        mail = self._announce(
            actor,
            plan.thread_id,
            [plan.requester],
            {"plan_review_id": plan_id, "state": choice, "revision": plan.revision},
        )
        self.activities.append(
            RefActivity(
                actor,
                "plan_decided",
                {"plan_review_id": plan_id, "state": choice, "revision": plan.revision},
                mail,
            )
        )
        return plan

    def resubmit_plan(
        self, plan_id: str, summary: object = None, plan_path: object = None
    ) -> RefPlan:
        if summary is not None:
            _text(summary, "summary", 2**24, empty=True)
        if plan_path is not None:
            _text(plan_path, "plan_path", 4096)
        plan = self.plan(plan_id)
        self._active(plan.requester, "resubmit a plan")
        if plan.state != "changes_requested":
            raise RefInvalid(f"plan review {plan_id[:8]} is {plan.state}", plan_id[:8], plan.state)
        plan.state, plan.revision = "pending", plan.revision + 1
        plan.reviewer_comment = plan.reviewed_by = plan.reviewed_at = None
        plan.summary = plan.summary if summary is None else str(summary)
        plan.plan_path = plan.plan_path if plan_path is None else str(plan_path)
        plan.updated_at = self.now
        plan.mail = self._announce(
            plan.requester,
            plan.thread_id,
            [plan.reviewer],
            {"plan_review_id": plan_id, "state": "pending", "revision": plan.revision},
        )
        self.activities.append(
            RefActivity(
                plan.requester,
                "plan_submitted",
                {"plan_review_id": plan_id, "revision": plan.revision, "reviewer": plan.reviewer},
                plan.mail,
            )
        )
        return plan

    def pending_for_session(self, session_key: str) -> list[RefPlan]:
        return sorted(
            (
                p
                for p in self.plans.values()
                if p.session_key == session_key and p.state == "pending"
            ),
            key=lambda p: p.id,
        )

    def list_plans(self) -> list[RefPlan]:
        return sorted(self.plans.values(), key=lambda p: -p.id)

    def check(self) -> None:
        """Invariants: completed_at exactly on terminal states; iterations numbered 1..n; a
        resolved issue has its time and an iteration in range; a plan has a decision exactly
        when it is not pending."""
        for r in self.reviews.values():
            assert (r.state in TERMINAL) == (r.completed_at is not None)
            assert [it.iteration_num for it in r.iterations] == list(
                range(1, len(r.iterations) + 1)
            )
            for issue in self.issues(r.review_id):
                assert (issue.status == "open") == (issue.resolved_at is None)
                if issue.resolved_in_iteration is not None:
                    assert issue.iteration_num <= issue.resolved_in_iteration <= len(r.iterations)
        for p in self.plans.values():
            assert (p.state == "pending") == (p.reviewed_at is None) == (p.reviewed_by is None)
