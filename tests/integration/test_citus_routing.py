"""On Citus, every named query serving one session, agent, LangGraph thread, identity, task
list or review is routed to one shard.

Only ``messages`` and LangGraph's checkpoint rows (``langgraph_checkpoints``, ``langgraph_blobs``,
``langgraph_writes``, colocated with it by session), and the activity feed and agent summaries
(``activities``, ``agent_summaries``, by identity), and tasks and their edges (``tasks``,
``task_deps``, by task list: migration 0036), and a review's iterations and issues
(``review_iterations``, ``review_issues``, by review: migration 0038) are distributed
(docs/concepts/citus.md), so
only a query that reads or writes them, or calls a function that does, can ask more than one
shard. (``post_mail()``, which every mail, review and plan statement calls, writes the sender's
activity: ``test_post_mail_asks_the_senders_shard`` checks it once, for all its callers.)

Each such query is classified here: ``ROUTED`` (with the parameters to run it with) or
``FAN_OUT`` (with the reason it asks every shard, as the design page documents). A query
added to ``queries/`` that touches them without a classification fails
``test_every_query_on_messages_is_classified`` (no database needed), so a new query cannot
silently fan out.

On the cluster, ``test_routed_queries_ask_one_shard`` runs each routed query (in a transaction
rolled back afterwards) with ``citus.log_remote_commands`` on, and counts the distinct shards
named in the commands the coordinator sends (shards of one hash range count as one: the
colocated shards of messages and the LangGraph tables hold the same sessions, on one node):
at most one.
Running the query, not only ``EXPLAIN``-ing it, also covers the functions (ikigai_append_batch,
agent_replay_events, the saver's functions of migration 0033) whose statements an ``EXPLAIN``
of the call does not show. Off Citus it is skipped, saying so
(``.ci/run`` runs it on the cluster, with ``IKIGAI_TEST_CITUS=1`` which turns that skip into a
failure).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

import ikigai_store as ik
from ikigai_store import citus
from ikigai_store.sql import queries

pytestmark = pytest.mark.db

#: The distributed tables (their shards are named ``<table>_<shard id>``).
DISTRIBUTED = (
    "messages",
    "langgraph_checkpoints",
    "langgraph_blobs",
    "langgraph_writes",
    "activities",
    "agent_summaries",
    "tasks",
    "task_deps",
    "review_iterations",
    "review_issues",
)

#: A statement that touches a distributed table (or task_view, over tasks), or calls a function
#: that does (migrations 0030, 0033, 0036, 0038, 0040, 0041, 0044 and 0045).
TOUCHES = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+"
    r"(?:messages|langgraph_(?:checkpoints|blobs|writes)|activities|agent_summaries"
    r"|tasks|task_deps|task_view|review_iterations|review_issues)\b"
    r"|\b(?:agent_replay_ranges|agent_replay_events|ikigai_append_id|ikigai_append_batch"
    r"|ikigai_append_keyed|ikigai_append_batch_keyed"
    r"|ikigai_claude_append"
    r"|langgraph_put|langgraph_put_writes|langgraph_blob_chain|langgraph_get_checkpoint"
    r"|langgraph_list_checkpoints|langgraph_delete_thread|langgraph_drop_unnamed"
    r"|langgraph_delete_for_runs|langgraph_rebuild_latest|langgraph_delete_rows"
    r"|ikigai_insert_activity|ikigai_identity_feed|ikigai_summary_history"
    r"|ikigai_task_rows|ikigai_list_tasks|ikigai_task_upsert|ikigai_task_claim"
    r"|ikigai_task_release|ikigai_task_state|ikigai_task_stats|ikigai_task_sync"
    r"|ikigai_task_prune|ikigai_review_rows|ikigai_review_record_iteration"
    r"|ikigai_review_issue|ikigai_review_resolve_issue)"
    r"\s*\(",
    re.IGNORECASE,
)
SHARD = re.compile(r"\b(?:" + "|".join(DISTRIBUTED) + r")_(\d{4,})\b")


@dataclass(frozen=True)
class World:
    """One session with a root agent, a fork of it, and a few events of each; a LangGraph
    thread with checkpoints, blobs and writes, a copy of it, and an unnamed thread."""

    session_id: int
    agent: str
    child: str
    message_id: int
    ended_session_id: int
    thread: str = "routing-thread"
    thread_session_id: int = 0
    copy: str = "routing-copy"
    unnamed_session_id: int = 0
    list_pk: int = 0
    review_id: str = ""
    issue_id: int = 0


P = Callable[[World], dict[str, Any]]

SEARCH = {"query": "hello", "phrase": None, "kinds": None, "since": None, "until": None}

#: The identity whose activities, summaries and task the routed queries write and read.
IDENTITY = "routing-ann"
#: The task list of the routed task queries: t1 pending, t2 blocked by t1, t3 in progress held
#: by IDENTITY.
LIST = "routing-list"


def _iteration(w: World, activity_type: str | None) -> dict[str, Any]:
    """review_record_iteration's parameters: a comment by routing-bob on the world's review,
    with one issue, writing an activity of ``activity_type`` (None: no activity)."""
    issue = {"issue_type": "bug", "severity": "low", "title": "t", "description": "d"}
    return {
        "review_id": w.review_id,
        "reviewer": "routing-bob",
        "decision": "comment",
        "to_state": None,
        "summary": "s",
        "suggestions": None,
        "files_reviewed": None,
        "lines_analyzed": None,
        "duration_ms": None,
        "cost_usd": None,
        "reviewer_session_id": None,
        "issues": json.dumps([issue]),
        "text": "s",
        "subject": "%1$s",
        "body": "%3$s",
        "activity_type": activity_type,
        "description": "reviewed %1$s",
    }


#: Queries of one session or agent: each asks at most one shard on the cluster.
ROUTED: dict[str, P] = {
    "adopt_orphan_messages": lambda w: {"session_id": w.session_id, "uuid": w.agent},
    "append_message": lambda w: {
        "session_id": w.session_id,
        "agent_uuid": w.agent,
        "kind": "pop",
        "content": None,
        "data": json.dumps({"target_message_id": w.message_id}),
        "target_message_id": w.message_id,
    },
    "append_event": lambda w: {
        "session_id": w.session_id,
        "kind": "user",
        "content": "x",
        "data": None,
    },
    "append_agent_event": lambda w: {
        "session_id": w.session_id,
        "agent_uuid": w.agent,
        "kind": "user",
        "content": "x",
        "data": None,
    },
    "append_keyed": lambda w: {
        "session_id": w.session_id,
        "agent_uuid": w.agent,
        "kind": "user",
        "content": "x",
        "data": None,
        "target_message_id": None,
        "idempotency_key": "routed",
    },
    "append_events": lambda w: {
        "session_id": w.session_id,
        "kinds": ["user", "assistant"],
        "contents": ["a", "b"],
        "datas": [None, None],
    },
    "append_agent_events": lambda w: {
        "session_id": w.session_id,
        "agent_uuid": w.agent,
        "kinds": ["user"],
        "contents": ["a"],
        "datas": [None],
    },
    "append_events_keyed": lambda w: {
        "session_id": w.session_id,
        "agent_uuid": w.agent,
        "kinds": ["user", "assistant"],
        "contents": ["a", "b"],
        "datas": [None, None],
        "idempotency_key": "routed-batch",
    },
    "count_session_messages": lambda w: {"session_id": w.session_id},
    "session_messages": lambda w: {"session_id": w.session_id},
    "session_live_events": lambda w: {"session_id": w.session_id},
    "session_replay_tail": lambda w: {"session_id": w.session_id, "lim": 10},
    "replay_agent_events": lambda w: {"agent_uuid": w.child},
    "replay_ranges": lambda w: {"agent_uuid": w.child},
    "export_head": lambda w: {"session_id": w.session_id},
    "export_events": lambda w: {"session_id": w.session_id, "horizon": w.message_id},
    "prune_session_events": lambda w: {"session_id": w.ended_session_id, "lim": 100},
    "prune_session_row": lambda w: {"session_id": w.ended_session_id},
    "web_events_after": lambda w: {"session_id": w.session_id, "after_id": 0, "lim": 10},
    "web_events_before": lambda w: {
        "session_id": w.session_id,
        "before_id": w.message_id + 100,
        "lim": 10,
    },
    "web_session_controls": lambda w: {"session_id": w.session_id},
    "claude_append_entries": lambda w: {
        "session_id": w.session_id,
        "kinds": ["user"],
        "contents": ["a"],
        "datas": [json.dumps({"uuid": "u1"})],
        "summary": None,
    },
    "search_walk_session": lambda w: {
        **SEARCH,
        "session_id": w.session_id,
        "hi": None,
        "keep": 10,
        "need": 10,
        "window": 100,
    },
    "langgraph_put": lambda w: _put(w.thread, "c9", ["a"], ["3"], ["2"]),
    "langgraph_get": lambda w: {
        "thread_id": w.thread,
        "checkpoint_ns": "",
        "checkpoint_id": None,
        "known_channels": [],
        "known_versions": [],
    },
    "langgraph_list": lambda w: {
        "thread_id": w.thread,
        "checkpoint_ns": None,
        "filter": None,
        "before": None,
        "lim": None,
    },
    "langgraph_blobs_for": lambda w: {
        "session_id": w.thread_session_id,
        "checkpoint_ns": "",
        "channels": ["a"],
        "versions": ["2"],
        "known_channels": [],
        "known_versions": [],
    },
    "langgraph_put_writes": lambda w: {
        "thread_id": w.thread,
        "title": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c2",
        "task_id": "task2",
        "task_path": "",
        "idxs": [0],
        "channels": ["a"],
        "types": ["json"],
        "blobs": [b"1"],
        "upsert": True,
    },
    "langgraph_delete_thread": lambda w: {"thread_id": w.copy},
    "langgraph_drop_unnamed": lambda w: {"session_id": w.unnamed_session_id},
    "activities_record": lambda w: {
        "identity": IDENTITY,
        "type": "commit",
        "description": "x",
        "metadata": None,
    },
    "activities_feed_identity": lambda w: {
        "identity": IDENTITY,
        "since": None,
        "before": None,
        "limit": 10,
    },
    "activities_feed_identity_type": lambda w: {
        "identity": IDENTITY,
        "type": "commit",
        "since": None,
        "before": None,
        "limit": 10,
    },
    "summaries_add": lambda w: {
        "identity": IDENTITY,
        "summary": "s",
        "delta": None,
        "transcript_hash": None,
        "cost_usd": None,
    },
    "summaries_history": lambda w: {"identity": IDENTITY, "limit": 10},
    "task_upsert": lambda w: {
        "list_id": LIST,
        "external_id": "t4",
        "subject": "new",
        "description": None,
        "active_form": None,
        "metadata": None,
        "status": "in_progress",
        "owner": IDENTITY,
        "replace_deps": True,
        "blocker_ids": [],
    },
    "task_dependency_check": lambda w: {
        "list_pk": w.list_pk,
        "external_id": "t1",
        "blocked_by": ["t2", "nope"],
    },
    "task_get": lambda w: {"list_id": LIST, "external_id": "t2"},
    "task_list_tasks": lambda w: {"list_id": LIST, "status": None},
    "task_available_in_list": lambda w: {"list_id": LIST, "project_key": None},
    "task_claim": lambda w: {"list_id": LIST, "external_id": "t1", "owner": "routing-bob"},
    "task_claim_refusal": lambda w: {"list_id": LIST, "external_id": "t2"},
    "task_lock_task": lambda w: {"list_id": LIST, "external_id": "t3"},
    "task_release": lambda w: {"list_id": LIST, "external_id": "t3", "owner": IDENTITY},
    "task_stats_in_list": lambda w: {"list_id": LIST},
    "task_sync_list": lambda w: {"list_id": LIST, "active": ["t1", "t3"]},
    "review_record_iteration": lambda w: _iteration(w, None),
    "review_iterations": lambda w: {"review_id": w.review_id},
    "review_issues": lambda w: {"review_id": w.review_id},
    "review_open_issues": lambda w: {"review_id": w.review_id},
    "search_probe_session": lambda w: {
        **SEARCH,
        "session_id": w.session_id,
        "agent_uuid": None,
        "lo": 0,
        "hi": w.message_id + 100,
        "keep": 10,
        "need": 10,
    },
}

#: Queries that ask every shard, and why (docs/concepts/citus.md, "What fans out").
FAN_OUT: dict[str, str] = {
    "find_clear": "by agent uuid alone (a low-level step; replay_agent_events is the routed path)",
    "query_range": "by agent uuid alone (a low-level step; replay_agent_events is the routed path)",
    "fork_agent": "reads the parent's newest event by agent uuid (a fork is rare)",
    "web_agents": "each agent's first and last event by agent uuid (the web view's agent list)",
    "web_event": "one event by id alone (the web view's permalink)",
    "claude_load": "finds the session through the transcript's key, a join the planner cannot "
    "route (one session's rows are read)",
    "claude_delete": "finds the session through the transcript's key (one session's rows go)",
    "summaries_add_context": "checks the range against the agent's lineage by message id",
    "summaries_context_refusal": "checks the range against the agent's lineage by message id",
    "prune_sessions_count": "counts the ended sessions of every shard (retention)",
    "import_events": "routed (one session's events, the session id a constant) but reads the "
    "import's temporary tables: covered by tests/integration/test_portability.py on the cluster",
    "langgraph_delete_for_runs": "checkpoints by metadata.run_id in every thread (every shard)",
    "langgraph_rebuild_latest": "reads the old thread's lineage and writes a new thread's "
    "session (prune keep_latest: a shard for each)",
    "activities_feed": "the feed across identities (every shard, by design)",
    "activities_feed_type": "the feed of one type across identities (every shard, by design)",
    "activities_prune": "deletes by age, every identity's (every shard)",
    "summaries_prune": "keeps the newest of each identity, or of one found by name in a "
    "subquery (every shard)",
    "search_estimate": "search across sessions (every shard, by design)",
    "search_start": "search across sessions (every shard, by design)",
    "search_hits": "search across sessions (every shard, by design)",
    "search_walk": "search across sessions (every shard, by design)",
    "search_walk_agent": "search filtered by agent uuid (every shard)",
    "search_walk_time": "search across sessions by time (every shard, by design)",
    "search_probe": "search across sessions (every shard, by design)",
    "search_probe_agent": "search filtered by agent uuid (every shard)",
    "search_probe_kinds": "search across sessions by kind (every shard, by design)",
    "search_probe_range": "search across sessions (every shard, by design)",
    "search_probe_time": "search across sessions by time (every shard, by design)",
    "search_fanout": "search across sessions on Citus: one task per shard, LIMIT inside",
    "search_fanout_time": "search across sessions by time on Citus: one task per shard",
    "task_owned": "one owner's tasks in every list (every shard)",
    "task_available_all": "the available tasks of every list (every shard, by design)",
    "task_stats_all": "the counts of every list (every shard, by design)",
    "task_prune": "deletes by age, every list's (every shard)",
    "watch_tasks": "the available tasks of every list of the identity's project (every shard)",
    "web_task_lists": "the counts of the lists shown (every shard, once)",
    "review_issue": "finds the issue by its id alone (every shard), then reads its review",
    "review_resolve_issue": "finds the issue by its id alone (every shard), then updates it on "
    "its review's shard",
}


def _put(
    thread: str, checkpoint_id: str, channels: list[str], versions: list[str], bases: list[Any]
) -> dict[str, Any]:
    """langgraph_put's parameters: a checkpoint of ``thread`` and one blob per channel."""
    return {
        "thread_id": thread,
        "title": "t",
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "parent_checkpoint_id": None,
        "checkpoint": json.dumps({"channel_versions": dict(zip(channels, versions, strict=True))}),
        "metadata": json.dumps({"run_id": "r1"}),
        "channels": channels,
        "versions": versions,
        "types": ["json"] * len(channels),
        "blobs": [b"x"] * len(channels),
        "bases": bases,
    }


