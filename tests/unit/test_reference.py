"""Hand-checked cases for the in-memory replay model (tests/reference.py); no database."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reference import RefEvent, RefSession, replay_events


def session(*events: tuple[str, Any]) -> RefSession:
    """Build a session whose events get ids 1, 2, 3, ... in the given order."""
    s = RefSession()
    for i, (kind, data) in enumerate(events, start=1):
        s.append(i, kind, None, data)
    return s


def rewind(target: Any) -> tuple[str, Any]:
    return ("rewind", {"target_message_id": target})


def mark(label: Any = None) -> tuple[str, Any]:
    return ("mark", {"label": label})


U = ("user", None)
A = ("assistant", None)
CLEAR = ("clear", None)


def test_seed_example() -> None:
    """The seed example: a rewind to a labelled mark drops what came between them."""
    s = session(U, A, mark("approach-a"), U, A, rewind(3), U, A)
    assert s.replay() == ([1, 2, 3, 6, 7, 8], [(3, "approach-a", 2)], [])


def test_empty_session() -> None:
    """An empty session replays to an empty context, no marks, nothing skipped."""
    assert RefSession().replay() == ([], [], [])


def test_ordinary_kinds_are_all_kept() -> None:
    """Every kind other than clear, mark and rewind is appended unchanged."""
    kinds = [
        "system",
        "user",
        "assistant",
        "tool_call",
        "tool_result",
        "fork",
        "command",
        "usage",
        "interrupted",
        "agent_killed",
    ]
    s = session(*[(k, None) for k in kinds])
    assert s.replay() == (list(range(1, len(kinds) + 1)), [], [])


def test_clear_resets_context_and_marks() -> None:
    """A clear empties context and mark stack and is not itself kept."""
    s = session(U, mark("a"), A, CLEAR, U)
    assert s.replay() == ([5], [], [])


def test_mark_after_clear_indexes_from_zero() -> None:
    """A mark's context_idx counts from the last clear."""
    s = session(U, A, CLEAR, mark("x"), U)
    assert s.replay() == ([4, 5], [(4, "x", 0)], [])


def test_rewind_to_stale_mark_is_skipped() -> None:
    """A rewind to a mark already dropped by an earlier rewind is skipped and recorded."""
    s = session(mark("outer"), U, mark("inner"), A, rewind(1), U, rewind(3), A)
    assert s.replay() == ([1, 5, 6, 8], [(1, "outer", 0)], [7])


def test_rewind_reuses_target() -> None:
    """The target stays on the stack, so a second rewind to it succeeds."""
    s = session(U, mark("m"), A, rewind(2), U, rewind(2), A)
    assert s.replay() == ([1, 2, 6, 7], [(2, "m", 1)], [])


def test_nested_marks_rewind_to_inner_keeps_outer() -> None:
    """Rewinding to an inner mark keeps the outer one and everything before the inner one."""
    s = session(mark("a"), U, mark("b"), A, mark("c"), U, rewind(3), A)
    assert s.replay() == ([1, 2, 3, 7, 8], [(1, "a", 0), (3, "b", 2)], [])


def test_nested_marks_rewind_to_outer_drops_inner() -> None:
    """Rewinding to an outer mark drops the marks above it; they become stale."""
    s = session(mark("a"), U, mark("b"), A, rewind(1), rewind(3))
    assert s.replay() == ([1, 5], [(1, "a", 0)], [6])


def test_rewind_after_clear_to_pre_clear_mark_is_skipped() -> None:
    """A clear takes marks off the stack, so rewinding to one afterwards is skipped."""
    s = session(U, mark("before"), A, CLEAR, U, rewind(2), A)
    assert s.replay() == ([5, 7], [], [6])


def test_rewind_is_kept_and_marks_above_can_be_pushed_again() -> None:
    """After a rewind, new marks stack above the target at their new context index."""
    s = session(mark("a"), U, A, rewind(1), mark("b"), U, rewind(5), A)
    assert s.replay() == ([1, 4, 5, 7, 8], [(1, "a", 0), (5, "b", 2)], [])


def test_rewind_target_that_is_not_a_mark_is_skipped() -> None:
    """A rewind naming a non-mark event (or an unknown id) is skipped."""
    s = session(U, mark(), A, rewind(1), rewind(99))
    assert s.replay() == ([1, 2, 3], [(2, None, 1)], [4, 5])


@pytest.mark.parametrize(
    "data",
    [
        None,
        {},
        {"target_message_id": "1"},
        {"target_message_id": True},
        {"target_message_id": 1.0},
        {"target_message_id": None},
        [1],
        "1",
        1,
    ],
)
def test_malformed_rewind_is_skipped(data: Any) -> None:
    """A rewind whose data has no int target_message_id is skipped (a bool is not an int)."""
    s = session(mark("m"), U, ("rewind", data))
    assert s.replay() == ([1, 2], [(1, "m", 0)], [3])


@pytest.mark.parametrize(
    ("data", "label"),
    [
        ({"label": "x"}, "x"),
        ({"label": ""}, ""),
        ({"label": None}, None),
        ({"label": 7}, None),
        ({"label": ["x"]}, None),
        ({}, None),
        (None, None),
        ("x", None),
        (["x"], None),
    ],
)
def test_mark_label_only_from_string_data_label(data: Any, label: str | None) -> None:
    """A mark's label is data["label"] only when data is a dict and that value is a str."""
    s = session(U, ("mark", data))
    assert s.replay() == ([1, 2], [(2, label, 1)], [])


def test_replay_sorts_by_id_and_ids_need_not_be_contiguous() -> None:
    """Events are replayed in id order; gaps in ids do not matter."""
    events = [
        RefEvent(30, "rewind", None, {"target_message_id": 10}),
        RefEvent(10, "mark", "m", {"label": "m"}),
        RefEvent(20, "user", "hi"),
        RefEvent(40, "assistant", "ok"),
    ]
    assert replay_events(events) == ([10, 30, 40], [(10, "m", 0)], [])


def test_append_rejects_non_increasing_ids() -> None:
    """The model refuses ids that do not increase, as the store never produces them."""
    s = RefSession()
    s.append(5, "user")
    with pytest.raises(ValueError):
        s.append(5, "user")
