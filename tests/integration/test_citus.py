"""ikigai_store on a Citus cluster (docs/concepts/citus.md): the placement the migrations make,
distributing a database that already holds data, and growing the cluster under load.

Off Citus only ``test_distribute_refuses_a_plain_database`` runs; the others are skipped, saying
so (``IKIGAI_TEST_CITUS=1``, set by ``.ci/run``'s Citus step, turns that skip into a failure).
The rebalance test starts a third worker (127.0.0.1:57639, same binaries as the cluster) and
removes it afterwards; it needs to run as root, as the cluster's own script does.
"""

from __future__ import annotations

import operator
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import psycopg
import pytest
from click.testing import CliRunner
from langgraph.graph import END, START, StateGraph
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

import ikigai_store as ik
from ikigai_store import citus, migrate
from ikigai_store.cli.app import cli
from ikigai_store.config import admin_url
from ikigai_store.integrations.langgraph import IkigaiSaver
from ikigai_store.pool import create_database
from ikigai_store.testing import drop_test_database, fresh_database, test_database_name

pytestmark = pytest.mark.db

PGBIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
EXTRA_PORT = int(os.environ.get("IKIGAI_CITUS_EXTRA_PORT", "57639"))


@pytest.fixture(scope="module")
def cluster(ikigai_server_url: str) -> str:
    """The coordinator's server URL (skips, or fails under IKIGAI_TEST_CITUS=1, off Citus)."""
    if not citus.is_citus(ikigai_server_url):
        if os.environ.get("IKIGAI_TEST_CITUS") == "1":
            pytest.fail("IKIGAI_TEST_CITUS=1 but the test server is not a Citus coordinator")
        pytest.skip("needs IKIGAI_TEST_DATABASE_URL at a Citus coordinator")
    return ikigai_server_url


#: What the migrations distribute (docs/concepts/citus.md, "The placement"): table -> column.
DISTRIBUTED = {
    "messages": "session_id",
    "langgraph_checkpoints": "session_id",
    "langgraph_blobs": "session_id",
    "langgraph_writes": "session_id",
    "activities": "identity_id",
    "agent_summaries": "identity_id",
    "tasks": "list_id",
    "task_deps": "list_id",
    "review_iterations": "review_id",
    "review_issues": "review_id",
}


def test_migrations_place_the_tables(cluster: str, ikigai_db_url: str) -> None:
    """Migrating a Citus database distributes messages and LangGraph's checkpoint rows by
    session_id (colocated), the activity feed and agent summaries by identity_id (colocated,
    apart from the sessions), tasks and their edges by list_id (colocated, a group of their
    own), a review's iterations and issues by review_id (likewise); the rest stays local."""
    placed = {p.relation: p for p in citus.placements(ikigai_db_url)}
    assert {n: p.column for n, p in placed.items() if p.kind == "distributed"} == DISTRIBUTED
    groups = {
        column: {placed[n].colocation_id for n, c in DISTRIBUTED.items() if c == column}
        for column in set(DISTRIBUTED.values())
    }
    assert all(len(ids) == 1 for ids in groups.values()), groups
    assert len(set().union(*groups.values())) == 4, groups
    assert {p.kind for name, p in placed.items() if name not in DISTRIBUTED} == {"local"}
    # Where they are and what they weigh (`citus tables`); yoyo's tables are left out.
    assert not [n for n in placed if "yoyo" in n]
    assert all(placed[n].nodes == 2 and (placed[n].size_bytes or 0) > 0 for n in DISTRIBUTED)
    assert placed["identities"].nodes is None and (placed["identities"].size_bytes or 0) > 0
    summary = citus.summary(ikigai_db_url)
    local = len(placed) - len(DISTRIBUTED)
    assert summary == citus.ClusterSummary(True, 2, len(DISTRIBUTED), 0, local)
    out = CliRunner().invoke(cli, ["--database", ikigai_db_url, "citus", "tables"]).output
    assert re.search(
        r"^messages\s+distributed by session_id\s+\d+\s+2\s+\d+ (bytes|kB|MB)$", out, re.M
    )
    assert re.search(r"^identities\s+local\s+\d+ (bytes|kB)$", out, re.M), out
    out = CliRunner().invoke(cli, ["--database", ikigai_db_url, "status"]).output
    expected = f"coordinator with 2 workers; {len(DISTRIBUTED)} tables distributed, 0 reference"
    assert re.search(rf"^citus:\s+{expected}, {local} local", out, re.M), out


