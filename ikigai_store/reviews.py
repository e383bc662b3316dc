"""Code reviews: seed 004's review state machine, iterations and issues, guarded in SQL.

Owns creating reviews, firing their events, recording iterations with their issues, resolving
issues and reading all of it, for both faces (see ``ops``). Invariants:
- the state moves only along ``REVIEW_TRANSITIONS`` (the seed's table, exactly): each event is
  one conditional ``UPDATE ... WHERE state = ANY(allowed sources)`` under the review's row
  lock, so two racing callers cannot both move it; an illegal event raises ``InvalidArgument``
  naming the state and the event, and writes nothing (no mail, no activity either);
- every state change others must hear about writes its mail (on the review's thread,
  ``"review-" + short id``) and its activity row in the same statement as the change: there is
  no state change without them and no mail or activity without the change;
- ``completed_at`` is set exactly on entering approved, rejected or cancelled; ``updated_at``
  on every change;
- iterations are numbered 1, 2, 3... per review with no gap or duplicate under concurrency:
  the number comes from the review's counter, incremented by the UPDATE that holds the row
  lock; an iteration's decision applies the matching event in that same statement;
- issues are validated before anything is written: known keys only, the seed's issue types
  (never mapped), the four severities, positive line numbers with start <= end;
  ``open_issues`` sorts by severity rank (critical, high, medium, low), then id.

Who acts: ``fire`` and the event methods take ``by`` (an identity name); by default the
requester submits, resubmits and cancels, and the first reviewer starts, approves, requests
changes and rejects. The actor sends the event's mail and owns its activity; it must exist and
not be retired. The store does not decide who may act (any identity may), it records who did.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from .errors import Conflict, InvalidArgument, NotFound
from .models import (
    ISSUE_STATUSES,
    ISSUE_TYPES,
    PRIORITIES,
    REVIEW_DECISIONS,
    REVIEW_EVENTS,
    REVIEW_STATES,
    REVIEW_TERMINAL_STATES,
    REVIEW_TYPES,
    SEVERITIES,
    Identity,
    Review,
    ReviewIssue,
    ReviewIteration,
)
from .ops import Area, FaceT, Op, many, one, operation
from .validate import (
    MAX_ID,
    MAX_SUBJECT_CHARS,
    check_body,
    check_choice,
    check_id,
    check_int,
    check_str,
    check_text,
    check_uuid_id,
    dump_json,
    identity_name,
    listing,
)

__all__ = [
    "ISSUE_KEYS",
    "MAX_ISSUES",
    "MAX_REVIEWERS",
    "RESOLUTIONS",
    "REVIEW_TRANSITIONS",
    "WRITTEN_ACTIVITY_TYPES",
    "active",
    "check_issue",
    "check_prefix",
    "check_review_id",
    "create",
    "fire",
    "fire_parameters",
    "get",
    "illegal",
    "issues",
    "iterations",
    "list_reviews",
    "open_issues",
    "record_iteration",
    "resolve_issue",
    "resolve_prefix",
]

#: The seed's state machine: event -> (states it may fire from, state it leads to).
REVIEW_TRANSITIONS: dict[str, tuple[tuple[str, ...], str]] = {
    "submit": (("new",), "pending_review"),
    "start": (("pending_review", "re_review"), "under_review"),
    "approve": (("under_review",), "approved"),
    "request_changes": (("under_review",), "changes_requested"),
    "reject": (("under_review",), "rejected"),
    "resubmit": (("changes_requested",), "re_review"),
    "cancel": (
        tuple(s for s in REVIEW_STATES if s not in REVIEW_TERMINAL_STATES),
        "cancelled",
    ),
}
#: Most reviewers one review may name.
MAX_REVIEWERS = 100
#: Most issues one iteration may raise.
MAX_ISSUES = 1000
#: The keys an issue dict may have; ``issue_type``, ``severity``, ``title`` and
#: ``description`` are required.
ISSUE_KEYS: tuple[str, ...] = (
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
)
_REQUIRED_ISSUE_KEYS = ("issue_type", "severity", "title", "description")
_MAX_PATH_CHARS = 4096
_MAX_NAME_CHARS = 1000
_MAX_LINE = 2**31 - 1
_MAX_INT = 2**31 - 1
#: How often a create retries when its new uuid's 8-digit prefix (the thread id) is taken.
_ID_RETRIES = 5
#: How often fire retries when a concurrent change made its refused event legal.
_RACE_RETRIES = 3
#: Where the next review's uuid comes from (tests replace it to force prefix collisions).
new_review_uuid = uuid.uuid4


@dataclass(frozen=True, slots=True)
class _Event:
    """How an event is announced. ``actor``: who acts by default (``requester`` or
    ``reviewer``, the first reviewer); ``audience``: who is mailed (see ``review_fire`` in
    queries/reviews.sql; ``none``: nobody); templates are ``format()`` strings over: 1 short
    id, 2 what is reviewed, 3 actor, 4 state before, 5 state after, 6 requester, 7 the
    review's details, 8 text, 9 iterations."""

    actor: str
    audience: str
    activity: str
    subject: str
    body: str
    description: str