def _named_queries() -> dict[str, str]:
    """Every named query's SQL (aiosql's ``<name>_cursor`` twins left out)."""
    names = {
        n for n in dir(queries) if not n.startswith("_") and hasattr(getattr(queries, n), "sql")
    }
    return {
        n: getattr(queries, n).sql
        for n in names
        if not (n.endswith("_cursor") and n.removesuffix("_cursor") in names)
    }


def test_every_query_on_messages_is_classified() -> None:
    """The queries touching messages are exactly those classified routed or fan-out."""
    touching = {
        n for n, text in _named_queries().items() if TOUCHES.search(re.sub(r"--[^\n]*", "", text))
    }
    assert not set(ROUTED) & set(FAN_OUT)
    assert touching - set(ROUTED) - set(FAN_OUT) == set(), "classify these in ROUTED or FAN_OUT"
    assert (set(ROUTED) | set(FAN_OUT)) - touching == set(), "these touch no distributed table"


@pytest.fixture(scope="module")
def cluster_url(ikigai_db_url: str) -> str:
    """This file's database, which must be a Citus one (else the test is skipped, or fails
    under IKIGAI_TEST_CITUS=1)."""
    if not citus.is_citus(ikigai_db_url):
        if os.environ.get("IKIGAI_TEST_CITUS") == "1":
            pytest.fail("IKIGAI_TEST_CITUS=1 but the test database has no citus extension")
        pytest.skip("needs IKIGAI_TEST_DATABASE_URL at a Citus coordinator")
    return ikigai_db_url


