"""Plan reviews: submission to the human (registered on first use) or a named reviewer,
decisions only from pending, resubmission after requested changes, their mail and activities,
reads, and refusals that write nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store import plans as plans_module
from tests.mailtools import Clock, rows

pytestmark = pytest.mark.db

TABLES = ("plan_reviews", "mail", "mail_recipients", "activities", "identities")


def counts(store: Any) -> dict[str, int]:
    return {t: rows(store, t) for t in TABLES}


def activities(store: Any) -> list[dict[str, Any]]:
    with store._connection() as conn:
        return conn.execute(
            "SELECT i.name, a.type, a.description, a.metadata FROM activities AS a "
            "JOIN identities AS i ON i.id = a.identity_id ORDER BY a.id"
        ).fetchall()


@pytest.fixture
def crew(ikigai_store: ik.Store) -> ik.Store:
    """planner (requester) and lead (a reviewer); "User" does not exist yet."""
    for name in ("planner", "lead"):
        ikigai_store.identities.register(name)
    return ikigai_store


def submit(store: Any, **kw: Any) -> ik.PlanReview:
    return store.plans.submit(
        "planner", "plans/parser.md", "Port the parser", "Lexer first, then tests.", **kw
    )


def test_submit_to_the_human_registers_it_once(crew: ik.Store) -> None:
    """The default reviewer "User" is registered on first use and reused; the plan is pending,
    revision 1, on its own thread; the request mail and plan_submitted are written with it."""
    clock = Clock(crew)
    first = submit(crew, session_key="sess-1")
    assert crew.identities.get("User").name == "User"
    assert (first.requester, first.reviewer, first.state, first.revision) == (
        "planner",
        "User",
        "pending",
        1,
    )
    assert first.thread_id == "plan-" + first.plan_review_id[:8] == "plan-" + first.short_id
    assert (first.session_key, first.created_at, first.reviewed_at) == ("sess-1", clock.now, None)
    assert (first.reviewer_comment, first.reviewed_by) == (None, None)
    [mail] = crew.mail.thread(first.thread_id)
    assert (mail.id, mail.sender, mail.to) == (first.mail_id, "planner", ("User",))
    assert mail.subject == "Plan review: Port the parser"
    assert "plans/parser.md" in mail.body and "Lexer first, then tests." in mail.body
    assert mail.metadata == {
        "plan_review_id": first.plan_review_id,
        "state": "pending",
        "revision": 1,
    }
    [act] = activities(crew)
    assert (act["name"], act["type"]) == ("planner", "plan_submitted")
    assert act["metadata"] == {
        "plan_review_id": first.plan_review_id,
        "revision": 1,
        "reviewer": "User",
        "mail_id": mail.id,
    }
    identities = rows(crew, "identities")
    second = submit(crew)
    assert rows(crew, "identities") == identities  # User exists now: not registered again
    assert second.reviewer == "User" and second.thread_id != first.thread_id
    assert crew.plans.get(first.plan_review_id) == first
    assert crew.plans.get(uuid.UUID(first.plan_review_id)) == first
    assert crew.plans.get(first) == first


def test_named_reviewers_must_exist(crew: ik.Store) -> None:
    """Another reviewer must exist (NotFound) and not be retired; nothing is written then —
    not even "User" is registered when the requester cannot submit."""
    before = counts(crew)
    with pytest.raises(ik.NotFound, match="'ghost'"):
        submit(crew, reviewer="ghost")
    with pytest.raises(ik.NotFound, match="'nobody'"):
        crew.plans.submit("nobody", "p.md", "T", "s")
    crew.identities.retire("lead")
    with pytest.raises(ik.InvalidArgument, match="'lead' is retired"):
        submit(crew, reviewer="lead")
    crew.identities.register("gone")
    crew.identities.retire("gone")
    with pytest.raises(ik.InvalidArgument, match="'gone' is retired"):
        crew.plans.submit("gone", "p.md", "T", "s")
    after = counts(crew)
    assert {**after, "identities": before["identities"]} == before
    assert after["identities"] == before["identities"] + 1  # "gone", registered by the test
    with pytest.raises(ik.NotFound):
        crew.identities.get("User")
    plan = submit(crew, reviewer=crew.identities.register("other"))
    assert plan.reviewer == "other"


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("planner", "", "T", "s"), {}),
        (("planner", "p.md", "", "s"), {}),
        (("planner", "p.md", "x" * 1001, "s"), {}),
        (("planner", "p.md", "T", None), {}),
        (("planner", "p.md", "T", "a\x00b"), {}),
        (("planner", 5, "T", "s"), {}),
        (("bad name", "p.md", "T", "s"), {}),
        (("planner", "p.md", "T", "s"), {"reviewer": ""}),
        (("planner", "p.md", "T", "s"), {"session_key": ""}),
        (("planner", "p.md", "T", "s"), {"session_key": "k" * 201}),
    ],
)
def test_submit_refuses_bad_arguments(
    crew: ik.Store, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Bad paths, titles, summaries, names and session keys: InvalidArgument, nothing written."""
    before = counts(crew)
    with pytest.raises(ik.InvalidArgument):
        crew.plans.submit(*args, **kwargs)
    assert counts(crew) == before