_EVENTS: dict[str, _Event] = {
    "submit": _Event(
        "requester",
        "reviewers",
        "review_requested",
        "Review requested: %2$s",
        "%3$s asks for a review of %2$s.\n\n%7$s",
        "requested review %1$s (%2$s)",
    ),
    "start": _Event("reviewer", "none", "review_started", "", "", "started review %1$s (%2$s)"),
    "approve": _Event(
        "reviewer",
        "requester",
        "review_approved",
        "Approved: %2$s",
        "%3$s approved %2$s (review %1$s).",
        "approved review %1$s (%2$s)",
    ),
    "request_changes": _Event(
        "reviewer",
        "requester",
        "review_completed",
        "Changes requested: %2$s",
        "%3$s requested changes to %2$s (review %1$s).",
        "requested changes to review %1$s (%2$s)",
    ),
    "reject": _Event(
        "reviewer",
        "requester",
        "review_rejected",
        "Rejected: %2$s",
        "%3$s rejected %2$s (review %1$s).",
        "rejected review %1$s (%2$s)",
    ),
    "resubmit": _Event(
        "requester",
        "reviewers",
        "review_requested",
        "Review again: %2$s",
        "%3$s made the requested changes and asks for another review of %2$s.\n\n%7$s",
        "resubmitted review %1$s (%2$s)",
    ),
    "cancel": _Event(
        "requester",
        "participants",
        "review_completed",
        "Review cancelled: %2$s",
        "%3$s cancelled the review of %2$s (review %1$s; it was %4$s).",
        "cancelled review %1$s (%2$s)",
    ),
}

#: Per iteration decision: (event applied or None, activity type, mail subject, verb).
_DECISIONS: dict[str, tuple[str | None, str, str, str]] = {
    "approve": ("approve", "review_approved", "Approved: %2$s", "approved"),
    "request_changes": (
        "request_changes",
        "review_completed",
        "Changes requested: %2$s",
        "changes requested",
    ),
    "reject": ("reject", "review_rejected", "Rejected: %2$s", "rejected"),
    "comment": (None, "review_completed", "Review comments: %2$s", "comments, no decision"),
}

#: The activity types reviews write: review_requested (submit, resubmit), review_started
#: (start), review_approved and review_rejected (those decisions, as events or iterations),
#: review_completed (request_changes, a comment iteration, cancel: the round or the review
#: ended without approval or rejection).
WRITTEN_ACTIVITY_TYPES: frozenset[str] = frozenset(
    {e.activity for e in _EVENTS.values()} | {d[1] for d in _DECISIONS.values()}
)


# ---------------------------------------------------------------- validation


