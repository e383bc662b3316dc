"""Tasks: lists, Subtrate's merge rules, dependencies as a relation (cycles refused), availability,
guarded claims and releases, the task_complete activity, counts, sync and prune; every refusal
writes nothing (both faces)."""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

import ikigai_store as ik
from tests.mailtools import Clock, rows

pytestmark = pytest.mark.db

SECOND = timedelta(seconds=1)


def footprint(store: Any) -> tuple[Any, ...]:
    """Everything the task calls can write: lists, tasks (every column), edges, activities."""
    with store._connection() as conn:
        row = conn.execute(
            "SELECT (SELECT string_agg(concat_ws('|', id, list_id, owner_id, watch_path, "
            "        last_synced_at), ',' ORDER BY id) FROM task_lists) AS lists,"
            " (SELECT string_agg(concat_ws('|', id, list_id, external_id, subject, description,"
            "        active_form, metadata, status, owner, created_at, updated_at, started_at,"
            "        completed_at), ',' ORDER BY id) FROM tasks) AS tasks,"
            " (SELECT string_agg(task_id || '<' || blocked_by_id, ','"
            "        ORDER BY task_id, blocked_by_id) FROM task_deps) AS deps,"
            " (SELECT string_agg(concat_ws('|', id, identity_id, type, description, metadata),"
            "        ',' ORDER BY id) FROM activities) AS activities"
        ).fetchone()
    return (row["lists"], row["tasks"], row["deps"], row["activities"])


def refused(store: Any, error: type[Exception], call: Callable[[], object], match: str) -> str:
    """``call`` raises ``error`` matching ``match`` and writes nothing; returns the message."""
    before = footprint(store)
    with pytest.raises(error, match=match) as info:
        call()
    assert footprint(store) == before, "a refused call wrote something"
    return str(info.value)


@pytest.fixture
def board(ikigai_store: ik.Store) -> ik.Store:
    """ann (owner of list 'L') and bob; tasks 1 <- 2 <- 3 of 'L' (3 is blocked by 2, 2 by 1);
    the database clock at mailtools.EPOCH."""
    Clock(ikigai_store)
    ikigai_store.identities.register("ann")
    ikigai_store.identities.register("bob")
    ikigai_store.tasks.create_list("L", "ann", watch_path="/home/ann/.claude/tasks/L")
    ikigai_store.tasks.upsert("L", "1", subject="Write the lexer")
    ikigai_store.tasks.upsert("L", "2", subject="Write the parser", blocked_by=["1"])
    ikigai_store.tasks.upsert("L", "3", subject="Ship it", blocked_by=["2"])
    return ikigai_store


def available(store: Any, list_id: str | None = "L") -> list[str]:
    return [t.external_id for t in store.tasks.available(list_id)]


# ---------------------------------------------------------------- lists


def test_create_list_is_idempotent_when_identical(ikigai_store: ik.Store) -> None:
    """The same create_list again returns the list; another owner or watch_path is a Conflict."""
    ann = ikigai_store.identities.register("ann")
    ikigai_store.identities.register("bob")
    made = ikigai_store.tasks.create_list("L", ann, watch_path="/w")
    assert (made.list_id, made.owner, made.watch_path, made.last_synced_at) == (
        "L",
        "ann",
        "/w",
        None,
    )
    assert ikigai_store.tasks.create_list("L", "ann", watch_path="/w") == made
    assert ikigai_store.tasks.get_list("L") == made == ikigai_store.tasks.get_list(made)
    conflict = refused(
        ikigai_store, ik.Conflict, lambda: ikigai_store.tasks.create_list("L", "bob"), "'L'"
    )
    assert "ann" in conflict
    ikigai_store.tasks.create_list("M", "bob")
    assert [x.list_id for x in ikigai_store.tasks.lists()] == ["L", "M"]


