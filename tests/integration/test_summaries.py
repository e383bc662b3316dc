"""Agent summaries and runtime context summaries on both faces: newest first by id, pruning with
a window function, ranges checked against the agent's replayable history, the same range
once, the newest five kept (also under concurrent adds), and bad input writing nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import ikigai_store as ik
from tests.mailtools import rows

pytestmark = pytest.mark.db


@pytest.fixture
def named(ikigai_store: Any) -> Any:
    """ann and bob exist."""
    for name in ("ann", "bob"):
        ikigai_store.identities.register(name)
    return ikigai_store


# ---------------------------------------------------------------- agent summaries


def test_add_and_read_summaries(named: Any) -> None:
    """add_summary stores every field; latest_summary and summary_history read newest first
    (by id), per identity; an identity without summaries has None and []."""
    first = named.summaries.add("ann", "set up CI")
    second = named.summaries.add(
        named.identities.get("ann"),
        "fixed the parser",
        delta="parser fixed since last time",
        transcript_hash="sha256:abc",
        cost_usd=0.0125,
    )
    other = named.summaries.add("bob", "reviewed", cost_usd=0)
    assert (second.identity, second.summary, second.delta) == (
        "ann",
        "fixed the parser",
        "parser fixed since last time",
    )
    assert (second.transcript_hash, second.cost_usd) == ("sha256:abc", 0.0125)
    assert (first.delta, first.transcript_hash, first.cost_usd) == (None, None, None)
    assert other.cost_usd == 0.0
    assert named.summaries.latest("ann") == second
    assert named.summaries.history("ann") == [second, first]
    assert named.summaries.history("ann", limit=1) == [second]
    named.identities.register("cat")
    assert named.summaries.latest("cat") is None
    assert named.summaries.history("cat") == []
    with pytest.raises(ik.NotFound, match="ghost"):
        named.summaries.latest("ghost")
    with pytest.raises(ik.NotFound, match="ghost"):
        named.summaries.history("ghost")


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "named_"),
    [
        (("ann", ""), {}, ik.InvalidArgument, "summary"),
        (("ann", "   "), {}, ik.InvalidArgument, "summary"),
        (("ann", None), {}, ik.InvalidArgument, "summary"),
        (("ann", "a\x00"), {}, ik.InvalidArgument, "NUL"),
        (("ann", "s"), {"delta": 3}, ik.InvalidArgument, "delta"),
        (("ann", "s"), {"transcript_hash": "h" * 201}, ik.InvalidArgument, "transcript_hash"),
        (("ann", "s"), {"cost_usd": -0.01}, ik.InvalidArgument, "cost_usd"),
        (("ann", "s"), {"cost_usd": float("nan")}, ik.InvalidArgument, "cost_usd"),
        (("ann", "s"), {"cost_usd": "1"}, ik.InvalidArgument, "cost_usd"),
        (("ann", "s"), {"cost_usd": True}, ik.InvalidArgument, "cost_usd"),
        (("bad name", "s"), {}, ik.InvalidArgument, "identity"),
        (("ghost", "s"), {}, ik.NotFound, "ghost"),
    ],
)
def test_bad_summaries_write_nothing(
    named: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    error: type[Exception],
    named_: str,
) -> None:
    """Each bad argument is a clear error naming it, and no summary is written."""
    with pytest.raises(error, match=named_):
        named.summaries.add(*args, **kwargs)
    assert rows(named, "agent_summaries") == 0


def test_a_retired_identity_gets_no_new_summary(named: Any) -> None:
    """A retired identity's history stays readable; adding to it is InvalidArgument."""
    kept = named.summaries.add("bob", "last words")
    named.identities.retire("bob")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        named.summaries.add("bob", "more")
    assert named.summaries.history("bob") == [kept]