def check_review_id(value: object, what: str = "review_id") -> str:
    """The canonical text of a review id: a ``Review``, a ``uuid.UUID`` or a UUID string."""
    hint = "; a short id is resolved with resolve_prefix"
    return check_uuid_id(value, what, Review, "review_id", hint)


def _short(review_id: str) -> str:
    return review_id[:8]


def _optional_str(value: object, what: str, max_chars: int) -> str | None:
    return None if value is None else check_str(value, what, max_chars=max_chars)


def _reviewers(reviewers: object) -> list[str]:
    """Reviewer names in the order given, each once; a single name (or Identity) is one."""
    if isinstance(reviewers, (str, Identity)):
        items: list[object] = [reviewers]
    elif isinstance(reviewers, Iterable) and not isinstance(reviewers, Mapping):
        items = list(reviewers)
    else:
        raise InvalidArgument(
            f"reviewers must be an identity name or a list of them, got {reviewers!r}"
        )
    if not items:
        raise InvalidArgument("reviewers must name at least one reviewer")
    if len(items) > MAX_REVIEWERS:
        raise InvalidArgument(f"a review has at most {MAX_REVIEWERS} reviewers (MAX_REVIEWERS)")
    return list(dict.fromkeys(identity_name(item, "reviewer") for item in items))


def _line(value: object, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_LINE:
        raise InvalidArgument(f"{what} must be a positive line number, got {value!r}")
    return value


def check_issue(issue: object, index: int = 0) -> dict[str, Any]:
    """A validated issue: a dict with every key of ``ISSUE_KEYS`` (missing optional ones None).

    Unknown keys, a missing required key, an unknown ``issue_type`` or ``severity``, a line
    that is not positive, ``line_end`` before ``line_start`` (or without it), or a line
    without ``file_path`` are ``InvalidArgument``."""
    where = f"issues[{index}]"
    if not isinstance(issue, Mapping):
        raise InvalidArgument(f"{where} must be a dict, got {type(issue).__name__}")
    unknown = sorted(str(k) for k in issue if k not in ISSUE_KEYS)
    if unknown:
        raise InvalidArgument(
            f"{where} has unknown key(s) {', '.join(unknown)}; an issue has {', '.join(ISSUE_KEYS)}"
        )
    missing = [k for k in _REQUIRED_ISSUE_KEYS if issue.get(k) is None]
    if missing:
        raise InvalidArgument(f"{where} lacks {', '.join(missing)}")
    out: dict[str, Any] = {
        "issue_type": check_choice(issue["issue_type"], f"{where}.issue_type", ISSUE_TYPES),
        "severity": check_choice(issue["severity"], f"{where}.severity", SEVERITIES),
        "title": check_str(issue["title"], f"{where}.title", max_chars=MAX_SUBJECT_CHARS),
    }
    description = issue["description"]
    if not isinstance(description, str):
        raise InvalidArgument(f"{where}.description must be a string")
    check_body(description, f"{where}.description")
    out["description"] = description
    out["file_path"] = _optional_str(issue.get("file_path"), f"{where}.file_path", _MAX_PATH_CHARS)
    start = _line(issue.get("line_start"), f"{where}.line_start")
    end = _line(issue.get("line_end"), f"{where}.line_end")
    if end is not None and (start is None or end < start):
        raise InvalidArgument(
            f"{where}: line_end ({end}) needs a line_start at or before it, got {start!r}"
        )
    if start is not None and out["file_path"] is None:
        raise InvalidArgument(f"{where}: a line number needs a file_path")
    out["line_start"], out["line_end"] = start, end
    for key in ("code_snippet", "suggestion", "claude_md_ref"):
        value = issue.get(key)
        if value is not None:
            if not isinstance(value, str):
                raise InvalidArgument(f"{where}.{key} must be a string or None")
            check_text(value, f"{where}.{key}")
        out[key] = value
    return out


def _issues(issues: object) -> list[dict[str, Any]]:
    if isinstance(issues, (str, bytes, Mapping)) or not isinstance(issues, Iterable):
        raise InvalidArgument(f"issues must be a list of dicts, got {type(issues).__name__}")
    items = list(issues)
    if len(items) > MAX_ISSUES:
        raise InvalidArgument(f"an iteration has at most {MAX_ISSUES} issues (MAX_ISSUES)")
    return [check_issue(item, k) for k, item in enumerate(items)]


def _count(value: object, what: str, maximum: int = MAX_ID) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise InvalidArgument(f"{what} must be an integer in [0, {maximum}] or None, got {value!r}")
    return value


def _cost(value: object) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
    ):
        raise InvalidArgument(f"cost_usd must be a finite number >= 0 or None, got {value!r}")
    return float(value)


