"""The review reference model itself (no database): the seed's table, refusals, audiences,
iterations, issue rules, prefixes and plans behave as documented, so the machine's oracle is
right before it judges the store."""

from __future__ import annotations

from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store import reviews as store_reviews
from tests.reference_mail import RefInvalid, RefNotFound
from tests.reference_reviews import (
    EVENTS,
    SEED_TRANSITIONS,
    STATES,
    TERMINAL,
    RefReviewWorld,
    check_issue,
)

RID = "1a2b3c4d-0000-4000-8000-000000000001"
RID2 = "1a2b3c4e-0000-4000-8000-000000000002"


def world(*names: str) -> RefReviewWorld:
    w = RefReviewWorld()
    for n in names or ("req", "rev", "rev2"):
        w.register(n)
    return w


def under_review(w: RefReviewWorld, rid: str = RID, id: int = 1) -> None:
    w.create(rid, id, "req", ["rev", "rev2"])
    w.fire(rid, "submit")
    w.fire(rid, "start")


def issue(**kw: Any) -> dict[str, Any]:
    base = {"issue_type": "bug", "severity": "low", "title": "t", "description": "d"}
    return {**base, **kw}


def test_seed_table_has_its_twelve_edges_and_terminal_states() -> None:
    """The table is the seed diagram: 12 edges, cancel from each of the 5 live states, none out
    of approved, rejected or cancelled."""
    assert len(SEED_TRANSITIONS) == 12
    live = [s for s in STATES if s not in TERMINAL]
    assert {s for (s, e) in SEED_TRANSITIONS if e == "cancel"} == set(live)
    assert not {s for (s, _) in SEED_TRANSITIONS} & TERMINAL
    assert {"approved", "rejected", "cancelled"} == TERMINAL


def test_the_store_table_equals_the_seed_table() -> None:
    """reviews.REVIEW_TRANSITIONS, read as edges, is exactly the seed's table; the vocabularies
    the package exports are the model's."""
    edges = {
        (source, event): target
        for event, (sources, target) in store_reviews.REVIEW_TRANSITIONS.items()
        for source in sources
    }
    assert edges == SEED_TRANSITIONS
    assert ik.REVIEW_STATES == STATES and ik.REVIEW_EVENTS == EVENTS
    assert set(ik.REVIEW_TERMINAL_STATES) == TERMINAL


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("event", EVENTS)
def test_every_event_from_every_state(state: str, event: str) -> None:
    """Each (state, event) pair is legal exactly when the seed has the edge; a refusal names
    the state and the event and changes nothing."""
    w = world()
    review = w.create(RID, 1, "req", ["rev"])
    review.state = state
    review.completed_at = w.now if state in TERMINAL else None
    if (state, event) in SEED_TRANSITIONS:
        assert w.fire(RID, event).state == SEED_TRANSITIONS[(state, event)]
        assert len(w.activities) == 1
    else:
        with pytest.raises(RefInvalid) as refused:
            w.fire(RID, event)
        assert state in refused.value.named and event in refused.value.named
        assert (review.state, w.mail, w.activities) == (state, [], [])


def test_audiences_and_actors() -> None:
    """submit mails the reviewers from the requester; start mails nobody; a decision mails the
    requester from the first reviewer; cancel of a new review mails nobody."""
    w = world()
    w.create(RID, 1, "req", ["rev", "rev2"])
    w.fire(RID, "submit")
    assert (w.mail[-1].sender, w.mail[-1].to) == ("req", ("rev", "rev2"))
    w.fire(RID, "start")
    assert len(w.mail) == 1 and w.activities[-1].identity == "rev"
    w.fire(RID, "request_changes", by="rev2")
    assert (w.mail[-1].sender, w.mail[-1].to) == ("rev2", ("req",))
    w.create(RID2, 2, "req", ["rev"])
    w.fire(RID2, "cancel")
    assert len(w.mail) == 2 and w.activities[-1].mail is None


def test_unknown_review_actor_and_retired_actor() -> None:
    """Unknown review: NotFound; a missing actor NotFound, a retired one Invalid (before the
    state is looked at)."""
    w = world()
    with pytest.raises(RefNotFound):
        w.fire(RID, "submit")
    w.create(RID, 1, "req", ["rev"])
    with pytest.raises(RefNotFound):
        w.fire(RID, "approve", by="ghost")
    w.retire("rev")
    with pytest.raises(RefInvalid, match="retired"):
        w.fire(RID, "approve")