@pytest.fixture(scope="module")
def world(cluster_url: str) -> Iterator[World]:
    """A session, its agents and events, committed."""
    with ik.Store(cluster_url, pool_size=1) as store:
        sid = store.create_session("routing")
        agent = store.create_agent(sid)
        store.append(sid, "user", "hello world", agent_uuid=agent.uuid)
        mark = store.mark(agent.uuid, "m")
        store.clear(agent.uuid)
        store.append(sid, "assistant", "hello again", agent_uuid=agent.uuid)
        child = store.fork_agent(agent.uuid)
        store.append(sid, "user", "child says hello", agent_uuid=child.uuid)
        ended = store.create_session("ended")
        store.append(ended, "user", "bye")
        store.end_session(ended)
        store.identities.register(IDENTITY)
        store.identities.register("routing-bob")
        store.activities.record(IDENTITY, "commit", "first")
        store.summaries.add(IDENTITY, "first summary")
        task_list = store.tasks.create_list(LIST, IDENTITY)
        store.tasks.upsert(LIST, "t1", subject="one")
        store.tasks.upsert(LIST, "t2", subject="two", blocked_by=["t1"])
        store.tasks.upsert(LIST, "t3", subject="three")
        store.tasks.claim(LIST, "t3", IDENTITY)
        review = store.reviews.create(IDENTITY, reviewers=["routing-bob"], branch="b")
        for event in ("submit", "start"):
            review = store.reviews.fire(review, event)
        iteration = store.reviews.record_iteration(
            review,
            "routing-bob",
            "comment",
            "first",
            issues=[{"issue_type": "bug", "severity": "high", "title": "t", "description": "d"}],
        )
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        run = lambda name, params: conn.execute(getattr(queries, name).sql, params).fetchone()  # noqa: E731
        thread = run(
            "langgraph_put", _put("routing-thread", "c1", ["a", "b"], ["1", "1"], [None, None])
        )
        run("langgraph_put", _put("routing-thread", "c2", ["a"], ["2"], ["1"]))
        run(
            "langgraph_put_writes",
            {**ROUTED["langgraph_put_writes"](World(sid, "", "", 0, 0)), "upsert": False},
        )
        run(
            "langgraph_copy_thread",
            {
                "source_thread_id": "routing-thread",
                "target_thread_id": "routing-copy",
                "title": "t",
            },
        )
        run("langgraph_put", _put("routing-unnamed", "c1", ["a"], ["1"], [None]))
        unnamed = run("langgraph_unname", {"thread_id": "routing-unnamed"})
    assert thread is not None and unnamed is not None
    yield World(
        sid,
        agent.uuid,
        child.uuid,
        mark.id,
        ended,
        thread_session_id=thread[0],
        unnamed_session_id=unnamed[0],
        list_pk=task_list.id,
        review_id=str(review.review_id),
        issue_id=iteration.issues[0].id,
    )