def _explain_people(rows: list[dict[str, Any]], action: str) -> None:
    """Raise for the first name that is missing (``NotFound``) or retired."""
    missing = [r["name"] for r in rows if not r["found"]]
    if missing:
        raise NotFound(f"identity {', '.join(repr(n) for n in missing)} does not exist")
    retired = [r["name"] for r in rows if r["retired"]]
    if retired:
        raise InvalidArgument(
            f"identity {', '.join(repr(n) for n in retired)} is retired: it cannot {action}"
        )


# ---------------------------------------------------------------- creating and reading


def create(
    requester: str | Identity,
    *,
    reviewers: str | Identity | Sequence[str | Identity],
    branch: str | None = None,
    base_branch: str = "main",
    commit_sha: str | None = None,
    repo_path: str | None = None,
    remote_url: str | None = None,
    pr_number: int | None = None,
    review_type: str = "full",
    priority: str = "normal",
) -> Op[Review]:
    """Create a review in state ``new`` (nobody is mailed until ``submit``). The requester
    and every reviewer (at least one, at most 100; duplicates count once, order kept) must
    exist (``NotFound``) and not be retired (``InvalidArgument``). ``review_type``: full,
    incremental, security, performance or architecture; ``priority``: urgent, normal or
    low (also its mails' priority)."""
    name = identity_name(requester, "requester")
    names = _reviewers(reviewers)
    fields = {
        "branch": _optional_str(branch, "branch", _MAX_PATH_CHARS),
        "base_branch": check_str(base_branch, "base_branch", max_chars=_MAX_PATH_CHARS),
        "commit_sha": _optional_str(commit_sha, "commit_sha", _MAX_NAME_CHARS),
        "repo_path": _optional_str(repo_path, "repo_path", _MAX_PATH_CHARS),
        "remote_url": _optional_str(remote_url, "remote_url", _MAX_PATH_CHARS),
    }
    if pr_number is not None:
        check_id(pr_number, "pr_number")
    check_choice(review_type, "review_type", REVIEW_TYPES)
    check_choice(priority, "priority", PRIORITIES)
    for _ in range(_ID_RETRIES):
        review_id = str(new_review_uuid())
        try:
            row = yield one(
                "review_create",
                review_id=review_id,
                requester=name,
                reviewers=names,
                pr_number=pr_number,
                review_type=review_type,
                priority=priority,
                **fields,
            )
        except Conflict as taken:
            if taken.constraint in ("reviews_thread_id_key", "reviews_review_id_key"):
                continue  # another review has this id's 8-digit prefix: draw another id
            raise
        if row is not None:
            return Review.from_row(row)
        people = yield many("review_people", names=list(dict.fromkeys([name, *names])))
        _explain_people([r for r in people if r["name"] == name], "request a review")
        _explain_people(people, "review")
        raise AssertionError("review_create refused a valid request")  # pragma: no cover
    raise Conflict(
        f"{_ID_RETRIES} new review ids in a row had taken 8-digit prefixes; nothing was written",
        constraint="reviews_thread_id_key",
        sqlstate=None,
    )


