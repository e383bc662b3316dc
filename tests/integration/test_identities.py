"""Identities: registration, resolution by session and agent, heartbeat, retire, discover."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import ikigai_store as ik
from ikigai_store.identities import NAME_PATTERN
from tests.mailtools import Clock, rows

pytestmark = pytest.mark.db


def test_register_and_get(ikigai_store: ik.Store) -> None:
    """register stores every field; get returns the same identity."""
    made = ikigai_store.identities.register(
        "alice",
        project_key="proj",
        git_branch="main",
        purpose="reviewer",
        working_dir="/src",
        hostname="box",
    )
    assert (made.name, made.project_key, made.git_branch, made.purpose) == (
        "alice",
        "proj",
        "main",
        "reviewer",
    )
    assert (made.working_dir, made.hostname, made.retired_at) == ("/src", "box", None)
    assert ikigai_store.identities.get("alice") == made
    assert ikigai_store.identities.get(made) == made


def test_memorable_names(ikigai_store: ik.Store) -> None:
    """Without a name, identities get distinct memorable AdjectiveNoun names."""
    names = {ikigai_store.identities.register().name for _ in range(20)}
    assert len(names) == 20
    assert all(NAME_PATTERN.fullmatch(n) and n[0].isupper() for n in names)


@pytest.mark.parametrize(
    "name", ["", "-lead", ".dot", "a b", "x" * 65, "é", "a/b", "a\x00b", 7, None.__class__]
)
def test_register_refuses_bad_names(ikigai_store: ik.Store, name: Any) -> None:
    """A name outside the pattern is InvalidArgument and writes nothing."""
    with pytest.raises(ik.InvalidArgument, match="name"):
        ikigai_store.identities.register(name)
    assert rows(ikigai_store, "identities") == 0


def test_duplicate_name_is_invalid_argument(ikigai_store: ik.Store) -> None:
    """A taken name is InvalidArgument naming it."""
    ikigai_store.identities.register("alice")
    with pytest.raises(ik.Conflict, match="'alice' already exists"):
        ikigai_store.identities.register("alice")
    assert rows(ikigai_store, "identities") == 1


def test_agent_binding(ikigai_store: ik.Store) -> None:
    """agent_uuid must name an agent and binds it to one identity only."""
    agent = ikigai_store.create_agent(ikigai_store.create_session(), name="coder")
    with pytest.raises(ik.NotFound, match="does not exist"):
        ikigai_store.identities.register("x", agent_uuid="nope")
    bound = ikigai_store.identities.register("x", agent_uuid=agent.uuid)
    assert bound.agent_uuid == agent.uuid
    with pytest.raises(ik.Conflict, match="already bound to identity 'x'"):
        ikigai_store.identities.register("y", agent_uuid=agent.uuid)


def test_get_missing_is_not_found(ikigai_store: ik.Store) -> None:
    """get of an unknown name is NotFound."""
    with pytest.raises(ik.NotFound):
        ikigai_store.identities.get("ghost")


def test_list_order_filter_and_retired(ikigai_store: ik.Store) -> None:
    """list: most recently active first, by project, retired ones only when asked."""
    clock = Clock(ikigai_store)
    for name, project in [("a", "p"), ("b", "p"), ("c", "q")]:
        ikigai_store.identities.register(name, project_key=project)
        clock.advance(seconds=1)
    ikigai_store.identities.heartbeat("a")
    assert [i.name for i in ikigai_store.identities.list()] == ["a", "c", "b"]
    assert [i.name for i in ikigai_store.identities.list(project_key="p")] == ["a", "b"]
    ikigai_store.identities.retire("a")
    assert [i.name for i in ikigai_store.identities.list()] == ["c", "b"]
    assert [i.name for i in ikigai_store.identities.list(include_retired=True)] == ["a", "c", "b"]


def test_heartbeat_and_retire(ikigai_store: ik.Store) -> None:
    """heartbeat moves last_active_at; retire keeps its first time; a retired one cannot beat."""
    clock = Clock(ikigai_store)
    made = ikigai_store.identities.register("a")
    later = clock.advance(minutes=3)
    assert ikigai_store.identities.heartbeat("a").last_active_at == later
    first = ikigai_store.identities.retire(made).retired_at
    clock.advance(minutes=1)
    assert ikigai_store.identities.retire("a").retired_at == first
    with pytest.raises(ik.InvalidArgument, match="retired"):
        ikigai_store.identities.heartbeat("a")
    with pytest.raises(ik.NotFound):
        ikigai_store.identities.retire("ghost")


def test_discover_status_and_unread(ikigai_store: ik.Store) -> None:
    """discover computes active / idle / offline and unread counts, retired ones left out."""
    clock = Clock(ikigai_store)
    for name in ["old", "mid", "new", "gone"]:
        ikigai_store.identities.register(name, project_key="p")
    ikigai_store.identities.retire("gone")
    clock.advance(minutes=20)
    ikigai_store.identities.heartbeat("mid")
    clock.advance(minutes=20)
    ikigai_store.identities.heartbeat("new")
    ikigai_store.mail.send("new", ["old", "mid"], "s", "b")
    ikigai_store.mail.send("new", ["old"], "s", "b")
    clock.advance(minutes=1)
    found = {s.identity.name: (s.status, s.unread) for s in ikigai_store.identities.discover()}
    assert found == {"new": ("active", 0), "mid": ("idle", 1), "old": ("offline", 2)}
    assert ikigai_store.identities.discover(project_key="other") == []


def test_for_session_resolution_order(ikigai_store: ik.Store) -> None:
    """for_session: the mapping, else the project's latest identity, else a new one."""
    clock = Clock(ikigai_store)
    ikigai_store.identities.register("older", project_key="p")
    clock.advance(seconds=1)
    ikigai_store.identities.register("latest", project_key="p")
    clock.advance(seconds=1)
    assert ikigai_store.identities.for_session("s1", project_key="p").name == "latest"
    ikigai_store.identities.heartbeat("older")
    assert ikigai_store.identities.for_session("s1", project_key="p").name == "latest"
    fresh = ikigai_store.identities.for_session("s2")
    assert fresh.name not in {"older", "latest"} and NAME_PATTERN.fullmatch(fresh.name)
    assert ikigai_store.identities.for_session("s2") == ikigai_store.identities.get(fresh.name)