def test_create_list_needs_a_live_owner(ikigai_store: ik.Store) -> None:
    """A missing owner is NotFound, a retired one InvalidArgument; nothing is written."""
    ikigai_store.identities.register("old")
    ikigai_store.identities.retire("old")
    refused(
        ikigai_store, ik.NotFound, lambda: ikigai_store.tasks.create_list("L", "ghost"), "ghost"
    )
    refused(
        ikigai_store,
        ik.InvalidArgument,
        lambda: ikigai_store.tasks.create_list("L", "old"),
        "retired",
    )
    with pytest.raises(ik.NotFound, match="'nope'"):
        ikigai_store.tasks.get_list("nope")
    assert rows(ikigai_store, "task_lists") == 0


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("", "ann"), {}, "list_id"),
        (("x" * 201, "ann"), {}, "list_id"),
        (("a\tb", "ann"), {}, "control"),
        ((7, "ann"), {}, "list_id"),
        (("L", "not a name"), {}, "owner"),
        (("L", "ann"), {"watch_path": ""}, "watch_path"),
        (("L", "ann"), {"watch_path": "a\x00b"}, "NUL"),
        (("L", "ann"), {"watch_path": 3}, "watch_path"),
    ],
)
def test_create_list_refuses_bad_input(
    ikigai_store: ik.Store, args: tuple[Any, ...], kwargs: Any, match: str
) -> None:
    """Bad list ids, owners and watch paths are InvalidArgument; nothing is written."""
    ikigai_store.identities.register("ann")
    refused(
        ikigai_store,
        ik.InvalidArgument,
        lambda: ikigai_store.tasks.create_list(*args, **kwargs),
        match,
    )


# ---------------------------------------------------------------- upsert and merge rules


def test_new_task_fields_and_defaults(board: ik.Store) -> None:
    """A new task: pending, unowned, metadata {}, created_at = updated_at = now."""
    t = board.tasks.upsert(
        "L",
        "4",
        subject="Docs",
        description="Write the README",
        active_form="Writing docs",
        metadata={"tags": ["docs"], "n": 1},
    )
    assert (t.list_id, t.external_id, t.subject, t.description, t.active_form) == (
        "L",
        "4",
        "Docs",
        "Write the README",
        "Writing docs",
    )
    assert (t.status, t.owner, t.metadata, t.blocked_by, t.blocks) == (
        "pending",
        None,
        {"tags": ["docs"], "n": 1},
        (),
        (),
    )
    assert t.created_at == t.updated_at and (t.started_at, t.completed_at) == (None, None)
    assert board.tasks.get("L", "4") == t
    assert board.tasks.upsert("L", "5", subject="x", metadata=None).metadata == {}


def test_empty_or_none_never_erases(board: ik.Store) -> None:
    """None and '' leave subject, description, active_form, status and owner as stored;
    metadata merges its top-level keys."""
    clock = Clock(board)
    board.tasks.upsert(
        "L", "1", description="d", active_form="Lexing", owner="bob", metadata={"a": 1, "b": 2}
    )
    clock.advance(seconds=5)
    t = board.tasks.upsert(
        "L", "1", subject="", description="", active_form="", status="", owner="", metadata={}
    )
    assert (t.subject, t.description, t.active_form, t.status, t.owner) == (
        "Write the lexer",
        "d",
        "Lexing",
        "pending",
        "bob",
    )
    assert t.metadata == {"a": 1, "b": 2} and t.updated_at == clock.now
    t = board.tasks.upsert("L", "1", metadata={"b": None, "c": [1]}, subject="Lexer")
    assert (t.subject, t.metadata) == ("Lexer", {"a": 1, "b": None, "c": [1]})
    assert t.created_at < t.updated_at


