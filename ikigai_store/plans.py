"""Plan reviews: a plan is approved (or not) before it is carried out (seed 004, guarded).

Owns submitting plans, deciding them, resubmitting them after requested changes, and reading
them, for both faces (see ``ops``). Invariants:
- a plan review is ``pending`` until decided ``approved``, ``rejected`` or
  ``changes_requested``; only a pending plan is decided (one conditional UPDATE, so two racing
  deciders cannot both win; re-deciding, which Subtrate allowed from any state, is
  ``InvalidArgument``); only a ``changes_requested`` plan is resubmitted, which makes it
  pending again with ``revision + 1`` and clears the decision;
- every change writes its mail (on the plan's own thread, ``"plan-" + short id``) and its
  activity (``plan_submitted``, ``plan_decided``) in the same statement as the change: a
  refused change writes nothing at all;
- the default reviewer ``"User"`` (the human) is registered as an identity the first time a
  plan is submitted to it; any other reviewer must exist (``NotFound``); nobody retired
  submits, decides or is asked.
"""

from __future__ import annotations

import uuid
from typing import Any
from uuid import UUID

from .errors import Conflict, InvalidArgument, NotFound
from .models import PLAN_STATES, Identity, PlanReview
from .ops import Area, FaceT, Op, many, one, operation
from .validate import (
    MAX_SUBJECT_CHARS,
    check_body,
    check_choice,
    check_key,
    check_str,
    check_uuid_id,
    identity_name,
    listing,
)

__all__ = [
    "DECISIONS",
    "HUMAN",
    "by_thread",
    "check_plan_id",
    "decide",
    "get",
    "list_plans",
    "pending_for_session",
    "resubmit",
    "submit",
]

#: The reviewer a plan goes to unless another is named: the human user, registered on first use.
HUMAN = "User"
#: The states a decision may set.
DECISIONS: tuple[str, ...] = ("approved", "rejected", "changes_requested")
_MAX_PATH_CHARS = 4096
_RETRIES = 5
#: Where the next plan review's uuid comes from (tests replace it to force collisions).
new_plan_uuid = uuid.uuid4

# Mail and activity templates, format() strings over: 1 short id, 2 title, 3 actor, 4 state
# before, 5 state after, 6 requester, 7 plan path, 8 summary or comment, 9 revision.
_SUBMIT = (
    "Plan review: %2$s",
    "%3$s asks you to review a plan before carrying it out.\n\n"
    "plan: %7$s\nplan review: %1$s\n\n%8$s",
    "submitted plan %1$s for review: %2$s",
)
_RESUBMIT = (
    "Plan review (revision %9$s): %2$s",
    "%3$s revised the plan as requested and asks you to review it again.\n\n"
    "plan: %7$s\nplan review: %1$s, revision %9$s\n\n%8$s",
    "resubmitted plan %1$s (revision %9$s): %2$s",
)
_DECIDED = {
    "approved": ("Plan approved: %2$s", "%3$s approved the plan %7$s (plan review %1$s)."),
    "rejected": ("Plan rejected: %2$s", "%3$s rejected the plan %7$s (plan review %1$s)."),
    "changes_requested": (
        "Plan changes requested: %2$s",
        "%3$s asks for changes to the plan %7$s (plan review %1$s); resubmit it when done.",
    ),
}


def check_plan_id(value: object) -> str:
    """The canonical text of a plan review id: a ``PlanReview``, a ``uuid.UUID`` or its text."""
    return check_uuid_id(value, "plan_review_id", PlanReview, "plan_review_id")


def _summary(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"summary must be a string, got {type(value).__name__}")
    check_body(value, "summary")
    return value


def _people(names: list[str]) -> Op[dict[str, dict[str, Any]]]:
    rows = yield many("review_people", names=names)
    return {r["name"]: r for r in rows}