def test_for_session_refreshes_and_replaces_retired(ikigai_store: ik.Store) -> None:
    """Every call refreshes last_active_at; a mapping to a retired identity is replaced."""
    clock = Clock(ikigai_store)
    first = ikigai_store.identities.for_session("s")
    later = clock.advance(minutes=2)
    assert ikigai_store.identities.for_session("s").last_active_at == later
    ikigai_store.identities.retire(first)
    replaced = ikigai_store.identities.for_session("s")
    assert replaced.name != first.name and replaced.retired_at is None


def test_for_agent(ikigai_store: ik.Store) -> None:
    """for_agent creates the agent's identity once, named like the agent when that is free."""
    sid = ikigai_store.create_session()
    coder = ikigai_store.create_agent(sid, name="coder")
    made = ikigai_store.identities.for_agent(coder.uuid)
    assert (made.name, made.agent_uuid) == ("coder", coder.uuid)
    assert ikigai_store.identities.for_agent(coder.uuid).id == made.id
    twin = ikigai_store.create_agent(sid, name="coder")
    other = ikigai_store.identities.for_agent(twin.uuid)
    assert other.name != "coder" and other.agent_uuid == twin.uuid
    spaced = ikigai_store.create_agent(sid, name="has spaces")
    assert NAME_PATTERN.fullmatch(ikigai_store.identities.for_agent(spaced.uuid).name)
    with pytest.raises(ik.NotFound):
        ikigai_store.identities.for_agent("no-such-agent")