def _shards(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> set[str]:
    """The shard groups (colocated shards: one hash range) the coordinator sent commands to
    while running ``name``."""
    groups = {
        str(shard): str(low)
        for shard, low in conn.execute(
            "SELECT shardid, shardminvalue FROM pg_dist_shard "
            "WHERE logicalrelid = ANY (CAST(%s AS regclass[]))",
            (list(DISTRIBUTED),),
        )
    }
    sent: list[str] = []
    conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL citus.log_remote_commands = on")
        conn.execute("SET LOCAL client_min_messages = notice")
        text = getattr(queries, name).sql
        if text.lstrip().upper().startswith("COPY"):
            with conn.cursor().copy(text, params) as copy:
                for _ in copy:
                    pass
        else:
            conn.execute(text, params)
    return {groups[m] for line in sent for m in SHARD.findall(line)}


@pytest.mark.parametrize("name", sorted(ROUTED))
def test_routed_queries_ask_one_shard(cluster_url: str, world: World, name: str) -> None:
    """The query asks at most one shard (group) on the cluster."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        shards = _shards(conn, name, ROUTED[name](world))
    assert len(shards) <= 1, f"{name} asked {sorted(shards)}"


def test_a_fan_out_query_is_seen_asking_every_shard(cluster_url: str, world: World) -> None:
    """The measure sees a fan-out: counting a whole table's events asks every shard."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        shards = _shards(conn, "prune_sessions_count", {"ended_before": "infinity"})
        total = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'messages'::regclass"
        ).fetchone()
    assert total is not None and len(shards) == total[0] > 1