def get(review_id: str | UUID | Review) -> Op[Review]:
    """One review; ``NotFound`` if there is none with that id."""
    rid = check_review_id(review_id)
    row = yield one("review_get", review_id=rid)
    if row is None:
        raise NotFound(f"review {rid} does not exist")
    return Review.from_row(row)


def list_reviews(
    *,
    state: str | None = None,
    requester: str | Identity | None = None,
    limit: int = 50,
    before: Review | int | None = None,
) -> Op[list[Review]]:
    """Reviews, newest first, optionally in one ``state`` and/or of one ``requester``
    (``NotFound`` if that identity does not exist); page with ``before=page[-1]`` (the last
    review, or its ``id``)."""
    page = dict(state=state, requester=requester, limit=limit, before=before)
    return (yield from listing("review_list", Review, REVIEW_STATES, **page))


def active() -> Op[list[Review]]:
    """Every review not approved, rejected or cancelled, oldest first (restart recovery)."""
    rows = yield many("review_active")
    return [Review.from_row(r) for r in rows]


def check_prefix(prefix: object) -> str:
    """A short review id: 4 to 32 hex digits (hyphens between them are ignored)."""
    if not isinstance(prefix, str):
        raise InvalidArgument(f"a review id prefix must be a string, got {type(prefix).__name__}")
    digits = prefix.replace("-", "").lower()
    if not 4 <= len(digits) <= 32 or any(c not in "0123456789abcdef" for c in digits):
        shown = prefix if len(prefix) <= 80 else prefix[:80] + "..."
        raise InvalidArgument(f"a review id prefix is 4 to 32 hex digits (0-9, a-f), got {shown!r}")
    return digits


def resolve_prefix(prefix: str) -> Op[Review]:
    """The review whose id starts with ``prefix`` (4 to 32 hex digits, hyphens ignored;
    8 always suffice: the first 8 are unique). ``NotFound`` when none does,
    ``InvalidArgument`` naming the count when several do or the prefix is malformed."""
    digits = check_prefix(prefix)
    row = yield one(
        "review_by_prefix",
        low=str(uuid.UUID(digits.ljust(32, "0"))),
        high=str(uuid.UUID(digits.ljust(32, "f"))),
    )
    if row is None:
        raise NotFound(f"no review id starts with {digits}")
    matches = int(row["matches"])
    if matches > 1:
        raise InvalidArgument(
            f"{matches} reviews have ids starting with {digits}: give more digits"
        )
    return Review.from_row(row)


# ---------------------------------------------------------------- the state machine


def _allowed_events(state: str) -> list[str]:
    return [e for e in REVIEW_EVENTS if state in REVIEW_TRANSITIONS[e][0]]


def illegal(short: str, state: str, what: str) -> InvalidArgument:
    """The refusal of ``what`` (an event) in ``state``: names both, and what is allowed."""
    if state in REVIEW_TERMINAL_STATES:
        return InvalidArgument(f"review {short} is {state} (terminal); cannot {what}")
    allowed = ", ".join(_allowed_events(state))
    return InvalidArgument(f"review {short} is {state}; cannot {what} (from {state}: {allowed})")


def fire_parameters(review_id: str, event: str, by: str | None) -> dict[str, Any]:
    """The parameters of the ``review_fire`` statement (queries/reviews.sql) that applies
    ``event`` to ``review_id`` as ``by`` (None: the event's default actor), arguments already
    validated: the allowed sources and the target from ``REVIEW_TRANSITIONS``, the default
    actor, the audience and the texts of its mail and activity."""
    sources, target = REVIEW_TRANSITIONS[event]
    spec = _EVENTS[event]
    return {
        "review_id": review_id,
        "event": event,
        "to_state": target,
        "from_states": list(sources),
        "by": by,
        "default_actor": spec.actor,
        "audience": spec.audience,
        "subject": spec.subject,
        "body": spec.body,
        "activity_type": spec.activity,
        "description": spec.description,
    }