def test_started_and_completed_are_set_once(board: ik.Store) -> None:
    """started_at is the first move to in_progress, completed_at the first completion; neither
    moves later, even when the task is reopened."""
    clock = Clock(board)
    clock.advance(seconds=1)
    first = board.tasks.upsert("L", "1", status="in_progress").started_at
    assert first == clock.now
    clock.advance(seconds=1)
    board.tasks.upsert("L", "1", status="pending")
    board.tasks.upsert("L", "1", status="in_progress")
    done = board.tasks.upsert("L", "1", status="completed")
    assert (done.started_at, done.completed_at) == (first, clock.now)
    clock.advance(seconds=1)
    board.tasks.upsert("L", "1", status="pending")
    again = board.tasks.upsert("L", "1", status="completed")
    assert (again.started_at, again.completed_at) == (first, done.completed_at)
    direct = board.tasks.upsert("L", "9", subject="done at once", status="completed")
    assert (direct.started_at, direct.completed_at) == (None, clock.now)


def test_a_new_task_needs_a_subject(board: ik.Store) -> None:
    """An upsert that would create a task without a subject is refused and writes nothing, with
    or without dependencies."""
    for kwargs in ({}, {"subject": ""}, {"status": "completed"}, {"blocked_by": ["1"]}):
        refused(
            board,
            ik.InvalidArgument,
            functools.partial(board.tasks.upsert, "L", "new", **kwargs),
            "needs a subject",
        )


def test_missing_list_and_task(board: ik.Store) -> None:
    """A missing list or task is NotFound (upsert, get_task, tasks, available, stats, sync)."""
    for call in (
        lambda: board.tasks.upsert("nope", "1", subject="x"),
        lambda: board.tasks.upsert("nope", "1", subject="x", blocked_by=["2"]),
        lambda: board.tasks.get("nope", "1"),
        lambda: board.tasks.list("nope"),
        lambda: board.tasks.available("nope"),
        lambda: board.tasks.stats("nope"),
        lambda: board.tasks.sync("nope", []),
        lambda: board.tasks.claim("nope", "1", "ann"),
    ):
        refused(board, ik.NotFound, call, "list 'nope' does not exist")
    refused(board, ik.NotFound, lambda: board.tasks.get("L", "9"), "task '9'")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"subject": 5}, "subject"),
        ({"subject": "x" * 1001}, "subject"),
        ({"description": b"bytes"}, "description"),
        ({"description": "a\x00b"}, "NUL"),
        ({"active_form": "x" * 1001}, "active_form"),
        ({"metadata": ["not", "an", "object"]}, "metadata"),
        ({"metadata": "{}"}, "metadata"),
        ({"metadata": {"a": float("nan")}}, "metadata"),
        ({"metadata": {1: "int key"}}, "metadata"),
        ({"status": "done"}, "status"),
        ({"status": 1}, "status"),
        ({"owner": "x" * 201}, "owner"),
        ({"owner": "a\nb"}, "control"),
        ({"owner": 7}, "owner"),
        ({"blocked_by": "1"}, "blocked_by"),
        ({"blocked_by": [1]}, "blocked_by"),
        ({"blocked_by": [""]}, "blocked_by"),
        ({"blocked_by": ["1"] * 10_001}, "blocked_by"),
        ({"blocked_by": {"1": True}}, "blocked_by"),
    ],
)
def test_upsert_refuses_bad_input(board: ik.Store, kwargs: Any, match: str) -> None:
    """Every bad argument is InvalidArgument naming it; nothing is written."""
    refused(board, ik.InvalidArgument, lambda: board.tasks.upsert("L", "2", **kwargs), match)


@pytest.mark.parametrize(("list_id", "external_id"), [("", "1"), ("L", ""), ("L", "\x7f")])
def test_bad_keys_are_refused(board: ik.Store, list_id: str, external_id: str) -> None:
    """Empty or control-character ids are InvalidArgument for every call that takes them."""
    for call in (
        lambda: board.tasks.upsert(list_id, external_id, subject="x"),
        lambda: board.tasks.get(list_id, external_id),
        lambda: board.tasks.claim(list_id, external_id, "ann"),
    ):
        refused(board, ik.InvalidArgument, call, "list_id|external_id")


