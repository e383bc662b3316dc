"""Hand-checked cases for the tasks reference model (tests/reference_tasks.py); no database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import pytest

from tests.reference_mail import EPOCH, RefConflict, RefInvalid, RefNotFound
from tests.reference_tasks import RefTask, RefTaskWorld

SECOND = timedelta(seconds=1)


def world() -> RefTaskWorld:
    """ann and bob (bob retired); list 'L' owned by ann with tasks 1 <- 2 <- 3 (3 is blocked by
    2, which is blocked by 1)."""
    w = RefTaskWorld()
    w.register("ann")
    w.register("bob")
    w.retire("bob")
    w.create_list("L", "ann")
    w.upsert_task("L", "1", "one")
    w.upsert_task("L", "2", "two", blocked_by=["1"])
    w.upsert_task("L", "3", "three", blocked_by=["2"])
    return w


def ids(tasks: Sequence[RefTask]) -> list[str]:
    return [t.external_id for t in tasks]


def test_lists_are_idempotent_when_identical() -> None:
    """The same create_list twice is one list; another owner or path is a conflict; a missing
    owner is not found, a retired one invalid."""
    w = world()
    again = w.create_list("L", "ann")
    assert again is w.lists["L"]
    with pytest.raises(RefConflict):
        w.create_list("L", "ann", "/elsewhere")
    with pytest.raises(RefNotFound):
        w.create_list("M", "ghost")
    with pytest.raises(RefInvalid, match="retired"):
        w.create_list("M", "bob")
    with pytest.raises(RefInvalid):
        w.create_list("", "ann")
    assert [x.list_id for x in w.all_lists()] == ["L"]


def test_available_asks_whether_the_blockers_are_done() -> None:
    """Only tasks whose every blocker is completed or deleted are available; owned ones never."""
    w = world()
    assert ids(w.available_tasks("L")) == ["1"]
    w.upsert_task("L", "1", status="completed")
    assert ids(w.available_tasks("L")) == ["2"]
    w.upsert_task("L", "2", status="deleted")
    assert ids(w.available_tasks()) == ["3"]
    w.upsert_task("L", "3", owner="cat")
    assert w.available_tasks("L") == []
    assert w.task_stats("L") == (3, 1, 0, 1, 1, 0, 0)


def test_merge_rules_never_erase_and_times_are_set_once() -> None:
    """None and '' keep stored values; metadata merges; started_at/completed_at are set once."""
    w = world()
    w.upsert_task("L", "1", description="d", metadata={"a": 1, "b": 2}, owner="ann")
    w.now += SECOND
    t = w.upsert_task("L", "1", subject="", description="", owner="", metadata={"b": 3})
    assert (t.subject, t.description, t.owner, t.metadata) == ("one", "d", "ann", {"a": 1, "b": 3})
    assert t.updated_at == EPOCH + SECOND and t.created_at == EPOCH
    w.upsert_task("L", "1", status="in_progress")
    w.now += SECOND
    w.upsert_task("L", "1", status="pending")
    w.upsert_task("L", "1", status="in_progress")
    w.upsert_task("L", "1", status="completed")
    w.now += SECOND
    t = w.upsert_task("L", "1", status="pending")
    t = w.upsert_task("L", "1", status="completed")
    assert (t.started_at, t.completed_at) == (EPOCH + SECOND, EPOCH + 2 * SECOND)


def test_blocked_by_replaces_and_refuses_cycles_and_unknown_ids() -> None:
    """blocked_by replaces (None keeps, [] clears); self, cycles and unknown ids are refused
    and change nothing."""
    w = world()
    w.upsert_task("L", "3", blocked_by=["1", "1"])
    assert w.view(w.items[("L", "3")])[9] == ("1",)
    w.upsert_task("L", "3", subject="still three")
    assert w.view(w.items[("L", "3")])[9] == ("1",)
    with pytest.raises(RefInvalid, match="itself"):
        w.upsert_task("L", "1", blocked_by=["1"])
    w.upsert_task("L", "3", blocked_by=["2"])
    with pytest.raises(RefInvalid, match="cycle"):
        w.upsert_task("L", "1", blocked_by=["3"])
    assert w.is_cycle_path("L", "1", ["3"], ["1", "3", "2", "1"])
    assert not w.is_cycle_path("L", "1", ["3"], ["1", "2", "1"])
    with pytest.raises(RefNotFound, match="9"):
        w.upsert_task("L", "1", blocked_by=["9"])
    with pytest.raises(RefInvalid, match="subject"):
        w.upsert_task("L", "4", blocked_by=["1"])
    assert w.view(w.items[("L", "1")])[9] == ()
    w.upsert_task("L", "3", blocked_by=[])
    assert w.view(w.items[("L", "2")])[10] == ()


def test_claims() -> None:
    """Claims need a pending, unblocked task; another owner is a conflict; re-claiming is a
    no-op."""
    w = world()
    with pytest.raises(RefInvalid, match="blocked"):
        w.claim_task("L", "2", "ann")
    t = w.claim_task("L", "1", "ann")
    assert (t.status, t.owner, t.started_at) == ("in_progress", "ann", EPOCH)
    assert w.claim_task("L", "1", "ann") is t
    with pytest.raises(RefConflict, match="ann"):
        w.claim_task("L", "1", "cat")
    w.upsert_task("L", "1", status="completed")
    with pytest.raises(RefInvalid, match="completed"):
        w.claim_task("L", "1", "ann")
    w.upsert_task("L", "2", owner="cat")
    with pytest.raises(RefConflict, match="cat"):
        w.claim_task("L", "2", "ann")
    assert w.claim_task("L", "2", "cat").status == "in_progress"
    with pytest.raises(RefNotFound):
        w.claim_task("L", "9", "ann")


def test_releases() -> None:
    """Only the holder of an in_progress task releases it: pending, unowned, started_at kept;
    anyone else is a conflict naming the holder; other states are invalid."""
    w = world()
    t = w.claim_task("L", "1", "ann")
    with pytest.raises(RefConflict, match="ann"):
        w.release_task("L", "1", "cat")
    w.now += SECOND
    released = w.release_task("L", "1", "ann")
    assert (released.status, released.owner, released.started_at) == ("pending", None, EPOCH)
    assert released.updated_at == EPOCH + SECOND and ids(w.available_tasks("L")) == ["1"]
    with pytest.raises(RefInvalid, match="pending"):
        w.release_task("L", "1", "ann")
    w.upsert_task("L", "1", status="in_progress")
    with pytest.raises(RefInvalid, match="without an owner"):
        w.release_task("L", "1", "ann")
    w.upsert_task("L", "1", status="completed", owner="ann")
    with pytest.raises(RefInvalid, match="completed"):
        w.release_task("L", "1", "ann")
    with pytest.raises(RefNotFound):
        w.release_task("L", "9", "ann")
    with pytest.raises(RefNotFound):
        w.release_task("M", "1", "ann")
    with pytest.raises(RefInvalid):
        w.release_task("L", "1", "")
    assert t is released


def test_first_completion_by_a_live_identity_records_an_activity() -> None:
    """One task_complete activity per first completion whose owner (after the merge) is a live
    identity; none for free text, a retired identity, re-completion or a refusal."""
    w = world()
    w.register("cat")
    w.upsert_task("L", "1", owner="ann")
    w.now += SECOND
    w.upsert_task("L", "1", status="completed", subject="lexer")
    assert [(a.identity, a.external_id, a.subject, a.created_at) for a in w.activities] == [
        ("ann", "1", "lexer", EPOCH + SECOND)
    ]
    w.upsert_task("L", "1", status="completed")
    w.upsert_task("L", "1", status="pending")
    w.upsert_task("L", "1", status="completed", owner="cat")
    w.upsert_task("L", "4", subject="free", status="completed", owner="agent one")
    w.upsert_task("L", "5", subject="retired", status="completed", owner="bob")
    w.upsert_task("L", "6", subject="nobody", status="completed")
    with pytest.raises(RefInvalid, match="cycle"):
        w.upsert_task("L", "2", status="completed", owner="cat", blocked_by=["3"])
    assert w.items[("L", "2")].completed_at is None
    w.upsert_task("L", "7", subject="new", status="completed", owner="cat")
    w.upsert_task("L", "2", owner="cat")
    w.upsert_task("L", "2", status="completed", owner="agent two")
    assert [(a.identity, a.external_id) for a in w.activities] == [("ann", "1"), ("cat", "7")]


def test_sync_and_prune() -> None:
    """sync deletes the tasks not named; prune removes old finished tasks and their edges, so
    their dependents are no longer blocked by them."""
    w = world()
    assert w.sync_list("L", ["2", "3", "7"]) == 1
    assert w.lists["L"].last_synced_at == EPOCH
    assert w.sync_list("L", ["2", "3"]) == 0
    assert ids(w.available_tasks("L")) == ["2"]
    w.now += timedelta(hours=2)
    assert w.prune(timedelta(hours=3)) == 0
    assert w.prune(timedelta(hours=1)) == 1
    assert ("L", "1") not in w.items and w.view(w.items[("L", "2")])[9] == ()
    assert ids(w.available_tasks("L")) == ["2"]
    with pytest.raises(RefInvalid):
        w.prune(timedelta(-1))
    w.check()