def test_a_copied_thread_asks_its_lineage_shards(cluster_url: str, world: World) -> None:
    """A copy's get reads its own session's rows and its source's: at most those two shards."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        params = {**ROUTED["langgraph_get"](world), "thread_id": world.copy}
        shards = _shards(conn, "langgraph_get", params)
    assert 1 <= len(shards) <= 2, shards


def test_post_mail_asks_the_senders_shard(cluster_url: str, world: World) -> None:
    """A mail with an activity (what every review, plan and send with an activity writes
    through post_mail) asks one shard: the sender's, for the activity."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sender, recipient = (
            conn.execute("SELECT id FROM identities WHERE name = %s", (name,)).fetchone()[0]  # type: ignore[index]
            for name in (IDENTITY, "routing-bob")
        )
        sent: list[str] = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute("SET LOCAL client_min_messages = notice")
            mail = conn.execute(
                "SELECT (post_mail(thread_id => 'routing', sender_id => %s,"
                " recipient_ids => ARRAY[%s]::bigint[], recipients => ARRAY['routing-bob'],"
                " subject => 's', body => 'b', priority => 'normal', metadata => '{}',"
                " activity_type => 'message', description => 'sent')).id",
                (sender, recipient),
            ).fetchone()
        shards = {m for line in sent for m in SHARD.findall(line)}
    assert mail is not None and mail[0] is not None
    assert len(shards) == 1, shards