def fire(
    review_id: str | UUID | Review, event: str, *, by: str | Identity | None = None
) -> Op[Review]:
    """Apply ``event`` (submit, start, approve, request_changes, reject, resubmit, cancel)
    and return the review as changed. ``by`` names the actor, who sends the event's mail
    and owns its activity (default: the requester for submit, resubmit and cancel, the
    first reviewer otherwise); it must exist and not be retired. An event the current
    state does not allow is ``InvalidArgument`` ("review 1a2b3c4d is approved (terminal);
    cannot start"); an unknown review ``NotFound``; either way nothing is written."""
    rid = check_review_id(review_id)
    name = check_choice(event, "event", REVIEW_EVENTS)
    actor = None if by is None else identity_name(by, "by")
    sources = REVIEW_TRANSITIONS[name][0]
    spec = _EVENTS[name]
    for _ in range(_RACE_RETRIES):
        row = yield one("review_fire", **fire_parameters(rid, name, actor))
        if row is not None:
            return Review.from_row(row)
        # Rare path: why. Unknown review, then the actor, then the state.
        why = yield one("review_refusal", review_id=rid)
        if why is None:
            raise NotFound(f"review {rid} does not exist")
        who = actor or (why["requester"] if spec.actor == "requester" else why["first_reviewer"])
        people = yield many("review_people", names=[who])
        _explain_people(people, name.replace("_", " "))
        if why["state"] not in sources:
            raise illegal(_short(rid), why["state"], name)
        # The event is legal now: a concurrent change moved the review in between. Again.
    raise InvalidArgument(
        f"review {_short(rid)} kept changing state concurrently; {name} was not applied"
    )


def submit(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "submit")``: new -> pending_review; mails the reviewers."""
    return (yield from fire(review_id, "submit", by=by))


def start(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "start")``: pending_review or re_review -> under_review."""
    return (yield from fire(review_id, "start", by=by))


def approve(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "approve")``: under_review -> approved; mails the requester."""
    return (yield from fire(review_id, "approve", by=by))


def request_changes(
    review_id: str | UUID | Review, *, by: str | Identity | None = None
) -> Op[Review]:
    """``fire(review_id, "request_changes")``: under_review -> changes_requested; mails
    the requester."""
    return (yield from fire(review_id, "request_changes", by=by))


def reject(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "reject")``: under_review -> rejected; mails the requester."""
    return (yield from fire(review_id, "reject", by=by))


def resubmit(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "resubmit")``: changes_requested -> re_review; mails the
    reviewers."""
    return (yield from fire(review_id, "resubmit", by=by))


def cancel(review_id: str | UUID | Review, *, by: str | Identity | None = None) -> Op[Review]:
    """``fire(review_id, "cancel")``: any non-terminal state -> cancelled; mails the
    requester and (unless it was still new) the reviewers, except the actor."""
    return (yield from fire(review_id, "cancel", by=by))


# ---------------------------------------------------------------- iterations and issues


def _iteration_text(summary: str, issues: list[dict[str, Any]]) -> str:
    """The iteration mail's own part: the summary, then the issues, most severe first."""
    if not issues:
        return f"{summary}\n\nNo issues."
    counts = ", ".join(
        f"{n} {s}" for s in SEVERITIES if (n := sum(1 for i in issues if i["severity"] == s))
    )
    lines = [summary, "", f"{len(issues)} issue(s): {counts}"]
    for issue in sorted(issues, key=lambda i: SEVERITIES.index(i["severity"])):
        where = ""
        if issue["file_path"] is not None:
            where = f" ({issue['file_path']}"
            if issue["line_start"] is not None:
                where += f":{issue['line_start']}"
                if issue["line_end"] not in (None, issue["line_start"]):
                    where += f"-{issue['line_end']}"
            where += ")"
        lines.append(f"- [{issue['severity']}] {issue['issue_type']}: {issue['title']}{where}")
    return "\n".join(lines)