def test_identity_and_list_objects_are_accepted(board: ik.Store) -> None:
    """A TaskList stands for its list_id and an Identity for its name (as owner)."""
    the_list = board.tasks.get_list("L")
    bob = board.identities.get("bob")
    t = board.tasks.upsert(the_list, "1", owner=bob)
    assert t.owner == "bob"
    assert board.tasks.claim(the_list, "1", bob).owner == "bob"
    assert [x.external_id for x in board.tasks.list(the_list)] == ["1", "2", "3"]


# ---------------------------------------------------------------- dependencies


def test_blocked_by_replaces_none_keeps_empty_clears(board: ik.Store) -> None:
    """blocked_by replaces the task's dependencies; None leaves them; [] clears them; duplicates
    collapse; blocks shows the other direction."""
    board.tasks.upsert("L", "4", subject="four")
    t = board.tasks.upsert("L", "3", blocked_by=["4", "1", "1"])
    assert t.blocked_by == ("1", "4")
    assert board.tasks.upsert("L", "3", subject="Ship").blocked_by == ("1", "4")
    assert board.tasks.get("L", "1").blocks == ("2", "3")
    assert board.tasks.get("L", "2").blocks == ()
    assert board.tasks.upsert("L", "3", blocked_by=[]).blocked_by == ()
    assert board.tasks.get("L", "1").blocks == ("2",)
    assert rows(board, "task_deps") == 1


def test_unknown_blockers_are_not_found(board: ik.Store) -> None:
    """A blocker that names no task of the list is NotFound naming it; nothing is written (not
    even the task's other fields)."""
    board.tasks.create_list("M", "ann")
    board.tasks.upsert("M", "7", subject="other list")
    message = refused(
        board,
        ik.NotFound,
        lambda: board.tasks.upsert("L", "3", subject="changed", blocked_by=["1", "7", "8"]),
        "blocked_by names no task",
    )
    assert "7, 8" in message


def check_cycle_message(store: Any, message: str, external_id: str, blockers: list[str]) -> None:
    """The path in ``message`` starts and ends at the task, and each step is an edge of the
    graph the upsert would have made."""
    path = re.search(r": ((?:\S+ -> )+\S+) \(", message)
    assert path is not None, message
    steps = path.group(1).split(" -> ")
    edges = {t.external_id: set(t.blocked_by) for t in store.tasks.list("L")}
    edges[external_id] = set(blockers)
    assert steps[0] == steps[-1] == external_id
    assert all(b in edges[a] for a, b in itertools.pairwise(steps)), steps


def test_cycles_are_refused_with_their_path(board: ik.Store) -> None:
    """A dependency on itself or one closing a cycle is InvalidArgument naming the cycle; the
    whole upsert (fields and edges) is not written."""
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.upsert("L", "1", blocked_by=["1"]),
        r"itself .*1 -> 1",
    )
    message = refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.upsert("L", "1", subject="changed", blocked_by=["3"]),
        "dependency cycle",
    )
    assert "1 -> 3 -> 2 -> 1" in message
    check_cycle_message(board, message, "1", ["3"])
    board.tasks.upsert("L", "4", subject="four", blocked_by=["1"])
    board.tasks.upsert("L", "5", subject="five", blocked_by=["4", "3"])
    message = refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.upsert("L", "2", blocked_by=["1", "5"]),
        "cycle",
    )
    check_cycle_message(board, message, "2", ["1", "5"])
    # A diamond is not a cycle.
    assert board.tasks.upsert("L", "3", blocked_by=["2", "4"]).blocked_by == ("2", "4")


def test_refused_upsert_leaves_the_callers_transaction_usable(board: ik.Store) -> None:
    """Inside store.transaction(), a refused upsert rolls back only itself."""
    with board.transaction():
        board.tasks.upsert("L", "4", subject="kept")
        with pytest.raises(ik.InvalidArgument):
            board.tasks.upsert("L", "1", blocked_by=["3"])
        with pytest.raises(ik.InvalidArgument):
            board.tasks.upsert("L", "5")
        board.tasks.upsert("L", "4", blocked_by=["3"])
    assert board.tasks.get("L", "4").blocked_by == ("3",)
    with pytest.raises(ik.NotFound):
        board.tasks.get("L", "5")