def test_iterations_number_apply_and_comment() -> None:
    """Iterations count 1, 2; comment keeps under_review, reject terminates; outside
    under_review nothing is recorded."""
    w = world()
    under_review(w)
    w.record_iteration(RID, "rev", "comment", "s", issues=[issue()], issue_ids=[10])
    assert w.reviews[RID].state == "under_review"
    it = w.record_iteration(RID, "rev2", "reject", "no", issue_ids=[])
    assert it.iteration_num == 2 and w.reviews[RID].state == "rejected"
    assert w.reviews[RID].completed_at == w.now
    with pytest.raises(RefInvalid) as refused:
        w.record_iteration(RID, "rev", "comment", "s", issue_ids=[])
    assert "rejected" in refused.value.named
    assert len(w.reviews[RID].iterations) == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"issue_type": "typo"},
        {"issue_type": "Bug"},
        {"severity": "urgent"},
        {"line_start": 0, "file_path": "a"},
        {"line_start": 5, "line_end": 4, "file_path": "a"},
        {"line_end": 4, "file_path": "a"},
        {"line_start": 3},
        {"title": ""},
        {"colour": "red"},
        {"title": None},
    ],
)
def test_bad_issues_are_refused(bad: dict[str, Any]) -> None:
    """Unknown types (never mapped), severities, keys; bad lines; missing title: RefInvalid."""
    with pytest.raises(RefInvalid):
        check_issue(issue(**bad))


def test_open_issues_by_severity_rank_then_id() -> None:
    """critical, high, medium, low (not alphabetical), ties by id; resolved ones leave."""
    w = world()
    under_review(w)
    sev = ["low", "critical", "medium", "high", "critical"]
    w.record_iteration(
        RID, "rev", "comment", "s", issues=[issue(severity=s) for s in sev], issue_ids=range(1, 6)
    )
    assert [i.id for i in w.open_issues(RID)] == [2, 5, 4, 3, 1]
    w.resolve_issue(2, "fixed")
    assert [i.id for i in w.open_issues(RID)] == [5, 4, 3, 1]
    with pytest.raises(RefInvalid):
        w.resolve_issue(2, "wont_fix")
    with pytest.raises(RefInvalid):
        w.resolve_issue(5, "fixed", 2)
    with pytest.raises(RefNotFound):
        w.resolve_issue(99, "fixed")


def test_prefixes() -> None:
    """Unique prefix resolves; shared prefix is Invalid naming the count; bad prefixes too."""
    w = world()
    w.create(RID, 1, "req", ["rev"])
    w.create(RID2, 2, "req", ["rev"])
    assert w.resolve_prefix("1A2B3C4D").review_id == RID
    with pytest.raises(RefInvalid) as refused:
        w.resolve_prefix("1a2b3c")
    assert "2" in refused.value.named
    for bad in ("1a2", "1a2%", "1a_b", "xyz1", "1" * 33):
        with pytest.raises(RefInvalid):
            w.resolve_prefix(bad)
    with pytest.raises(RefNotFound):
        w.resolve_prefix("ffff")


def test_plans_flow_and_refusals() -> None:
    """User is registered on first use; decide only from pending; resubmit only from
    changes_requested; the revision counts submissions."""
    w = world("req")
    pid = "9f9f9f9f-0000-4000-8000-000000000001"
    plan = w.submit_plan(pid, 1, "req", "p.md", "T", "s", session_key="k")
    assert "User" in w.identities and w.mail[-1].to == ("User",)
    assert w.pending_for_session("k") == [plan]
    w.decide(pid, "changes_requested", "more")
    with pytest.raises(RefInvalid):
        w.decide(pid, "approved")
    w.resubmit_plan(pid, summary="s2")
    assert (plan.state, plan.revision, plan.reviewed_by) == ("pending", 2, None)
    w.decide(pid, "approved")
    with pytest.raises(RefInvalid):
        w.decide(pid, "rejected")
    with pytest.raises(RefInvalid):
        w.resubmit_plan(pid)
    with pytest.raises(RefNotFound):
        w.submit_plan("8f8f8f8f-0000-4000-8000-000000000001", 2, "req", "p", "T", "s", "ghost")
    w.check()