def test_concurrent_first_for_session_makes_one_identity(ikigai_empty_db_url: str) -> None:
    """8 threads resolving a new session key at once all get one identity."""
    with ik.open(ikigai_empty_db_url, pool_size=8) as store:
        results: list[str] = []
        barrier = threading.Barrier(8)

        def resolve() -> None:
            barrier.wait()
            results.append(store.identities.for_session("same-key", git_branch="main").name)

        threads = [threading.Thread(target=resolve) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 8 and len(set(results)) == 1
        assert len(store.identities.list()) == 1


def test_resolve_is_stable_per_project_and_role(ikigai_store: ik.Store) -> None:
    """resolve: one identity per (project, role), distinct per role and project, never the
    project's latest identity of another role; a retired one is replaced."""
    ikigai_store.identities.register("someone", project_key="/p")
    main = ikigai_store.identities.resolve("/p")
    assert main.name != "someone" and main.purpose == "main" and main.project_key == "/p"
    assert ikigai_store.identities.resolve("/p").id == main.id
    reviewer = ikigai_store.identities.resolve("/p", role="reviewer")
    elsewhere = ikigai_store.identities.resolve("/q")
    assert len({main.id, reviewer.id, elsewhere.id}) == 3
    ikigai_store.identities.retire(main)
    assert ikigai_store.identities.resolve("/p").id not in {main.id, reviewer.id}


def test_resolve_with_name_registers_and_maps(ikigai_store: ik.Store) -> None:
    """resolve(name=) registers the name on first use, maps the key to it, refuses a retired
    name and bad input (writing nothing)."""
    made = ikigai_store.identities.resolve("/p", name="Coder", working_dir="/p/src")
    assert (made.name, made.working_dir) == ("Coder", "/p/src")
    assert ikigai_store.identities.resolve("/p").id == made.id
    assert ikigai_store.identities.resolve("/q", name="Coder").id == made.id
    ikigai_store.identities.retire("Coder")
    with pytest.raises(ik.InvalidArgument, match="retired"):
        ikigai_store.identities.resolve("/p", name="Coder")
    for bad in (
        {"project_key": ""},
        {"project_key": "/p", "role": ""},
        {"project_key": "/p", "name": "no spaces"},
    ):
        with pytest.raises(ik.InvalidArgument):
            ikigai_store.identities.resolve(**bad)  # type: ignore[arg-type]
    assert [i.name for i in ikigai_store.identities.list(include_retired=True)] == ["Coder"]


def test_resolve_with_parent_links_a_child(ikigai_store: ik.Store) -> None:
    """resolve(parent=) makes a child identity linked to the parent, stable per role; an
    existing identity without a parent gets linked; a missing parent is NotFound and an
    identity is never its own parent (nothing written)."""
    main = ikigai_store.identities.resolve("/p")
    child = ikigai_store.identities.resolve("/p", role="main/Explore", parent=main)
    assert child.parent == main.name and child.id != main.id
    again = ikigai_store.identities.resolve("/p", role="main/Explore", parent=main.name)
    assert again.id == child.id and ikigai_store.identities.get(child).parent == main.name
    older = ikigai_store.identities.resolve("/p", role="main/Plan")
    assert older.parent is None
    assert ikigai_store.identities.resolve("/p", role="main/Plan", parent=main).parent == main.name
    with pytest.raises(ik.NotFound):
        ikigai_store.identities.resolve("/p", role="main/Other", parent="ghost")
    with pytest.raises(ik.InvalidArgument, match="own parent"):
        ikigai_store.identities.resolve("/p", parent=main)
    assert ikigai_store.identities.get(main).parent is None
    names = {i.name for i in ikigai_store.identities.list()}
    assert names == {main.name, child.name, older.name}


def test_retire_idle_and_prune(ikigai_store: ik.Store) -> None:
    """retire_idle retires identities idle for longer than the limit that hold no live lease
    (a resolved key gets a new identity afterwards); prune deletes retired identities nothing
    refers to (children before parents) and keeps the others; bad input writes nothing."""
    store, clock = ikigai_store, Clock(ikigai_store)
    quiet = store.identities.resolve("/p")
    child = store.identities.resolve("/p", role="main/Explore", parent=quiet)
    talker = store.identities.register("talker", project_key="/p")
    holder = store.identities.register("holder", project_key="/p")
    other = store.identities.register("elsewhere", project_key="/q")
    store.mail.send(talker, other, "hello", "b")
    clock.advance(hours=2)
    store.leases.acquire(holder, "build-slot", ttl=3600)
    fresh = store.identities.register("fresh", project_key="/p")
    for bad in ({"idle_for": 0}, {"idle_for": -1}, {"idle_for": "1h"}, {"idle_for": True}):
        with pytest.raises(ik.InvalidArgument):
            store.identities.retire_idle(**bad)
    assert store.identities.retire_idle(idle_for=3600, project_key="/p")
    retired = {i.name for i in store.identities.list(include_retired=True) if i.retired_at}
    assert retired == {quiet.name, child.name, talker.name}
    assert store.identities.resolve("/p").id != quiet.id
    assert fresh.name not in retired and holder.name not in retired
    with pytest.raises(ik.InvalidArgument):
        store.identities.prune(retired_for=-1)
    assert store.identities.prune(retired_for=3600) == []
    clock.advance(hours=2)
    pruned = store.identities.prune(retired_for=3600)
    assert pruned == [child.name, quiet.name]
    with pytest.raises(ik.NotFound):
        store.identities.get(quiet.name)
    assert store.identities.get(talker.name).retired_at is not None
    assert store.identities.register(quiet.name).name == quiet.name