# ---------------------------------------------------------------- availability and claims


def test_available_asks_the_blockers(board: ik.Store) -> None:
    """Available: pending, unowned, every blocker completed or deleted (in_progress blocks)."""
    assert available(board) == ["1"]
    board.tasks.upsert("L", "1", status="in_progress")
    assert available(board) == []
    board.tasks.upsert("L", "1", status="completed")
    assert available(board) == ["2"]
    board.tasks.upsert("L", "2", status="deleted")
    assert available(board) == ["3"]
    board.tasks.upsert("L", "3", owner="bob")
    assert available(board) == []
    board.tasks.create_list("M", "bob")
    board.tasks.upsert("M", "1", subject="elsewhere")
    board.tasks.upsert("L", "4", subject="late")
    assert available(board, None) == ["1", "4"]  # over every list, in id order
    assert [t.list_id for t in board.tasks.available()] == ["M", "L"]
    assert available(board, "M") == ["1"]


def test_owned_lists_an_owners_tasks_across_lists(board: ik.Store) -> None:
    """tasks.owned: the owner's tasks of every list in id order, optionally of one status;
    free-text owners count, other owners' tasks and unknown owners give nothing."""
    board.tasks.create_list("M", "bob")
    board.tasks.upsert("M", "x", subject="Elsewhere", owner="ann", status="in_progress")
    board.tasks.claim("L", "1", "ann")
    board.tasks.upsert("L", "3", owner="bob")
    assert [(t.list_id, t.external_id) for t in board.tasks.owned("ann")] == [
        ("L", "1"),
        ("M", "x"),
    ]
    ann = board.identities.get("ann")
    assert [t.external_id for t in board.tasks.owned(ann, status="in_progress")] == ["1", "x"]
    assert board.tasks.owned("ann", status="completed") == []
    assert [t.external_id for t in board.tasks.owned("bob")] == ["3"]
    assert board.tasks.owned("nobody") == []
    with pytest.raises(ik.InvalidArgument, match="status"):
        board.tasks.owned("ann", status="done")


def test_claim_is_guarded(board: ik.Store) -> None:
    """claim makes a task in_progress with its owner; a second claimer gets Conflict naming the
    owner; the owner claiming again gets the task unchanged."""
    clock = Clock(board)
    clock.advance(seconds=3)
    t = board.tasks.claim("L", "1", "ann")
    assert (t.status, t.owner, t.started_at, t.updated_at) == (
        "in_progress",
        "ann",
        clock.now,
        clock.now,
    )
    assert t.blocks == ("2",)
    message = refused(
        board, ik.Conflict, lambda: board.tasks.claim("L", "1", "bob"), "held by 'ann'"
    )
    assert "'1'" in message
    clock.advance(seconds=1)
    assert board.tasks.claim("L", "1", "ann") == t


def test_claim_refusals_say_why(board: ik.Store) -> None:
    """Blocked, completed, deleted and ownerless in_progress tasks are InvalidArgument saying
    why; a task assigned to the claimant can be claimed by it only."""
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.claim("L", "2", "ann"),
        r"blocked by 1 \(",
    )
    board.tasks.upsert("L", "1", status="completed")
    refused(board, ik.InvalidArgument, lambda: board.tasks.claim("L", "1", "ann"), "completed")
    board.tasks.upsert("L", "1", status="deleted")
    refused(board, ik.InvalidArgument, lambda: board.tasks.claim("L", "1", "ann"), "deleted")
    board.tasks.upsert("L", "2", status="in_progress")
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.claim("L", "2", "ann"),
        "without an owner",
    )
    board.tasks.upsert("L", "2", status="completed")
    board.tasks.upsert("L", "3", owner="bob")
    refused(board, ik.Conflict, lambda: board.tasks.claim("L", "3", "ann"), "'bob'")
    assert board.tasks.claim("L", "3", "bob").status == "in_progress"
    refused(board, ik.NotFound, lambda: board.tasks.claim("L", "9", "ann"), "'9'")
    refused(board, ik.InvalidArgument, lambda: board.tasks.claim("L", "3", ""), "owner")