def _require_active(person: dict[str, Any], action: str) -> None:
    if not person["found"]:
        raise NotFound(f"identity {person['name']!r} does not exist")
    if person["retired"]:
        raise InvalidArgument(f"identity {person['name']!r} is retired: it cannot {action}")


def submit(
    requester: str | Identity,
    plan_path: str,
    title: str,
    summary: str,
    *,
    reviewer: str | Identity = "User",
    session_key: str | None = None,
) -> Op[PlanReview]:
    """Submit a plan for review (state pending): mails the reviewer on the plan's new
    thread and records ``plan_submitted``. The default reviewer ``"User"`` (the human) is
    registered as an identity on first use; any other reviewer must exist (``NotFound``).
    ``session_key`` ties it to an external session (see ``pending_for_session``)."""
    name = identity_name(requester, "requester")
    path = check_str(plan_path, "plan_path", max_chars=_MAX_PATH_CHARS)
    heading = check_str(title, "title", max_chars=MAX_SUBJECT_CHARS)
    text = _summary(summary)
    who = identity_name(reviewer, "reviewer")
    key = None if session_key is None else check_key(session_key, "session_key")
    subject, body, description = _SUBMIT
    for _ in range(_RETRIES):
        plan_id = str(new_plan_uuid())
        try:
            row = yield one(
                "plan_submit",
                plan_review_id=plan_id,
                requester=name,
                reviewer=who,
                ensure_reviewer=who == HUMAN,
                plan_path=path,
                title=heading,
                summary=text,
                session_key=key,
                subject=subject,
                body=body,
                description=description,
            )
        except Conflict as taken:
            if taken.constraint in (
                "plan_reviews_thread_id_key",
                "plan_reviews_plan_review_id_key",
            ):
                continue  # another plan has this id's 8-digit prefix: draw another id
            raise
        if row is not None:
            return PlanReview.from_row(row)
        people = yield from _people([name, who])
        _require_active(people[name], "submit a plan")
        if who == HUMAN and not people[who]["found"]:
            continue  # registered concurrently by another submission: it exists now
        _require_active(people[who], "review a plan")
    raise Conflict(
        f"plan review {name!r} -> {who!r} could not be written after {_RETRIES} attempts "
        "(id prefixes taken, or the reviewer registered concurrently); nothing was written",
        constraint=None,
        sqlstate=None,
    )


def _refusal(plan_id: str) -> Op[dict[str, Any]]:
    why = yield one("plan_refusal", plan_review_id=plan_id)
    if why is None:
        raise NotFound(f"plan review {plan_id} does not exist")
    result: dict[str, Any] = why
    return result


def decide(
    plan_review_id: str | UUID | PlanReview,
    state: str,
    *,
    comment: str | None = None,
    reviewed_by: str | Identity | None = None,
) -> Op[PlanReview]:
    """Decide a pending plan: ``approved``, ``rejected`` or ``changes_requested``, by
    ``reviewed_by`` (default: the plan's reviewer); mails the requester (with the
    comment) and records ``plan_decided``. A plan that is not pending (decided already,
    or waiting for its resubmission) is ``InvalidArgument``, nothing written."""
    plan_id = check_plan_id(plan_review_id)
    choice = check_choice(state, "state", DECISIONS)
    if comment is not None:
        if not isinstance(comment, str):
            raise InvalidArgument(f"comment must be a string or None, got {type(comment).__name__}")
        check_body(comment, "comment")
    actor = None if reviewed_by is None else identity_name(reviewed_by, "reviewed_by")
    subject, body = _DECIDED[choice]
    row = yield one(
        "plan_decide",
        plan_review_id=plan_id,
        state=choice,
        comment=comment,
        reviewed_by=actor,
        subject=subject,
        body=(body + "\n\n%8$s") if comment else body,
        description=f"decided plan %1$s ({choice}): %2$s",
    )
    if row is not None:
        return PlanReview.from_row(row)
    why = yield from _refusal(plan_id)
    who = actor or why["reviewer"]
    people = yield from _people([who])
    _require_active(people[who], "decide a plan")
    short = plan_id[:8]
    if why["state"] == "changes_requested":
        raise InvalidArgument(
            f"plan review {short} is changes_requested: it is decided again only after "
            "resubmit_plan makes it pending"
        )
    raise InvalidArgument(
        f"plan review {short} is {why['state']}: only a pending plan is decided (cannot decide "
        f"{choice})"
    )