def test_prune_keeps_the_newest_per_identity(named: Any) -> None:
    """prune keeps the newest ``keep`` of each identity (or of one) and returns how
    many it deleted; keep=0 deletes all."""
    made = {
        who: [named.summaries.add(who, f"{who} {n}") for n in range(count)]
        for who, count in (("ann", 8), ("bob", 3))
    }
    assert named.summaries.prune(identity="ann", keep=6) == 2
    assert named.summaries.history("ann", limit=100) == list(reversed(made["ann"][2:]))
    assert named.summaries.prune(keep=2) == 4 + 1
    assert named.summaries.history("ann") == list(reversed(made["ann"][-2:]))
    assert named.summaries.history("bob") == list(reversed(made["bob"][-2:]))
    assert named.summaries.prune() == 0  # keep=5: nothing more to delete
    assert named.summaries.prune(identity="bob", keep=0) == 2
    assert named.summaries.latest("bob") is None
    with pytest.raises(ik.NotFound, match="ghost"):
        named.summaries.prune(identity="ghost")
    for bad in (-1, True, 1.5, None):
        with pytest.raises(ik.InvalidArgument, match="keep"):
            named.summaries.prune(keep=bad)


# ---------------------------------------------------------------- context summaries


class Tree:
    """A session with a root agent and a fork: root events r1 r2 r3, fork point r3, then
    child events c1 c2 and one more root event r4 (after the fork: not the child's)."""

    def __init__(self, store: Any) -> None:
        self.sid = store.create_session("ctx")
        self.root = store.create_agent(self.sid).uuid
        self.r1, self.r2, self.r3 = (
            store.append(self.sid, "user", f"r{n}", agent_uuid=self.root).id for n in (1, 2, 3)
        )
        self.child = store.fork_agent(self.root).uuid
        self.c1, self.c2 = (
            store.append(self.sid, "assistant", f"c{n}", agent_uuid=self.child).id for n in (1, 2)
        )
        self.r4 = store.append(self.sid, "user", "r4", agent_uuid=self.root).id


@pytest.fixture
def tree(ikigai_store: Any) -> Tree:
    return Tree(ikigai_store)


def test_add_context_summary_within_the_history(ikigai_store: Any, tree: Tree) -> None:
    """A range of the child's history may start in the inherited part; the stored row has
    every field; context_summaries lists newest first."""
    add = ikigai_store.summaries.add_context_summary
    whole = add(tree.child, "everything so far", tree.r1, tree.c2, 1200)
    assert (whole.agent_uuid, whole.summary, whole.start_msg_id, whole.end_msg_id) == (
        tree.child,
        "everything so far",
        tree.r1,
        tree.c2,
    )
    assert whole.token_count == 1200
    one = add(tree.child, "just c1", tree.c1, tree.c1, 0)
    root = add(tree.root, "root", tree.r2, tree.r4, 50)
    assert ikigai_store.summaries.context_summaries(tree.child) == [one, whole]
    assert ikigai_store.summaries.context_summaries(tree.root) == [root]


def test_ends_outside_the_history_are_refused(ikigai_store: Any, tree: Tree) -> None:
    """An end that is the parent's event after the fork point, another agent's event, a
    missing id, or before the agent's newest clear is InvalidArgument; start after end too;
    an unknown agent is NotFound. Nothing is written."""
    add = ikigai_store.summaries.add_context_summary
    cases = [
        (tree.child, tree.r1, tree.r4, "end_msg_id"),  # r4 is after the fork point
        (tree.root, tree.r1, tree.c1, "end_msg_id"),  # the child's event
        (tree.root, tree.c1, tree.r4, "start_msg_id"),
        (tree.child, tree.r1, 10**12, "end_msg_id"),
        (tree.child, tree.c2, tree.c1, "start_msg_id"),  # start after end
    ]
    for agent, start, end, named in cases:
        with pytest.raises(ik.InvalidArgument, match=named):
            add(agent, "s", start, end, 10)
    with pytest.raises(ik.NotFound, match="nobody"):
        add("nobody", "s", tree.r1, tree.r1, 1)
    clear = ikigai_store.clear(tree.child).id
    with pytest.raises(ik.InvalidArgument, match="start_msg_id"):
        add(tree.child, "s", tree.r1, clear, 10)  # r1 is before the clear now
    with pytest.raises(ik.InvalidArgument, match="start_msg_id"):
        add(tree.child, "s", clear, clear, 10)  # replay starts after the clear
    after = [
        ikigai_store.append(tree.sid, "user", f"again {n}", agent_uuid=tree.child).id
        for n in (1, 2)
    ]
    assert rows(ikigai_store, "context_summaries") == 0
    add(tree.child, "after the clear", after[0], after[1], 3)
    assert [c.summary for c in ikigai_store.summaries.context_summaries(tree.child)] == [
        "after the clear"
    ]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("", "s", 1, 1, 1), "agent uuid"),
        ((None, "s", 1, 1, 1), "agent uuid"),
        (("u", "", 1, 1, 1), "summary"),
        (("u", "s", 0, 1, 1), "start_msg_id"),
        (("u", "s", 1, -1, 1), "end_msg_id"),
        (("u", "s", True, 1, 1), "start_msg_id"),
        (("u", "s", 1, 1, -1), "token_count"),
        (("u", "s", 1, 1, 2**31), "token_count"),
        (("u", "s", 1, 1, 1.0), "token_count"),
    ],
)
def test_bad_context_arguments(
    ikigai_store: Any, tree: Tree, args: tuple[Any, ...], named: str
) -> None:
    """Each bad argument is InvalidArgument naming it, before the database is asked."""
    with pytest.raises(ik.InvalidArgument, match=named):
        ikigai_store.summaries.add_context_summary(*args)
    assert rows(ikigai_store, "context_summaries") == 0