def test_release_gives_a_task_back(board: ik.Store) -> None:
    """The holder releases an in_progress task: pending, unowned, started_at kept, available
    again; another agent may claim it then."""
    clock = Clock(board)
    clock.advance(seconds=1)
    started = board.tasks.claim("L", "1", "agent-a").started_at
    clock.advance(seconds=1)
    t = board.tasks.release("L", "1", "agent-a")
    assert (t.status, t.owner, t.started_at, t.updated_at, t.completed_at) == (
        "pending",
        None,
        started,
        clock.now,
        None,
    )
    assert t.blocks == ("2",) and board.tasks.get("L", "1") == t
    assert available(board) == ["1"]
    clock.advance(seconds=1)
    again = board.tasks.claim("L", "1", "agent-b")
    assert (again.owner, again.started_at) == ("agent-b", started)
    bob = board.identities.get("bob")
    board.tasks.upsert(board.tasks.get_list("L"), "1", owner=bob)
    assert board.tasks.release(board.tasks.get_list("L"), "1", bob).owner is None


def test_complete_is_the_holders(board: ik.Store) -> None:
    """complete: the holder finishes its in_progress task (completed, activity written once,
    the next task available); anyone else, or a task not in progress, is refused writing
    nothing."""
    board.tasks.claim("L", "1", "bob")
    refused(board, ik.Conflict, lambda: board.tasks.complete("L", "1", "ann"), "held by 'bob'")
    done = board.tasks.complete("L", "1", "bob")
    assert (done.status, done.owner) == ("completed", "bob") and done.completed_at is not None
    assert available(board) == ["2"]
    assert [a.type for a in board.activities.feed(identity="bob")] == ["task_complete"]
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.complete("L", "1", "bob"),
        "is completed: only an in_progress task can be completed",
    )
    refused(board, ik.InvalidArgument, lambda: board.tasks.complete("L", "2", "bob"), "pending")
    refused(board, ik.NotFound, lambda: board.tasks.complete("L", "9", "bob"), "task '9'")
    refused(board, ik.NotFound, lambda: board.tasks.complete("nope", "1", "bob"), "'nope'")


def test_release_refusals_say_why(board: ik.Store) -> None:
    """Only the holder releases (Conflict naming it); a task not in progress, or in progress
    without an owner, is InvalidArgument; a missing list or task NotFound; nothing written."""
    board.tasks.claim("L", "1", "agent-a")
    message = refused(
        board,
        ik.Conflict,
        lambda: board.tasks.release("L", "1", "agent-b"),
        "held by 'agent-a'",
    )
    assert "'1'" in message and "agent-b" in message
    board.tasks.release("L", "1", "agent-a")
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.release("L", "1", "agent-a"),
        "is pending: only an in_progress task",
    )
    board.tasks.upsert("L", "2", owner="agent-a")  # assigned, but not in progress
    refused(board, ik.InvalidArgument, lambda: board.tasks.release("L", "2", "agent-a"), "pending")
    board.tasks.upsert("L", "3", status="in_progress")
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.release("L", "3", "agent-a"),
        "without an owner",
    )
    board.tasks.upsert("L", "3", status="completed", owner="agent-a")
    refused(
        board,
        ik.InvalidArgument,
        lambda: board.tasks.release("L", "3", "agent-a"),
        "completed",
    )
    board.tasks.upsert("L", "3", status="deleted")
    refused(board, ik.InvalidArgument, lambda: board.tasks.release("L", "3", "agent-a"), "deleted")
    refused(board, ik.NotFound, lambda: board.tasks.release("L", "9", "agent-a"), "task '9'")
    refused(
        board,
        ik.NotFound,
        lambda: board.tasks.release("nope", "1", "agent-a"),
        "list 'nope' does not exist",
    )
    for args in (("L", "1", ""), ("L", "", "a"), ("", "1", "a"), ("L", "1", "a\nb")):
        refused(
            board,
            ik.InvalidArgument,
            functools.partial(board.tasks.release, *args),
            "owner|external_id|list_id|control",
        )


