"""Hand-checked cases for the agent reference model (tests/reference.py); no database."""

from __future__ import annotations

from typing import Any

import pytest

from tests.reference import RefWorld, replay_events


class World(RefWorld):
    """A RefWorld whose events get ids 1, 2, 3, ... in append order."""

    def add(self, uuid: str, kind: str = "user", data: Any = None) -> int:
        event = self.append(uuid, self.last_id + 1, kind, None, data)
        return event.id

    def ids(self, uuid: str) -> list[int]:
        return [e.id for e in self.virtual_history(uuid)]


def consistent(w: RefWorld, uuid: str) -> None:
    """Ranges read back the virtual history after its newest clear, and replay the same."""
    from_ranges = [e for r in w.ranges(uuid) for e in w.query_range(r)]
    history = w.virtual_history(uuid)
    clears = [i for i, e in enumerate(history) if e.kind == "clear"]
    live = history[clears[-1] + 1 :] if clears else history
    assert from_ranges == live
    assert replay_events(from_ranges) == w.replay(uuid)


def test_root_sees_its_own_events() -> None:
    """A root's history is its own events; one range with no bounds."""
    w = World()
    w.create("r")
    a, b = w.add("r"), w.add("r", "assistant")
    assert w.ids("r") == [a, b]
    assert w.replay("r") == ([a, b], [], [])
    assert w.ranges("r") == [("r", 0, None)]
    consistent(w, "r")


def test_empty_root() -> None:
    """A root with no events replays to nothing and still has one range."""
    w = World()
    w.create("r")
    assert w.replay("r") == ([], [], [])
    assert w.ranges("r") == [("r", 0, None)]
    assert w.find_clear("r") == 0


def test_child_inherits_parent_up_to_fork() -> None:
    """A child sees the parent's events up to the fork, then its own; two ranges."""
    w = World()
    w.create("p")
    p1, p2 = w.add("p"), w.add("p")
    c = w.fork("c", "p")
    assert c.fork_point == p2
    c1 = w.add("c")
    assert w.ids("c") == [p1, p2, c1]
    assert w.ranges("c") == [("p", 0, p2), ("c", 0, None)]
    consistent(w, "c")


def test_grandchild_order() -> None:
    """A grandchild sees root part, then parent part, then its own, in id order."""
    w = World()
    w.create("r")
    r1 = w.add("r")
    w.fork("p", "r")
    p1 = w.add("p")
    w.fork("g", "p")
    g1 = w.add("g")
    assert w.ids("g") == [r1, p1, g1]
    assert w.ranges("g") == [("r", 0, r1), ("p", 0, p1), ("g", 0, None)]
    consistent(w, "g")


def test_fork_of_agent_without_own_events() -> None:
    """Fork point 0 means none of the parent's own events, yet the grandparent part stays."""
    w = World()
    w.create("r")
    r1 = w.add("r")
    w.fork("p", "r")
    c = w.fork("c", "p")
    assert c.fork_point == 0
    w.add("p")  # after the fork: invisible to c, and fork point 0 must not mean "no limit"
    c1 = w.add("c")
    assert w.ids("c") == [r1, c1]
    assert w.ranges("c") == [("r", 0, r1), ("p", 0, 0), ("c", 0, None)]
    assert w.query_range(("p", 0, 0)) == []
    consistent(w, "c")


def test_fork_of_fresh_root_sees_nothing_of_it() -> None:
    """A fork of a root without events inherits nothing, even after the root appends."""
    w = World()
    w.create("r")
    w.fork("c", "r")
    w.add("r")
    assert w.ids("c") == []
    assert w.ranges("c") == [("r", 0, 0), ("c", 0, None)]


def test_parent_continues_after_fork() -> None:
    """Events the parent appends after the fork are not in the child's history."""
    w = World()
    w.create("p")
    p1 = w.add("p")
    w.fork("c", "p")
    p2 = w.add("p")
    c1 = w.add("c")
    p3 = w.add("p")
    assert w.ids("c") == [p1, c1]
    assert w.ids("p") == [p1, p2, p3]
    assert w.ranges("c") == [("p", 0, p1), ("c", 0, None)]
    consistent(w, "c")