def test_distribute_refuses_a_plain_database(
    ikigai_server_url: str, request: pytest.FixtureRequest
) -> None:
    """distribute (and rebalance) on a database without citus raise InvalidArgument and
    change nothing."""
    name = test_database_name(request.path, "plain")
    drop_test_database(ikigai_server_url, name)
    create_database(ikigai_server_url, name)
    url = admin_url(ikigai_server_url, name)
    try:
        migrate.apply(url)
        with pytest.raises(ik.InvalidArgument, match="no citus extension"):
            citus.distribute(url)
        with pytest.raises(ik.InvalidArgument, match="no citus extension"):
            citus.rebalance(url, mode="block_writes")
        with psycopg.connect(url) as conn:
            keys = conn.execute(
                "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                "WHERE conrelid = 'messages'::regclass AND conname = 'messages_pkey'"
            ).fetchone()
        assert keys == ("PRIMARY KEY (id)",)
    finally:
        drop_test_database(ikigai_server_url, name)


def test_prepare_database_creates_the_database_on_every_node(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """prepare_database for a name no node has yet creates it on the coordinator too (it used
    to create it on the workers, then fail on the coordinator); migrating it places the
    tables."""
    name = test_database_name(request.path, "unmade")
    drop_test_database(cluster, name)
    try:
        assert citus.prepare_database(cluster, name)
        url = admin_url(cluster, name)
        migrate.apply(url)
        placed = {p.relation: p.column for p in citus.placements(url) if p.kind == "distributed"}
        assert placed == DISTRIBUTED
    finally:
        drop_test_database(cluster, name)


def test_status_says_a_coordinator_without_workers_keeps_the_shards(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """citus with no worker registered in the database: status says the shards stay on the
    coordinator, migrating places every shard there, and `citus tables` shows them."""
    name = test_database_name(request.path, "alone")
    drop_test_database(cluster, name)
    create_database(cluster, name)
    url = admin_url(cluster, name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION citus")
        # Citus' citus_is_coordinator() says false until a node is registered: the commands
        # must not take such a database for a worker's.
        assert citus.summary(url) == citus.ClusterSummary(True, 0, 0, 0, 0)
        out = CliRunner().invoke(cli, ["--database", url, "status"]).output
        assert "citus:           coordinator with 0 workers (shards stay on the coordinator" in out
        migrate.apply(url)
        placed = {p.relation: p for p in citus.placements(url) if p.kind == "distributed"}
        assert {n: p.column for n, p in placed.items()} == DISTRIBUTED
        assert {p.nodes for p in placed.values()} == {1}
    finally:
        drop_test_database(cluster, name)


def test_a_move_is_refused_when_the_coordinator_has_no_worker_slot_for_it(cluster: str) -> None:
    """The coordinator's background worker slots held for good are read from the server
    (Citus' maintenance daemons among them); a rebalance or drain that would find fewer than
    two free is refused before anything changes, saying why and what to do. (Starving the
    shared test cluster for real would stall the other tests' moves: the decision is checked
    on the server's own figures with the held count raised.)"""
    with psycopg.connect(cluster, autocommit=True, row_factory=dict_row) as conn:
        row = ik.queries.citus_worker_slots(conn)
        slots = conn.execute("SHOW max_worker_processes").fetchone()
    assert slots is not None and row["slots"] == int(slots["max_worker_processes"])
    assert 1 <= row["daemons"] < row["held"] < row["slots"]  # + the replication launcher
    citus._check_worker_slots(row, "rebalance")  # the cluster can move now
    full = {**row, "held": row["slots"] - 1}
    with pytest.raises(ik.InvalidArgument, match=r"1 of its \d+ background worker slots") as err:
        citus._check_worker_slots(full, "drain")
    assert "a drain needs 2" in str(err.value) and "max_worker_processes" in str(err.value)
    assert "nothing was moved" in str(err.value)


def test_a_worker_out_of_reach_raises_node_unavailable(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """A call whose session lives on a worker the coordinator cannot reach (the database's
    node pointed at a closed port with citus_update_node, as a failover would) raises
    NodeUnavailable, a ConnectionLost that says so, and stores nothing; sessions on the other
    worker go on working through the same store, and all of them once the node is back."""
    name = test_database_name(request.path, "outage")
    drop_test_database(cluster, name)
    assert citus.prepare_database(cluster, name)
    url = admin_url(cluster, name)
    try:
        migrate.apply(url)
        with ik.Store(url, pool_size=1) as store, psycopg.connect(url, autocommit=True) as conn:
            sessions = [store.create_session(f"s{n}") for n in range(8)]
            for sid in sessions:
                store.append(sid, "user", "before")
            node, port = _node_of_most_sessions(conn, sessions)
            conn.execute("SELECT citus_update_node(%s, '127.0.0.1', 1)", (node,))
            try:
                reached = []
                for sid in sessions:
                    try:
                        reached.append(store.append(sid, "user", "during").session_id)
                    except ik.NodeUnavailable as exc:
                        assert isinstance(exc, ik.ConnectionLost)
                        assert str(exc).startswith(
                            "a node of the Citus cluster is unreachable (the connection to "
                            "the coordinator is fine): connection to the remote node"
                        )
                assert 0 < len(reached) < len(sessions)
            finally:
                conn.execute("SELECT citus_update_node(%s, '127.0.0.1', %s)", (node, port))
            for sid in sessions:
                store.append(sid, "user", "after")
            for sid in sessions:
                during = 1 if sid in reached else 0
                assert store.count_messages(sid) == 2 + during
    finally:
        drop_test_database(cluster, name)


def _node_of_most_sessions(conn: psycopg.Connection[Any], sessions: list[int]) -> tuple[int, int]:
    """The worker (node id, port) holding the shards of the most of ``sessions``."""
    row = conn.execute(
        "SELECT n.nodeid, n.nodeport FROM unnest(%s::bigint[]) AS s (id) "
        "JOIN pg_dist_shard_placement AS p "
        "ON p.shardid = get_shard_id_for_distribution_column('messages', s.id) "
        "JOIN pg_dist_node AS n ON n.nodename = p.nodename AND n.nodeport = p.nodeport "
        "GROUP BY n.nodeid, n.nodeport ORDER BY count(*) DESC LIMIT 1",
        (sessions,),
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.fixture
def filled_plain(cluster: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database on the coordinator migrated and written to before citus was created in it."""
    name = test_database_name(request.path, "later")
    drop_test_database(cluster, name)
    create_database(cluster, name)
    url = admin_url(cluster, name)
    migrate.apply(url)
    yield url
    drop_test_database(cluster, name)


def test_a_database_holding_data_is_distributed_later(cluster: str, filled_plain: str) -> None:
    """Rows written before distribution move to the shards; replays, search, mail, the
    activity feed, summaries, a LangGraph thread and its copy, task lists (tasks, edges,
    claims) and reviews (iterations, issues, resolutions) are the same after; distributing
    again changes nothing."""
    url = filled_plain
    with ik.Store(url, pool_size=2) as store:
        sessions = [store.create_session(f"s{n}") for n in range(20)]
        agents = {}
        for sid in sessions:
            agent = store.create_agent(sid)
            agents[sid] = agent.uuid
            for n in range(5):
                store.append(sid, "user", f"hello {sid} {n}", agent_uuid=agent.uuid)
            store.mark(agent.uuid, "m")
            store.append(sid, "assistant", "after the mark", agent_uuid=agent.uuid)
        store.identities.register("alice")
        store.identities.register("bob")
        sent = store.mail.send("alice", ["bob"], "before", "distribution")
        saver = IkigaiSaver(store)
        graph = _counter_graph(saver)
        for n in range(3):
            graph.invoke({"total": n}, _thread("lg"))
        saver.copy_thread("lg", "lg-copy")
        graph.invoke({"total": 10}, _thread("lg-copy"))
        threads = {t: _thread_state(saver, t) for t in ("lg", "lg-copy")}
        store.activities.record("alice", "commit", "before distribution")
        store.summaries.add("bob", "bob's summary")
        for n in range(3):
            store.tasks.create_list(f"list{n}", "alice")
            store.tasks.upsert(f"list{n}", "a", subject="first")
            store.tasks.upsert(f"list{n}", "b", subject="second", blocked_by=["a"])
            store.tasks.upsert(f"list{n}", "c", subject="third", blocked_by=["a", "b"])
        store.tasks.claim("list0", "a", "alice")
        tasks_before = {n: store.tasks.list(f"list{n}") for n in range(3)}
        stats_before = store.tasks.stats()
        store.identities.register("carol")
        reviews = []
        for n in range(3):
            review = store.reviews.create("alice", reviewers=["carol"], branch=f"b{n}")
            for event in ("submit", "start"):
                review = store.reviews.fire(review, event)
            store.reviews.record_iteration(review, "carol", "comment", "first", issues=[_ISSUE] * 2)
            reviews.append(review.review_id)
        store.reviews.resolve_issue(store.reviews.issues(reviews[0])[0], "fixed")
        reviews_before = {r: store.reviews.iterations(r) for r in reviews}
        open_before = {r: store.reviews.open_issues(r) for r in reviews}
        feed = store.activities.feed()
        alice_feed = store.activities.feed(identity="alice")
        before = {sid: store.replay_session(sid) for sid in sessions}
        before_agents = {sid: store.replay_agent(agents[sid]) for sid in sessions}
        found = store.search("hello", limit=200)
    # What the docs say to run: the extension and the nodes, then distribute.
    assert citus.prepare_database(cluster, url.split("dbname=")[1].split()[0])
    status = CliRunner().invoke(cli, ["--database", url, "status"]).output
    assert "citus:           coordinator with 2 workers; nothing distributed yet" in status
    result = CliRunner().invoke(cli, ["citus", "distribute"], env={"IKIGAI_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    assert "messages: distributed by session_id" in result.output
    for table in ("langgraph_checkpoints", "langgraph_blobs", "langgraph_writes"):
        assert f"{table}: distributed by session_id" in result.output
    for table in ("activities", "agent_summaries"):
        assert f"{table}: distributed by identity_id" in result.output
    for table in ("tasks", "task_deps"):
        assert f"{table}: distributed by list_id" in result.output
    for table in ("review_iterations", "review_issues"):
        assert f"{table}: distributed by review_id" in result.output
    # The rows were copied to the shards; the coordinator keeps no copy of its own.
    for table in ("messages", "activities", "tasks", "review_iterations", "langgraph_blobs"):
        assert f"{table}: the copy of its rows left on the coordinator removed" in result.output
    assert set(_local_bytes(url).values()) == {0}
    assert citus.distribute(url) == []
    with ik.Store(url, pool_size=2) as store:
        assert {sid: store.replay_session(sid) for sid in sessions} == before
        assert {sid: store.replay_agent(agents[sid]) for sid in sessions} == before_agents
        assert store.search("hello", limit=200) == found
        assert [i.mail.id for i in store.mail.inbox("bob")] == [sent.id]
        assert store.activities.feed() == feed
        assert store.activities.feed(identity="alice") == alice_feed
        assert [s.summary for s in store.summaries.history("bob")] == ["bob's summary"]
        assert {n: store.tasks.list(f"list{n}") for n in range(3)} == tasks_before
        assert store.tasks.stats() == stats_before
        with pytest.raises(ik.InvalidArgument, match="cycle"):
            store.tasks.upsert("list1", "a", blocked_by=["c"])
        store.tasks.complete("list0", "a", "alice")
        assert [t.external_id for t in store.tasks.available("list0")] == ["b"]
        assert {r: store.reviews.iterations(r) for r in reviews} == reviews_before
        assert {r: store.reviews.open_issues(r) for r in reviews} == open_before
        second = store.reviews.record_iteration(reviews[1], "carol", "approve", "ok")
        assert second.iteration_num == 2 and store.reviews.get(reviews[1]).state == "approved"
        resolved = store.reviews.resolve_issue(open_before[reviews[2]][0], "wont_fix")
        assert resolved.status == "wont_fix" and resolved.resolved_in_iteration == 1
        with pytest.raises(ik.InvalidArgument, match="already fixed"):
            store.reviews.resolve_issue(store.reviews.issues(reviews[0])[0], "duplicate")
        saver = IkigaiSaver(store)
        assert {t: _thread_state(saver, t) for t in threads} == threads
        _counter_graph(saver).invoke({"total": 1}, _thread("lg"))
        assert _thread_state(saver, "lg")[0] == threads["lg"][0] + 2  # input 1, node 1
        store.append(sessions[0], "user", "after distribution", agent_uuid=agents[sessions[0]])
        with store._connection() as conn:
            row = conn.execute(
                "SELECT count(*) AS n, count(DISTINCT id) AS d FROM messages"
            ).fetchone()
        assert row is not None and row["n"] == row["d"] == 20 * 7 + 1
    placed = {p.relation: p.column for p in citus.placements(url) if p.kind == "distributed"}
    assert placed == DISTRIBUTED


def _local_bytes(url: str) -> dict[str, int]:
    """The size of each distributed table's own storage on the coordinator."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT CAST(logicalrelid AS text), pg_relation_size(logicalrelid) "
            "FROM pg_dist_partition WHERE partmethod = 'h'"
        ).fetchall()
    return dict(rows)


def test_migrating_removes_the_copies_an_earlier_distribution_left(
    cluster: str, filled_plain: str
) -> None:
    """A database distributed before migration 0043 kept a copy of every distributed table's
    rows on the coordinator; migrating it removes them, and every row is still read."""
    url = filled_plain
    with ik.Store(url, pool_size=1) as store:
        sessions = [store.create_session(f"s{n}") for n in range(5)]
        for sid in sessions:
            store.append_many(sid, [("user", f"hello {sid} {n}", None) for n in range(20)])
        store.identities.register("alice")
        store.activities.record("alice", "commit", "before distribution")
        before = {sid: store.replay_session(sid) for sid in sessions}
    rolled: list[str] = []  # back to 0042: 0043 and every migration after it
    while "0043-citus-no-local-copies" not in rolled:
        rolled += migrate.rollback(url, count=1)
    assert citus.prepare_database(cluster, url.split("dbname=")[1].split()[0])
    assert "messages" in dict(citus.distribute(url))
    kept = _local_bytes(url)
    assert kept["messages"] > 0 and kept["activities"] > 0
    assert migrate.apply(url) == rolled[::-1]
    assert set(_local_bytes(url).values()) == {0}
    with ik.Store(url, pool_size=1) as store:
        assert {sid: store.replay_session(sid) for sid in sessions} == before
        assert [a.description for a in store.activities.feed()] == ["before distribution"]
    assert citus.distribute(url) == []


#: What rolling back each Citus migration moves back to the coordinator.
_PLACED_BY = {
    "0038-citus-reviews-by-review": {"review_iterations", "review_issues"},
    "0036-citus-tasks-by-list": {"tasks", "task_deps"},
    "0033-citus-more-distributed": {
        "langgraph_checkpoints",
        "langgraph_blobs",
        "langgraph_writes",
        "activities",
        "agent_summaries",
    },
    "0030-citus-distribution": {"messages"},
}


def _groups(url: str) -> set[frozenset[str]]:
    """The distributed tables of ``url``, as their colocation groups."""
    groups: dict[int | None, set[str]] = {}
    for p in citus.placements(url):
        if p.kind == "distributed":
            groups.setdefault(p.colocation_id, set()).add(p.relation)
    return {frozenset(g) for g in groups.values()}


def test_rolling_back_the_citus_migrations_one_by_one_and_again(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """Each rollback down to 0028 moves back exactly its own migration's tables, leaves
    ikigai_distribute() with nothing to place (no area function of a rolled-back migration
    survives), and 0030's removes it; applying again places the same colocation groups."""
    name = test_database_name(request.path, "chain")
    url = fresh_database(cluster, name)
    try:
        migrate.apply(url)
        placed = _groups(url)
        expected = dict(DISTRIBUTED)
        rolled = ""
        while rolled != "0030-citus-distribution":
            [rolled] = migrate.rollback(url, count=1)
            for table in _PLACED_BY.get(rolled, ()):
                del expected[table]
            found = {p.relation: p.column for p in citus.placements(url) if p.kind == "distributed"}
            assert found == expected, rolled
            if expected:
                assert citus.distribute(url) == [], rolled
        with psycopg.connect(url) as conn:
            left = conn.execute(
                "SELECT proname FROM pg_proc WHERE proname LIKE 'ikigai\\_distribute%'"
            ).fetchall()
        assert left == []
        migrate.apply(url)
        assert _groups(url) == placed
        assert citus.distribute(url) == []
    finally:
        drop_test_database(cluster, name)


#: An issue a review iteration raises.
_ISSUE = {"issue_type": "bug", "severity": "high", "title": "t", "description": "d"}


class _Count(TypedDict):
    total: Annotated[int, operator.add]


def _counter_graph(saver: IkigaiSaver) -> Any:
    """A one-node graph adding its input to a running total, checkpointed by ``saver``."""
    builder = StateGraph(_Count)
    builder.add_node("add", lambda state: {"total": 1})
    builder.add_edge(START, "add")
    builder.add_edge("add", END)
    return builder.compile(checkpointer=saver)


def _thread(thread_id: str) -> Any:
    return {"configurable": {"thread_id": thread_id}}


def _thread_state(saver: IkigaiSaver, thread_id: str) -> tuple[int, list[str]]:
    """A thread's total (its newest checkpoint) and its checkpoint ids, newest first."""
    latest = saver.get_tuple(_thread(thread_id))
    assert latest is not None
    ids = [t.config["configurable"]["checkpoint_id"] for t in saver.list(_thread(thread_id))]
    return latest.checkpoint["channel_values"]["total"], ids


# Growing the cluster: the library's rebalance, then under load.


def test_rebalance_refuses_logical_moves_from_async_commit_nodes(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """citus.rebalance and ``citus rebalance`` refuse a logical move, moving nothing, while the
    workers commit with synchronous_commit = off (the test cluster's setting); block_writes, or
    a logical move once the database sets it to local, goes ahead."""
    name = test_database_name(request.path, "rebalance")
    url = fresh_database(cluster, name)
    try:
        migrate.apply(url)
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute(
                "SELECT bool_or(result = 'off') FROM run_command_on_workers("
                "'SHOW synchronous_commit')"
            ).fetchone() != (True,):
                pytest.skip("the cluster's nodes commit synchronously: nothing to refuse")
            before = conn.execute(
                "SELECT shardid, groupid FROM pg_dist_placement ORDER BY shardid"
            ).fetchall()
        for mode in ("auto", "force_logical"):
            with pytest.raises(ik.InvalidArgument, match=r"synchronous_commit = off: 127\.0"):
                citus.rebalance(url, mode=mode)
        result = CliRunner().invoke(cli, ["--database", url, "citus", "rebalance"])
        assert result.exit_code != 0 and "synchronous_commit = off" in result.output
        with pytest.raises(ik.InvalidArgument, match="mode must be one of"):
            citus.rebalance(url, mode="logical")
        with psycopg.connect(url, autocommit=True) as conn:
            jobs = conn.execute("SELECT count(*) FROM pg_dist_background_job").fetchone()
            after = conn.execute(
                "SELECT shardid, groupid FROM pg_dist_placement ORDER BY shardid"
            ).fetchall()
        assert jobs == (0,) and after == before
        # The shards are already spread over the two workers: nothing to move either way.
        assert citus.rebalance(url, mode="block_writes") is None
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = local')
        result = CliRunner().invoke(
            cli, ["--database", url, "citus", "rebalance", "--mode", "force_logical"]
        )
        assert result.exit_code == 0, result.output
        assert result.output == "nothing to move\n"
    finally:
        drop_test_database(cluster, name)


def test_rebalance_follows_its_tasks_and_cancels_a_stalled_job(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """A rebalance whose moves never start (here Citus' task monitor is switched off, as when
    the coordinator has no background worker left) fails after ``stall_timeout`` saying why,
    with its job cancelled and nothing moved; once the monitor is back, the CLI's rebalance
    reports its tasks as they finish and every shard leaves the worker that should have none.
    (The monitor's setting is the server's: a second checkout rebalancing on the same cluster
    meanwhile would stall too.)"""
    name = test_database_name(request.path, "stall")
    url = fresh_database(cluster, name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET citus.shard_count = 4')
        migrate.apply(url)
        with psycopg.connect(url, autocommit=True) as conn:
            node = conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid > 0 "
                "ORDER BY nodeport DESC LIMIT 1"
            ).fetchone()
            assert node is not None
            conn.execute("SELECT citus_set_node_property(%s, %s, 'shouldhaveshards', false)", node)
            before = conn.execute(
                "SELECT shardid, groupid FROM pg_dist_placement ORDER BY shardid"
            ).fetchall()
        with psycopg.connect(cluster, autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET citus.background_task_queue_interval = -1")
            conn.execute("SELECT pg_reload_conf()")
        try:
            time.sleep(1)
            seen: list[citus.RebalanceProgress] = []
            with pytest.raises(citus.RebalanceError, match="no shard move has run for 2 s") as e:
                citus.rebalance(
                    url,
                    mode="block_writes",
                    stall_timeout=2,
                    poll_interval=0.2,
                    progress=seen.append,
                )
        finally:
            with psycopg.connect(cluster, autocommit=True) as conn:
                conn.execute("ALTER SYSTEM RESET citus.background_task_queue_interval")
                conn.execute("SELECT pg_reload_conf()")
        assert seen[0].state == "scheduled" and seen[0].tasks > 0 and seen[0].done == 0
        assert e.value.progress.state == "cancelled"
        with psycopg.connect(url, autocommit=True) as conn:
            after = conn.execute(
                "SELECT shardid, groupid FROM pg_dist_placement ORDER BY shardid"
            ).fetchall()
        assert after == before
        time.sleep(1)
        result = CliRunner().invoke(
            cli, ["--database", url, "citus", "rebalance", "--mode", "block_writes"]
        )
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert re.fullmatch(r"rebalance job \d+: done", lines[-1]), lines
        assert re.fullmatch(r"rebalance job \d+: finished, (\d+) of \1 tasks done", lines[-2])
        with psycopg.connect(url, autocommit=True) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_dist_placement AS p "
                "JOIN pg_dist_node AS n ON n.groupid = p.groupid WHERE n.nodeport = %s",
                (node[1],),
            ).fetchone()
        assert left == (0,)
    finally:
        drop_test_database(cluster, name)


def test_drain_moves_every_shard_off_a_worker_then_removes_it(
    cluster: str, request: pytest.FixtureRequest
) -> None:
    """``citus drain HOST:PORT --remove`` moves every shard of the database off the worker,
    printing its progress, then removes the node from the database; the sessions read back
    the same. A node the database does not know, the coordinator, --remove without waiting
    and (on the test cluster, synchronous_commit = off) a logical drain are refused, changing
    nothing."""
    name = test_database_name(request.path, "drain")
    url = fresh_database(cluster, name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" SET citus.shard_count = 4')
        migrate.apply(url)
        with ik.Store(url, pool_size=1) as store:
            sessions = [store.create_session(f"s{n}") for n in range(8)]
            for sid in sessions:
                store.append(sid, "user", f"hello {sid}")
            before = {sid: store.replay_session(sid) for sid in sessions}
        with psycopg.connect(url, autocommit=True) as conn:
            nodes = conn.execute(
                "SELECT nodename, nodeport, groupid FROM pg_dist_node ORDER BY groupid"
            ).fetchall()
        (head, head_port, _), *_, (host, port, group) = nodes
        # The database's copy on a worker is refused, saying so.
        with pytest.raises(ik.InvalidArgument, match="on a Citus worker"):
            citus.placements(make_conninfo(url, host=host, port=str(port)))
        with pytest.raises(ik.InvalidArgument, match="not one of this database's nodes"):
            citus.drain(url, host, 1)
        with pytest.raises(ik.InvalidArgument, match="is the coordinator"):
            citus.drain(url, head, head_port)
        with pytest.raises(ik.InvalidArgument, match="remove needs wait"):
            citus.drain(url, host, port, remove=True, wait=False)
        with pytest.raises(ik.InvalidArgument, match="synchronous_commit = off"):
            citus.drain(url, host, port, mode="force_logical")
        with psycopg.connect(url, autocommit=True) as conn:
            keeps = conn.execute(
                "SELECT shouldhaveshards FROM pg_dist_node WHERE nodeport = %s", (port,)
            ).fetchone()
        assert keeps == (True,)
        drain = ("citus", "drain", f"{host}:{port}", "--mode", "block_writes", "--remove")
        result = CliRunner().invoke(cli, ["--database", url, *drain])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert re.fullmatch(rf"rebalance job \d+: done; {host}:{port} removed", lines[-1]), lines
        assert re.fullmatch(r"rebalance job \d+: finished, (\d+) of \1 tasks done", lines[-2])
        with psycopg.connect(url, autocommit=True) as conn:
            left = conn.execute(
                "SELECT count(*) FROM pg_dist_node WHERE nodeport = %s", (port,)
            ).fetchone()
            # Removed only once Citus had dropped what the moves left there: no cleanup
            # record names the gone node (its shards could never move again).
            orphans = conn.execute(
                "SELECT count(*) FROM pg_dist_cleanup WHERE node_group_id = %s", (group,)
            ).fetchone()
        assert left == (0,) and orphans == (0,)
        with ik.Store(url, pool_size=1) as store:
            assert {sid: store.replay_session(sid) for sid in sessions} == before
    finally:
        drop_test_database(cluster, name)


def _as_pg(*args: str) -> None:
    """Run a PostgreSQL binary as the cluster's OS user (the servers refuse to run as root)."""
    user = os.environ.get("CITUS_OSUSER", "citususer")
    cmd = ["runuser", "-u", user, "--", *args] if os.geteuid() == 0 else list(args)
    subprocess.run(cmd, check=True, capture_output=True, timeout=120)


@pytest.fixture
def moving_db(cluster: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """A Citus database of its own for one rebalance (its node list gains the extra worker,
    which is deleted afterwards: no other test may see that node), migrated, with 8 shards a
    table instead of 32: a few shard groups of each colocation move, not a third of 128 (a
    logical move takes seconds a group; CI's budget)."""
    name = test_database_name(request.path, request.node.callspec.id)
    url = fresh_database(cluster, name)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET citus.shard_count = 8')
    migrate.apply(url)
    yield url
    drop_test_database(cluster, name)


@pytest.fixture
def extra_worker(cluster: str, moving_db: str) -> Iterator[tuple[str, int]]:
    """A third worker on 127.0.0.1:EXTRA_PORT with ``moving_db``'s database and citus in it,
    stopped and deleted afterwards."""
    base = Path(os.environ.get("CITUS_BASE", "/tmp/citus"))
    data = base / "worker-extra"
    if data.exists():
        _as_pg(str(PGBIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    if os.geteuid() == 0:
        shutil.chown(data, os.environ.get("CITUS_OSUSER", "citususer"))
    data.chmod(0o700)
    _as_pg(str(PGBIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    with (data / "postgresql.conf").open("a") as conf:
        conf.write(
            f"\nport = {EXTRA_PORT}\nlisten_addresses = '127.0.0.1'\n"
            f"unix_socket_directories = '{data}'\n"
            "shared_preload_libraries = 'citus'\nmax_connections = 300\nwal_level = logical\n"
            "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
        )
    _as_pg(str(PGBIN / "pg_ctl"), "-D", str(data), "-l", str(data / "server.log"), "-w", "start")
    try:
        node = f"host=127.0.0.1 port={EXTRA_PORT} user=postgres"
        name = moving_db.split("dbname=")[1].split()[0]
        with psycopg.connect(node + " dbname=postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        with psycopg.connect(node + f" dbname={name}", autocommit=True) as conn:
            conn.execute("CREATE EXTENSION citus")
        yield "127.0.0.1", EXTRA_PORT
    finally:
        _as_pg(str(PGBIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)


@pytest.mark.parametrize("mode", ["block_writes", "force_logical"])
def test_rebalance_under_load_loses_and_duplicates_nothing(
    cluster: str, moving_db: str, extra_worker: tuple[str, int], mode: str
) -> None:
    """Appends, mail and queue claims run while a worker is added and shards move to it (in
    ``mode``): afterwards every acknowledged write is there exactly once, and every claim is
    unique. A logical move needs the workers to flush each commit before acknowledging it
    (``synchronous_commit`` not ``off``; the test cluster's is): docs/concepts/citus.md."""
    url = moving_db
    if mode != "block_writes":
        with psycopg.connect(url, autocommit=True) as conn:
            # This database only (Citus propagates it to the workers), before any write.
            name = url.split("dbname=")[1].split()[0]
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = local')
    with ik.Store(url, pool_size=8) as store:
        sessions = [store.create_session(f"load{n}") for n in range(16)]
        for name in ("boss", "w0", "w1", "reader"):
            store.identities.register(name)
        store.topics.create("jobs", "queue")
        for w in ("w0", "w1"):
            store.topics.subscribe(w, "jobs")
        stop = threading.Event()
        acked: dict[str, list[int]] = {"events": [], "mail": [], "published": [], "claimed": []}
        errors: list[BaseException] = []
        lock = threading.Lock()

        def keep(kind: str, value: int) -> None:
            with lock:
                acked[kind].append(value)

        def appender(k: int) -> None:
            n = 0
            while not stop.is_set():
                sid = sessions[(k * 7 + n) % len(sessions)]
                keep("events", store.append(sid, "user", f"load {k} {n}").id)
                n += 1

        def mailer() -> None:
            n = 0
            while not stop.is_set():
                keep("mail", store.mail.send("boss", ["reader"], f"m{n}", "x").id)
                keep("published", store.mail.publish("boss", "jobs", f"j{n}", "x").id)
                n += 1

        def claimer(name: str) -> None:
            while not stop.is_set():
                held = store.topics.claim(name, "jobs", ttl=60)
                if held is None:
                    time.sleep(0.01)
                    continue
                store.topics.complete(held)
                keep("claimed", held.mail.id)

        def guarded(fn: Callable[..., None], *args: object) -> threading.Thread:
            def run() -> None:
                try:
                    fn(*args)
                except BaseException as exc:  # reported by the asserts below
                    errors.append(exc)
                    stop.set()

            return threading.Thread(target=run)

        threads = [guarded(appender, k) for k in range(3)]
        threads += [guarded(mailer), guarded(claimer, "w0"), guarded(claimer, "w1")]
        for t in threads:
            t.start()
        try:
            time.sleep(1.0)
            host, port = extra_worker
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("SELECT citus_add_node(%s, %s)", (host, port))
            # The library's rebalance (its check, then the job followed to its end).
            seen: list[citus.RebalanceProgress] = []
            job = citus.rebalance(url, mode=mode, stall_timeout=300, progress=seen.append)
            assert job is not None and seen[-1].state == "finished", seen
            assert seen[-1].done == seen[-1].tasks > 0
            with psycopg.connect(url, autocommit=True) as conn:
                moved = conn.execute(
                    "SELECT count(*) FROM pg_dist_shard_placement WHERE nodeport = %s", (port,)
                ).fetchone()
            time.sleep(0.5)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        assert not errors, errors
        assert moved is not None and moved[0] > 0
        # Drain what is left so every published job is claimed once.
        while (held := store.topics.claim("w0", "jobs", ttl=60)) is not None:
            store.topics.complete(held)
            acked["claimed"].append(held.mail.id)
        with store._connection() as conn:
            ids = [r["id"] for r in conn.execute("SELECT id FROM messages ORDER BY id").fetchall()]
            mail_ids = {r["id"] for r in conn.execute("SELECT id FROM mail").fetchall()}
    assert acked["events"] and acked["mail"] and acked["claimed"]
    assert len(ids) == len(set(ids)), "an event is stored twice"
    assert set(acked["events"]) <= set(ids), "an acknowledged event is missing"
    assert len(ids) == len(acked["events"]), "an event nobody appended is stored"
    assert set(acked["mail"]) | set(acked["published"]) <= mail_ids
    assert len(acked["claimed"]) == len(set(acked["claimed"])), "a job was claimed twice"
    assert sorted(acked["claimed"]) == sorted(acked["published"])