def completions(store: Any) -> list[tuple[str, str, dict[str, Any]]]:
    """The task_complete activities, oldest first: (identity, description, metadata)."""
    found = store.activities.feed(activity_type="task_complete", limit=100)
    return [(a.identity, a.description, a.metadata) for a in reversed(found)]


def test_first_completion_records_one_activity(board: ik.Store) -> None:
    """Completing a task whose owner is a live identity records one task_complete activity of
    that identity, at the completion time; completing it again (or after reopening) records
    none."""
    clock = Clock(board)
    board.tasks.claim("L", "1", "bob")
    clock.advance(seconds=2)
    done = board.tasks.upsert("L", "1", status="completed")
    [activity] = board.activities.feed(identity="bob")
    assert (activity.type, activity.description, activity.metadata, activity.created_at) == (
        "task_complete",
        'completed task 1 "Write the lexer" in list L',
        {"list_id": "L", "external_id": "1", "task_id": done.id},
        done.completed_at,
    )
    board.tasks.upsert("L", "1", status="completed", subject="Lexer, again")
    board.tasks.upsert("L", "1", status="pending")
    board.tasks.upsert("L", "1", status="completed")
    assert len(board.activities.feed(identity="bob")) == 1
    assert board.activities.feed(identity="ann") == []


def test_the_owner_after_the_merge_is_credited(board: ik.Store) -> None:
    """The owner given with the completion wins over the stored one; a new task created
    completed records too; the subject in the description is the merged one."""
    board.tasks.upsert("L", "1", owner="ann")
    board.tasks.upsert("L", "1", status="completed", owner="bob", subject="Lex")
    board.tasks.upsert("L", "4", subject="Born done", status="completed", owner="ann")
    board.tasks.upsert("L", "5", subject="Assigned", owner="ann")
    board.tasks.upsert("L", "5", status="completed", owner="")  # "" keeps ann
    assert [(who, text) for who, text, _ in completions(board)] == [
        ("bob", 'completed task 1 "Lex" in list L'),
        ("ann", 'completed task 4 "Born done" in list L'),
        ("ann", 'completed task 5 "Assigned" in list L'),
    ]


def test_free_text_and_retired_owners_record_nothing(board: ik.Store) -> None:
    """A free-text owner (no identity of that name), no owner at all, or a retired identity:
    the task completes and no activity is written."""
    board.identities.register("old")
    board.identities.retire("old")
    board.tasks.claim("L", "1", "coder-1")
    assert board.tasks.upsert("L", "1", status="completed").completed_at is not None
    board.tasks.upsert("L", "2", status="completed")
    board.tasks.upsert("L", "3", status="completed", owner="old")
    assert completions(board) == []


def test_refused_completions_record_nothing(board: ik.Store) -> None:
    """A completion refused for a cycle, a missing blocker or a missing subject writes no
    activity (nor anything else)."""
    board.tasks.upsert("L", "1", owner="bob")
    for call, error, match in (
        (
            lambda: board.tasks.upsert("L", "1", status="completed", blocked_by=["3"]),
            ik.InvalidArgument,
            "cycle",
        ),
        (
            lambda: board.tasks.upsert("L", "1", status="completed", blocked_by=["9"]),
            ik.NotFound,
            "no task",
        ),
        (
            lambda: board.tasks.upsert("L", "new", status="completed", owner="bob"),
            ik.InvalidArgument,
            "needs a subject",
        ),
        (
            lambda: board.tasks.upsert("nope", "1", subject="x", status="completed"),
            ik.NotFound,
            "list 'nope'",
        ),
    ):
        refused(board, error, call, match)
    assert completions(board) == []
    board.tasks.upsert("L", "1", status="completed")
    assert [who for who, _, _ in completions(board)] == ["bob"]