def test_clear_in_middle_ancestor() -> None:
    """A clear in the parent before the fork hides the root part and ends the range walk."""
    w = World()
    w.create("r")
    w.add("r")
    w.fork("p", "r")
    w.add("p")
    clear = w.add("p", "clear")
    p3 = w.add("p")
    w.fork("c", "p")
    c1 = w.add("c")
    assert w.replay("c") == ([p3, c1], [], [])
    assert w.ranges("c") == [("p", clear, p3), ("c", 0, None)]
    assert w.find_clear("p") == clear
    assert w.find_clear("p", clear - 1) == 0
    consistent(w, "c")


def test_clear_in_parent_after_fork_is_invisible() -> None:
    """A parent's clear appended after the fork affects neither the child's replay nor ranges."""
    w = World()
    w.create("p")
    p1 = w.add("p")
    w.fork("c", "p")
    w.add("p", "clear")
    c1 = w.add("c")
    assert w.replay("c") == ([p1, c1], [], [])
    assert w.ranges("c") == [("p", 0, p1), ("c", 0, None)]
    assert w.replay("p") == ([], [], [])
    consistent(w, "c")


def test_clear_in_child_stops_walk_at_child() -> None:
    """A child's own clear gives a single range that starts after it."""
    w = World()
    w.create("p")
    w.add("p")
    w.fork("c", "p")
    clear = w.add("c", "clear")
    c2 = w.add("c")
    assert w.ranges("c") == [("c", clear, None)]
    assert w.replay("c") == ([c2], [], [])
    consistent(w, "c")


def test_rewind_in_child_to_inherited_mark() -> None:
    """A child rewinds to a mark it inherited; the parent's context is unchanged."""
    w = World()
    w.create("p")
    p1 = w.add("p")
    m = w.add("p", "mark", {"label": "a"})
    p3 = w.add("p")
    w.fork("c", "p")
    assert w.rewind_target("c", "a") == m
    rw = w.add("c", "rewind", {"target_message_id": m})
    assert w.replay("c") == ([p1, m, rw], [(m, "a", 1)], [])
    assert w.replay("p") == ([p1, m, p3], [(m, "a", 1)], [])
    consistent(w, "c")


def test_rewind_to_mark_not_inherited_is_skipped() -> None:
    """A parent's mark appended after the fork is not on the child's stack: rewind is skipped."""
    w = World()
    w.create("p")
    p1 = w.add("p")
    w.fork("c", "p")
    m = w.add("p", "mark", {"label": "late"})
    assert w.rewind_target("c", "late") is None
    rw = w.add("c", "rewind", {"target_message_id": m})
    assert w.replay("c") == ([p1], [], [rw])


def test_rewind_target_picks_newest_matching_mark() -> None:
    """rewind_target takes the newest stack mark with the label, or the newest mark at all."""
    w = World()
    w.create("p")
    m1 = w.add("p", "mark", {"label": "a"})
    w.fork("c", "p")
    m2 = w.add("c", "mark", {"label": "b"})
    m3 = w.add("c", "mark", {"label": "a"})
    assert w.rewind_target("c", "a") == m3
    assert w.rewind_target("c", "b") == m2
    assert w.rewind_target("c") == m3
    assert w.rewind_target("c", "zzz") is None
    assert w.rewind_target("p") == m1


def test_kill_subtree() -> None:
    """Killing an agent kills its running descendants only; dead agents take no fork, no event."""
    w = World()
    w.create("r")
    w.fork("a", "r")
    w.fork("b", "a")
    w.fork("s", "r")
    assert w.kill("a") == {"a", "b"}
    assert w.running() == ["r", "s"]
    assert w.kill("r") == {"r", "s"}
    with pytest.raises(ValueError):
        w.fork("x", "b")
    with pytest.raises(ValueError):
        w.add("b")


def test_ids_must_increase_across_agents() -> None:
    """The model rejects an id not greater than every earlier id of the session."""
    w = World()
    w.create("a")
    w.create("b")
    w.append("a", 5, "user")
    with pytest.raises(ValueError):
        w.append("b", 5, "user")


def test_deep_chain() -> None:
    """A chain of forks with one event per level sees every level in order."""
    w = World()
    w.create("0")
    ids = [w.add("0")]
    for level in range(1, 50):
        w.fork(str(level), str(level - 1))
        ids.append(w.add(str(level)))
    assert w.ids("49") == ids
    assert len(w.ranges("49")) == 50
    assert [r[0] for r in w.ranges("49")] == [str(i) for i in range(50)]
    consistent(w, "49")