@pytest.mark.parametrize("state", ["approved", "rejected", "changes_requested"])
def test_decide_from_pending(crew: ik.Store, state: str) -> None:
    """A pending plan is decided by its reviewer (or reviewed_by); the requester is mailed the
    decision and its comment; plan_decided is recorded."""
    clock = Clock(crew)
    plan = submit(crew, reviewer="lead")
    clock.advance(minutes=5)
    decided = crew.plans.decide(plan, state, comment="Split the lexer.")
    assert (decided.state, decided.reviewed_by, decided.reviewer_comment) == (
        state,
        "lead",
        "Split the lexer.",
    )
    assert decided.reviewed_at == decided.updated_at == clock.now
    assert decided.mail_id == plan.mail_id  # the request mail
    [_, answer] = crew.mail.thread(plan.thread_id)
    assert (answer.sender, answer.to) == ("lead", ("planner",))
    assert "Split the lexer." in answer.body and plan.plan_path in answer.body
    assert answer.metadata == {"plan_review_id": plan.plan_review_id, "state": state, "revision": 1}
    act = activities(crew)[-1]
    assert (act["name"], act["type"]) == ("lead", "plan_decided")
    assert act["metadata"]["mail_id"] == answer.id
    assert crew.plans.get(plan) == decided


def test_redeciding_is_refused(crew: ik.Store) -> None:
    """An approved or rejected plan is never decided again; a plan with changes requested is
    decided again only after resubmission. Refusals name the state and write nothing."""
    for final in ("approved", "rejected"):
        plan = crew.plans.decide(submit(crew), final)
        before = counts(crew)
        for state in ("approved", "rejected", "changes_requested"):
            with pytest.raises(ik.InvalidArgument, match=f"is {final}"):
                crew.plans.decide(plan, state)
        with pytest.raises(ik.InvalidArgument, match=f"is {final}"):
            crew.plans.resubmit(plan)
        assert counts(crew) == before
    waiting = crew.plans.decide(submit(crew), "changes_requested")
    before = counts(crew)
    with pytest.raises(ik.InvalidArgument, match="resubmit_plan"):
        crew.plans.decide(waiting, "approved")
    assert counts(crew) == before


def test_resubmit_then_decide_again(crew: ik.Store) -> None:
    """Resubmitting makes the plan pending again (revision 2, new summary/path, decision
    cleared, a new request mail to the reviewer, plan_submitted); then it can be decided."""
    plan = crew.plans.decide(
        submit(crew, reviewer="lead"), "changes_requested", comment="More tests."
    )
    again = crew.plans.resubmit(plan, summary="Now with tests.", plan_path="plans/v2.md")
    assert (again.state, again.revision, again.summary, again.plan_path) == (
        "pending",
        2,
        "Now with tests.",
        "plans/v2.md",
    )
    assert (again.reviewed_by, again.reviewer_comment, again.reviewed_at) == (None, None, None)
    thread = crew.mail.thread(plan.thread_id)
    assert [(m.sender, m.to) for m in thread] == [
        ("planner", ("lead",)),
        ("lead", ("planner",)),
        ("planner", ("lead",)),
    ]
    assert again.mail_id == thread[-1].id
    assert thread[-1].subject == "Plan review (revision 2): Port the parser"
    assert activities(crew)[-1]["metadata"]["revision"] == 2
    before = counts(crew)
    with pytest.raises(ik.InvalidArgument, match="is pending"):
        crew.plans.resubmit(again)
    assert counts(crew) == before
    kept = crew.plans.resubmit(crew.plans.decide(again, "changes_requested"))
    assert (kept.summary, kept.plan_path, kept.revision) == ("Now with tests.", "plans/v2.md", 3)
    assert crew.plans.decide(kept, "approved", reviewed_by="planner").reviewed_by == "planner"