def resubmit(
    plan_review_id: str | UUID | PlanReview,
    *,
    summary: str | None = None,
    plan_path: str | None = None,
) -> Op[PlanReview]:
    """Resubmit a plan whose changes were requested: pending again, ``revision + 1``, the
    new summary and path when given, the decision cleared; mails the reviewer and records
    ``plan_submitted``. From any other state: ``InvalidArgument``, nothing written."""
    plan_id = check_plan_id(plan_review_id)
    text = None if summary is None else _summary(summary)
    path = (
        None if plan_path is None else check_str(plan_path, "plan_path", max_chars=_MAX_PATH_CHARS)
    )
    subject, body, description = _RESUBMIT
    row = yield one(
        "plan_resubmit",
        plan_review_id=plan_id,
        summary=text,
        plan_path=path,
        subject=subject,
        body=body,
        description=description,
    )
    if row is not None:
        return PlanReview.from_row(row)
    why = yield from _refusal(plan_id)
    people = yield from _people([why["requester"]])
    _require_active(people[why["requester"]], "resubmit a plan")
    raise InvalidArgument(
        f"plan review {plan_id[:8]} is {why['state']}: only a plan with changes requested is "
        "resubmitted"
    )


def get(plan_review_id: str | UUID | PlanReview) -> Op[PlanReview]:
    """One plan review; ``NotFound`` if there is none with that id."""
    plan_id = check_plan_id(plan_review_id)
    row = yield one("plan_get", plan_review_id=plan_id)
    if row is None:
        raise NotFound(f"plan review {plan_id} does not exist")
    return PlanReview.from_row(row)


def by_thread(thread_id: str) -> Op[PlanReview]:
    """The plan review whose mail thread is ``thread_id`` (``NotFound`` if none)."""
    check_key(thread_id, "thread_id")
    row = yield one("plan_by_thread", thread_id=thread_id)
    if row is None:
        raise NotFound(f"no plan review has thread {thread_id!r}")
    return PlanReview.from_row(row)


def pending_for_session(session_key: str) -> Op[list[PlanReview]]:
    """The session's plan reviews waiting for a decision (state pending), oldest first."""
    check_key(session_key, "session_key")
    rows = yield many("plan_pending_for_session", session_key=session_key)
    return [PlanReview.from_row(r) for r in rows]


def list_plans(
    *,
    state: str | None = None,
    requester: str | Identity | None = None,
    limit: int = 50,
    before: PlanReview | int | None = None,
) -> Op[list[PlanReview]]:
    """Plan reviews, newest first, optionally in one ``state`` and/or of one ``requester``
    (``NotFound`` if that identity does not exist); page with ``before=page[-1]`` (or its
    ``id``)."""
    page = dict(state=state, requester=requester, limit=limit, before=before)
    return (yield from listing("plan_list", PlanReview, PLAN_STATES, **page))


class PlanCalls(Area[FaceT]):
    """``store.plans``: plans approved before they are carried out (see
    ``ikigai_store.plans``). pending -> approved | rejected | changes_requested;
    changes_requested -> pending by ``resubmit_plan``. Each change, its mail (on the plan's
    thread) and its activity are one statement; a refused change writes nothing."""

    submit = operation(submit)
    decide = operation(decide)
    resubmit = operation(resubmit)
    get = operation(get)
    by_thread = operation(by_thread)
    pending_for_session = operation(pending_for_session)
    list = operation(list_plans)