def test_the_activity_is_part_of_the_callers_transaction(board: ik.Store) -> None:
    """Inside store.transaction(), the completion and its activity commit or roll back
    together."""
    board.tasks.upsert("L", "1", owner="bob")
    with pytest.raises(RuntimeError), board.transaction():
        board.tasks.upsert("L", "1", status="completed")
        assert len(completions(board)) == 1
        raise RuntimeError("abandon")
    assert board.tasks.get("L", "1").completed_at is None and completions(board) == []
    with board.transaction():
        board.tasks.upsert("L", "1", status="completed")
    assert len(completions(board)) == 1


def test_stats_count_in_one_query(board: ik.Store) -> None:
    """task_stats counts per status, available and blocked, per list or over all lists."""
    assert board.tasks.stats("L") == ik.TaskStats(3, 3, 0, 0, 0, 1, 2)
    board.tasks.claim("L", "1", "ann")
    board.tasks.upsert("L", "4", subject="four", status="deleted")
    assert board.tasks.stats("L") == ik.TaskStats(4, 2, 1, 0, 1, 0, 2)
    board.tasks.upsert("L", "1", status="completed")
    board.tasks.create_list("M", "bob")
    board.tasks.upsert("M", "1", subject="m")
    assert board.tasks.stats("L") == ik.TaskStats(4, 2, 0, 1, 1, 1, 1)
    assert board.tasks.stats() == ik.TaskStats(5, 3, 0, 1, 1, 2, 1)
    with pytest.raises(ik.InvalidArgument):
        board.tasks.list("L", status="done")
    assert [t.external_id for t in board.tasks.list("L", status="pending")] == ["2", "3"]


# ---------------------------------------------------------------- sync and prune


def test_sync_list_mirrors_the_source(board: ik.Store) -> None:
    """sync_list deletes the tasks not named (ignoring unknown names), sets last_synced_at and
    returns the count; a deleted blocker no longer blocks."""
    clock = Clock(board)
    clock.advance(seconds=7)
    assert board.tasks.sync("L", ["2", "3", "99"]) == 1
    assert board.tasks.get("L", "1").status == "deleted"
    assert board.tasks.get_list("L").last_synced_at == clock.now
    assert available(board) == ["2"]
    assert board.tasks.sync("L", ("2", "3")) == 0
    assert board.tasks.sync("L", []) == 2
    refused(board, ik.InvalidArgument, lambda: board.tasks.sync("L", "23"), "active")
    nothing: Any = [None]
    refused(board, ik.InvalidArgument, lambda: board.tasks.sync("L", nothing), "active")


def test_prune_removes_old_finished_tasks_and_their_edges(board: ik.Store) -> None:
    """prune deletes completed and deleted tasks older than the cutoff with their edges; their
    dependents are not blocked by them; newer or unfinished tasks stay."""
    clock = Clock(board)
    board.tasks.upsert("L", "1", status="completed")
    clock.advance(hours=2)
    board.tasks.upsert("L", "4", subject="fresh", status="deleted")
    board.tasks.upsert("L", "5", subject="old pending")
    clock.advance(hours=2)
    assert board.tasks.prune(older_than=timedelta(hours=5)) == 0
    assert board.tasks.prune(older_than=timedelta(hours=3)) == 1
    assert [t.external_id for t in board.tasks.list("L")] == ["2", "3", "4", "5"]
    assert board.tasks.get("L", "2").blocked_by == ()
    assert available(board) == ["2", "5"]
    assert board.tasks.prune(older_than=timedelta(0)) == 1
    assert rows(board, "task_deps") == 1
    bads: list[Any] = [timedelta(seconds=-1), "3600", None]
    for bad in bads:
        refused(
            board,
            ik.InvalidArgument,
            functools.partial(board.tasks.prune, older_than=bad),
            "older_than",
        )
    refused(
        board,
        ik.NotFound,
        lambda: board.tasks.upsert("L", "2", blocked_by=["1"]),
        "no task",
    )