def test_a_first_completion_asks_the_lists_and_the_owners_shards(
    cluster_url: str, world: World
) -> None:
    """A task's first completion writes its task (the list's one tasks shard) and its owner's
    task_complete activity (the owner's one activities shard): nothing else."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sent: list[str] = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
        params = {
            **ROUTED["task_upsert"](world),
            "external_id": "t3",
            "status": "completed",
            "replace_deps": False,
        }
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute("SET LOCAL client_min_messages = notice")
            row = conn.execute(queries.task_upsert.sql, params).fetchone()
            upsert_sent = list(sent)
            done = conn.execute(
                "SELECT count(*) FROM activities WHERE type = 'task_complete'"
            ).fetchone()
        shards = {m.group(0) for line in upsert_sent for m in SHARD.finditer(line)}
    assert row is not None and done is not None and done[0] == 1
    tables = sorted(name.rsplit("_", 1)[0] for name in shards)
    assert set(tables) <= {"tasks", "task_deps", "activities"}, shards
    assert tables.count("tasks") == 1 and tables.count("activities") == 1, shards


def test_an_iteration_asks_the_reviews_and_the_reviewers_shards(
    cluster_url: str, world: World
) -> None:
    """Recording an iteration with its activity writes the iteration and its issue (the
    review's one shard group) and the reviewer's activity (the reviewer's one activities
    shard): nothing else."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sent: list[str] = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute("SET LOCAL client_min_messages = notice")
            rows = conn.execute(
                queries.review_record_iteration.sql, _iteration(world, "review_completed")
            ).fetchall()
        shards = {m.group(0) for line in sent for m in SHARD.finditer(line)}
    assert len(rows) == 1
    tables = sorted(name.rsplit("_", 1)[0] for name in shards)
    assert set(tables) <= {"review_iterations", "review_issues", "activities"}, shards
    assert tables.count("activities") == 1, shards
    assert tables.count("review_iterations") == tables.count("review_issues") == 1, shards


def test_resolving_an_issue_writes_one_shard(cluster_url: str, world: World) -> None:
    """review_resolve_issue looks for the issue on every shard (by its id alone), but its
    UPDATE is sent to the review's shard only."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sent: list[str] = []
        conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
        with conn.transaction(force_rollback=True):
            conn.execute("SET LOCAL citus.log_remote_commands = on")
            conn.execute("SET LOCAL client_min_messages = notice")
            row = conn.execute(
                queries.review_resolve_issue.sql,
                {"issue_id": world.issue_id, "status": "fixed", "iteration": None},
            ).fetchone()
        updates = {m.group(0) for line in sent if "UPDATE" in line for m in SHARD.finditer(line)}
    assert row is not None
    assert len(updates) == 1 and next(iter(updates)).startswith("review_issues_"), updates


def test_a_search_across_sessions_asks_every_shard_once(cluster_url: str, world: World) -> None:
    """search_fanout is one task per shard, each with its ORDER BY id DESC LIMIT inside."""
    params = {
        **SEARCH,
        "agent_uuid": None,
        "hi": world.message_id + 100,
        "need": 1000,
    }
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        shards = _shards(conn, "search_fanout", params)
        total = conn.execute(
            "SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'messages'::regclass"
        ).fetchone()
        plan = "\n".join(
            str(r[0])
            for r in conn.execute(
                "EXPLAIN (COSTS OFF) " + queries.search_fanout.sql,  # type: ignore[attr-defined]
                params,
            )
        )
    assert total is not None and len(shards) == total[0] > 1
    # One distributed step (no subplan): the coordinator merges the tasks' rows.
    assert plan.count("Task Count:") == 1 and f"Task Count: {total[0]}" in plan, plan
    assert "Subplan" not in plan, plan
    task = plan.split(f"Task Count: {total[0]}", 1)[1]
    assert "->  Limit" in task, plan
    assert "Sort Key: id DESC" in task or "Index Scan Backward" in task, plan


def _log_remote_commands(conn: psycopg.Connection[Any]) -> list[str]:
    """Turn on ``citus.log_remote_commands`` for ``conn``'s session; the list that then
    collects each command the coordinator sends ("issuing ...")."""
    sent: list[str] = []
    conn.add_notice_handler(lambda d: sent.append(d.message_primary or ""))
    conn.execute("SET citus.log_remote_commands = on")
    conn.execute("SET client_min_messages = notice")
    return sent


def test_appends_and_langgraph_writes_are_one_command_to_the_shard(
    cluster_url: str, world: World
) -> None:
    """Migration 0040: a single append and an activity (in autocommit) reach the worker as one
    INSERT, with no transaction block around it; a batch of appends, a Claude Agent SDK
    transcript's batch and a LangGraph task's writes as one INSERT of all their rows, with no
    intermediate results (COPY) and no two-phase commit (PREPARE TRANSACTION); a LangGraph
    put's checkpoint and blobs as two; a task with two blockers (migration 0041) as two, the
    task and its edges."""
    with ik.Store(cluster_url, pool_size=1) as store:
        sid = store.create_session("one command")
        agent = store.create_agent(sid).uuid
        blockers = [store.tasks.upsert(LIST, f"one-command-{n}", subject="s").id for n in (1, 2)]
    writes = {
        "thread_id": "one-command-thread",
        "title": "t",
        "checkpoint_ns": "",
        "checkpoint_id": "c1",
        "task_id": "task",
        "task_path": "",
        "idxs": [0, 1],
        "channels": ["a", "b"],
        "types": ["json", "json"],
        "blobs": [b"1", b"2"],
        "upsert": False,
    }
    event = {"kind": "user", "content": "x", "data": None}
    batch = {"kinds": ["user", "user"], "contents": ["a", "b"], "datas": [None, None]}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("append_event", {"session_id": sid, **event}),
        ("append_agent_event", {"session_id": sid, "agent_uuid": agent, **event}),
        (
            "append_keyed",
            {"session_id": sid, "agent_uuid": None, **event, "target_message_id": None}
            | {"idempotency_key": "one-command"},
        ),
        (
            "activities_record",
            {"identity": IDENTITY, "type": "commit", "description": "d", "metadata": None},
        ),
        ("append_events", {"session_id": sid, **batch}),
        ("append_agent_events", {"session_id": sid, "agent_uuid": agent, **batch}),
        (
            "append_events_keyed",
            {"session_id": sid, "agent_uuid": agent, **batch, "idempotency_key": "one-batch"},
        ),
        ("langgraph_put", _put("one-command-thread", "c1", ["a", "b"], ["1", "1"], [None, None])),
        ("langgraph_put_writes", writes),
        (
            "claude_append_entries",
            {
                "session_id": sid,
                **batch,
                "datas": [json.dumps({"uuid": "one-1"}), json.dumps({"uuid": "one-2"})],
                "summary": None,
            },
        ),
        (
            "task_upsert",
            {
                "list_id": LIST,
                "external_id": "one-command-3",
                "subject": "blocked twice",
                "description": None,
                "active_form": None,
                "metadata": None,
                "status": None,
                "owner": None,
                "replace_deps": True,
                "blocker_ids": blockers,
            },
        ),
    ]
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sent = _log_remote_commands(conn)
        for name, params in calls:
            sent.clear()
            conn.execute(getattr(queries, name).sql, params).fetchall()
            commands = [line.removeprefix("issuing ") for line in sent]
            inserts = [c for c in commands if c.lstrip().upper().startswith("INSERT")]
            expected = 2 if name in ("langgraph_put", "task_upsert") else 1
            assert len(inserts) == expected, f"{name}: {commands}"
            assert not [c for c in commands if "COPY" in c or "PREPARE" in c], f"{name}: {commands}"
            if name in ("append_event", "append_agent_event", "activities_record"):
                assert len(commands) == 1, f"{name} is not one command: {commands}"


def test_a_forks_replay_reads_its_events_in_one_command(cluster_url: str, world: World) -> None:
    """Migration 0042: a fork's replay (two ranges: its parent's up to the fork, its own)
    sends two commands to the session's shard, the lineage walk's read of the clears and one
    read of every range's events, where it sent one read a range."""
    with psycopg.connect(cluster_url, autocommit=True) as conn:
        sent = _log_remote_commands(conn)
        rows = conn.execute(queries.replay_agent_events.sql, {"agent_uuid": world.child})
        contents = [row[4] for row in rows.fetchall()]
    assert "child says hello" in contents, contents
    reads = [c for c in sent if "messages_" in c]
    assert len(reads) == 2, reads