def test_the_same_range_once(ikigai_store: Any, tree: Tree) -> None:
    """The same range again with the same summary and token count returns the stored row (a
    retry is harmless); with anything else it is a Conflict and nothing changes."""
    add = ikigai_store.summaries.add_context_summary
    first = add(tree.child, "s", tree.r2, tree.c1, 10)
    assert add(tree.child, "s", tree.r2, tree.c1, 10) == first
    for summary, tokens in (("other", 10), ("s", 11)):
        with pytest.raises(ik.Conflict, match=str(first.id)) as refused:
            add(tree.child, summary, tree.r2, tree.c1, tokens)
        assert refused.value.constraint == "context_summaries_range_key"
    assert ikigai_store.summaries.context_summaries(tree.child) == [first]


def test_only_the_newest_five_are_kept(ikigai_store: Any, tree: Tree) -> None:
    """Each add keeps the agent's newest five context summaries (other agents untouched)."""
    add = ikigai_store.summaries.add_context_summary
    root = add(tree.root, "root", tree.r1, tree.r1, 1)
    ends = [tree.r1, tree.r2, tree.r3, tree.c1, tree.c2]
    made = [add(tree.child, f"s{n}", tree.r1, end, n) for n, end in enumerate(ends)]
    made += [add(tree.child, f"t{n}", tree.r2, end, n) for n, end in enumerate(ends[1:3])]
    assert ikigai_store.summaries.context_summaries(tree.child) == list(reversed(made[-5:]))
    assert ikigai_store.summaries.context_summaries(tree.root) == [root]
    with pytest.raises(ik.NotFound, match="nobody"):
        ikigai_store.summaries.context_summaries("nobody")


@pytest.fixture
def url(ikigai_empty_db_url: str) -> Iterator[str]:
    """A fresh, migrated database."""
    with ik.open(ikigai_empty_db_url):
        pass
    yield ikigai_empty_db_url


def test_concurrent_adds_keep_exactly_five(url: str) -> None:
    """12 threads add context summaries of different ranges to one agent at once, each in a
    transaction that commits 50 ms later (12 connections): all succeed, and exactly the five
    newest remain (the per-agent lock serialises the adds; without it each prune would miss
    the others' uncommitted rows and all twelve would stay)."""
    with ik.open(url, migrate=False, pool_size=12) as store:
        sid = store.create_session("race")
        agent = store.create_agent(sid).uuid
        ids = [store.append(sid, "user", f"m{n}", agent_uuid=agent).id for n in range(12)]
        barrier = threading.Barrier(12)
        made: list[ik.ContextSummary] = []
        errors: list[Exception] = []

        def add(n: int) -> None:
            barrier.wait(30)
            try:
                with store.transaction():  # commit late: the adds overlap for real
                    made.append(
                        store.summaries.add_context_summary(agent, f"s{n}", ids[0], ids[n], n)
                    )
                    time.sleep(0.05)
            except Exception as exc:
                errors.append(exc)

        threads = [threading.Thread(target=add, args=(n,)) for n in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [] and len(made) == 12
        kept = store.summaries.context_summaries(agent)
        assert kept == sorted(made, key=lambda c: c.id, reverse=True)[:5]