def record_iteration(
    review_id: str | UUID | Review,
    reviewer: str | Identity,
    decision: str,
    summary: str,
    *,
    issues: Sequence[Mapping[str, Any]] = (),
    suggestions: Any = None,
    files_reviewed: int | None = None,
    lines_analyzed: int | None = None,
    duration_ms: int | None = None,
    cost_usd: float | None = None,
    reviewer_session_id: str | None = None,
) -> Op[ReviewIteration]:
    """Record one review round by ``reviewer`` while the review is under_review, numbered
    1, 2, 3... without gaps even when recorded concurrently, with its ``issues`` (dicts
    with ``issue_type``, ``severity``, ``title``, ``description`` and optionally
    ``file_path``, ``line_start``, ``line_end``, ``code_snippet``, ``suggestion``,
    ``claude_md_ref``; anything else is ``InvalidArgument``). ``decision`` approve,
    request_changes or reject applies that event in the same statement; ``comment``
    changes no state. The requester is mailed the summary and the issues on the review's
    thread, with an activity. Outside under_review: ``InvalidArgument``, nothing written
    (the iteration included)."""
    rid = check_review_id(review_id)
    name = identity_name(reviewer, "reviewer")
    choice = check_choice(decision, "decision", REVIEW_DECISIONS)
    if not isinstance(summary, str):
        raise InvalidArgument(f"summary must be a string, got {type(summary).__name__}")
    check_body(summary, "summary")
    checked = _issues(issues)
    suggestions_json = dump_json(suggestions, "suggestions")
    counts = {
        "files_reviewed": _count(files_reviewed, "files_reviewed", _MAX_INT),
        "lines_analyzed": _count(lines_analyzed, "lines_analyzed"),
        "duration_ms": _count(duration_ms, "duration_ms"),
    }
    cost = _cost(cost_usd)
    session = _optional_str(reviewer_session_id, "reviewer_session_id", _MAX_NAME_CHARS)
    event, activity, subject, verb = _DECISIONS[choice]
    for _ in range(_RACE_RETRIES):
        rows = yield many(
            "review_record_iteration",
            review_id=rid,
            reviewer=name,
            decision=choice,
            to_state=None if event is None else REVIEW_TRANSITIONS[event][1],
            summary=summary,
            suggestions=suggestions_json,
            cost_usd=cost,
            reviewer_session_id=session,
            issues=dump_json(checked, "issues"),
            text=_iteration_text(summary, checked),
            subject=subject,
            body=f"%3$s reviewed %2$s (review %1$s, iteration %9$s): {verb}.\n\n%8$s",
            activity_type=activity,
            description=f"reviewed %1$s (%2$s), iteration %9$s: {verb}",
            **counts,
        )
        if rows:
            return ReviewIteration.from_rows(rows)
        why = yield one("review_refusal", review_id=rid)
        if why is None:
            raise NotFound(f"review {rid} does not exist")
        people = yield many("review_people", names=[name])
        _explain_people(people, "review")
        if why["state"] != "under_review":
            raise illegal(
                _short(rid),
                why["state"],
                f"record an iteration (decision {choice}): iterations are recorded under review",
            )
        # Started concurrently since the UPDATE looked: try again.
    raise InvalidArgument(
        f"review {_short(rid)} kept changing state concurrently; the iteration was not recorded"
    )


def iterations(review_id: str | UUID | Review) -> Op[list[ReviewIteration]]:
    """A review's iterations in order, each with its issues."""
    rid = check_review_id(review_id)
    rows = yield many("review_iterations", review_id=rid)
    if not rows:
        yield from get(rid)
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(int(row["iteration_num"]), []).append(row)
    return [ReviewIteration.from_rows(group) for group in grouped.values()]


def issues(review_id: str | UUID | Review) -> Op[list[ReviewIssue]]:
    """Every issue of a review (open or resolved), in the order they were raised."""
    rid = check_review_id(review_id)
    rows = yield many("review_issues", review_id=rid)
    if not rows:
        yield from get(rid)
    return [ReviewIssue.from_row(r) for r in rows]