def test_decider_and_requester_checks(crew: ik.Store) -> None:
    """The decider must exist and not be retired; a retired requester cannot resubmit; an
    unknown plan is NotFound; bad arguments are InvalidArgument. Nothing is written."""
    plan = submit(crew, reviewer="lead")
    before = counts(crew)
    with pytest.raises(ik.NotFound, match="ghost"):
        crew.plans.decide(plan, "approved", reviewed_by="ghost")
    crew.identities.retire("lead")
    with pytest.raises(ik.InvalidArgument, match="'lead' is retired"):
        crew.plans.decide(plan, "approved")
    with pytest.raises(ik.NotFound):
        crew.plans.decide(str(uuid.uuid4()), "approved")
    with pytest.raises(ik.NotFound):
        crew.plans.resubmit(str(uuid.uuid4()))
    for bad_state in ("pending", "approve", "", None):
        with pytest.raises(ik.InvalidArgument):
            crew.plans.decide(plan, bad_state)  # type: ignore[arg-type]
    for bad_id in ("plan-1a2b3c4d", "x", 5):
        with pytest.raises(ik.InvalidArgument):
            crew.plans.get(bad_id)  # type: ignore[arg-type]
    with pytest.raises(ik.InvalidArgument):
        crew.plans.decide(plan, "approved", comment=5)  # type: ignore[arg-type]
    with pytest.raises(ik.InvalidArgument):
        crew.plans.resubmit(plan, plan_path="")
    assert counts(crew) == before
    decided = crew.plans.decide(plan, "changes_requested", reviewed_by="planner")
    crew.identities.retire("planner")
    with pytest.raises(ik.InvalidArgument, match="'planner' is retired"):
        crew.plans.resubmit(decided)


def test_reviewing_your_own_plan_mails_nobody(crew: ik.Store) -> None:
    """When the reviewer is the requester nobody is mailed (mail_id None); the plan and its
    activities are still written."""
    plan = submit(crew, reviewer="planner")
    assert plan.mail_id is None and crew.mail.thread(plan.thread_id) == []
    decided = crew.plans.decide(plan, "approved")
    assert decided.reviewed_by == "planner"
    assert [a["type"] for a in activities(crew)] == ["plan_submitted", "plan_decided"]
    assert rows(crew, "mail") == 0


def test_reads(crew: ik.Store) -> None:
    """by_thread finds a plan by its thread; pending_for_session lists a session's pending
    plans oldest first; list is newest first with filters and keyset pages."""
    a = submit(crew, session_key="s")
    b = submit(crew, session_key="s")
    c = submit(crew, session_key="t")
    crew.plans.decide(b, "approved")
    assert crew.plans.by_thread(a.thread_id) == a
    with pytest.raises(ik.NotFound):
        crew.plans.by_thread("plan-00000000")
    assert [p.id for p in crew.plans.pending_for_session("s")] == [a.id]
    assert crew.plans.pending_for_session("nope") == []
    assert [p.id for p in crew.plans.list()] == [c.id, b.id, a.id]
    assert [p.id for p in crew.plans.list(state="approved")] == [b.id]
    page = crew.plans.list(limit=2)
    assert [p.id for p in crew.plans.list(before=page[-1].id)] == [a.id]
    assert [p.id for p in crew.plans.list(before=page[-1])] == [a.id]
    assert crew.plans.list(requester="lead") == []
    with pytest.raises(ik.NotFound):
        crew.plans.list(requester="ghost")
    with pytest.raises(ik.InvalidArgument):
        crew.plans.list(state="open")
    with pytest.raises(ik.InvalidArgument):
        crew.plans.pending_for_session("")


def test_a_taken_thread_prefix_draws_another_id(
    crew: ik.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plan ids whose first 8 hex digits are taken are drawn again (one thread per plan)."""
    first = submit(crew)
    twin = uuid.UUID(first.plan_review_id[:8] + "-0000-4000-8000-000000000000")
    fresh = uuid.UUID("abcdef02-0000-4000-8000-000000000000")
    draws = iter([twin, fresh])
    monkeypatch.setattr(plans_module, "new_plan_uuid", lambda: next(draws))
    assert submit(crew).plan_review_id == str(fresh)
    assert rows(crew, "plan_reviews") == 2
    assert rows(crew, "mail") == 2  # the refused attempt's mail was rolled back with it