def open_issues(review_id: str | UUID | Review) -> Op[list[ReviewIssue]]:
    """A review's open issues, most severe first (critical, high, medium, low), then in
    the order they were raised."""
    rid = check_review_id(review_id)
    rows = yield many("review_open_issues", review_id=rid)
    if not rows:
        yield from get(rid)
    return [ReviewIssue.from_row(r) for r in rows]


#: What an open issue may become.
RESOLUTIONS: tuple[str, ...] = tuple(s for s in ISSUE_STATUSES if s != "open")


def resolve_issue(
    issue_id: int | ReviewIssue, status: str, *, iteration: int | None = None
) -> Op[ReviewIssue]:
    """Resolve an open issue as ``fixed``, ``wont_fix`` or ``duplicate`` in ``iteration``
    of its review (default: the latest; not one before the issue's own). A resolved issue
    is not reopened (``InvalidArgument``): raise a new issue in a new iteration."""
    if isinstance(issue_id, ReviewIssue):
        issue_id = issue_id.id
    check_id(issue_id, "issue_id")
    choice = check_choice(status, "status", RESOLUTIONS)
    if iteration is not None:
        check_int(iteration, "iteration", minimum=1)
        if isinstance(iteration, int) and iteration > _MAX_INT:
            raise InvalidArgument(f"iteration must be at most {_MAX_INT}, got {iteration}")
    row = yield one("review_resolve_issue", issue_id=issue_id, status=choice, iteration=iteration)
    if row is not None:
        return ReviewIssue.from_row(row)
    found = yield one("review_issue", issue_id=issue_id)
    if found is None:
        raise NotFound(f"review issue {issue_id} does not exist")
    if found["status"] != "open":
        raise InvalidArgument(
            f"review issue {issue_id} is already {found['status']} (in iteration "
            f"{found['resolved_in_iteration']}); resolved issues are not reopened: raise a new "
            "issue in a new iteration"
        )
    raise InvalidArgument(
        f"review issue {issue_id} was raised in iteration {found['iteration_num']} of review "
        f"{_short(str(found['review_id']))}, which has {found['review_iterations']} "
        f"iteration(s): it can be resolved in iterations {found['iteration_num']}"
        f"..{found['review_iterations']}, not {iteration}"
    )


class ReviewCalls(Area[FaceT]):
    """``store.reviews``: code reviews on the seed's state machine, guarded in SQL (see
    ``ikigai_store.reviews``). A review is named by its ``review_id`` (UUID text, a
    ``uuid.UUID`` or the ``Review``), an identity by its name or the ``Identity``.

    Events and who acts (``by``; the default in brackets): ``submit`` new -> pending_review
    [requester, mails the reviewers]; ``start`` pending_review or re_review -> under_review
    [first reviewer, no mail]; ``approve``, ``request_changes``, ``reject`` under_review ->
    approved, changes_requested, rejected [first reviewer, mails the requester]; ``resubmit``
    changes_requested -> re_review [requester, mails the reviewers]; ``cancel`` any
    non-terminal state -> cancelled [requester, mails the other participants]. Each change,
    its mail (on the review's thread) and its activity are one statement; an illegal event is
    ``InvalidArgument`` naming the state and the event, and writes nothing.
    """

    create = operation(create)
    get = operation(get)
    list = operation(list_reviews)
    active = operation(active)
    resolve_prefix = operation(resolve_prefix)
    fire = operation(fire)
    submit = operation(submit)
    start = operation(start)
    approve = operation(approve)
    request_changes = operation(request_changes)
    reject = operation(reject)
    resubmit = operation(resubmit)
    cancel = operation(cancel)
    record_iteration = operation(record_iteration)
    iterations = operation(iterations)
    issues = operation(issues)
    open_issues = operation(open_issues)
    resolve_issue = operation(resolve_issue)
