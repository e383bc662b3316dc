"""On Citus, every named query serving one session or agent is routed to one shard.

Only ``messages`` is distributed (docs/concepts/citus.md), so only a query that reads or writes
it, or calls a function that does, can ask more than one shard. Each such query is classified
here: ``ROUTED`` (with the parameters to run it with) or ``FAN_OUT`` (with the reason it asks
every shard, as the design page documents). A query added to ``queries/`` that touches messages
without a classification fails ``test_every_query_on_messages_is_classified`` (no database
needed), so a new query cannot silently fan out.

On the cluster, ``test_routed_queries_ask_one_shard`` runs each routed query (in a transaction
rolled back afterwards) with ``citus.log_remote_commands`` on, and counts the distinct shards of
messages named in the commands the coordinator sends: at most one. Running the query, not only
``EXPLAIN``-ing it, also covers the functions (ikigai_append, agent_replay_events) whose
statements an ``EXPLAIN`` of the call does not show. Off Citus it is skipped, saying so
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

#: A statement that touches messages, or calls a function that reads it (migration 0030).
TOUCHES = re.compile(
    r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE)\s+messages\b"
    r"|\b(?:agent_replay_ranges|agent_replay_events|ikigai_append)\s*\(",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class World:
    """One session with a root agent, a fork of it, and a few events of each."""

    session_id: int
    agent: str
    child: str
    message_id: int
    ended_session_id: int


P = Callable[[World], dict[str, Any]]

SEARCH = {"query": "hello", "phrase": None, "kinds": None, "since": None, "until": None}

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
    assert (set(ROUTED) | set(FAN_OUT)) - touching == set(), "these no longer touch messages"


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
        yield World(sid, agent.uuid, child.uuid, mark.id, ended)


def _shards(conn: psycopg.Connection[Any], name: str, params: dict[str, Any]) -> set[str]:
    """The shards of messages the coordinator sent commands to while running ``name``."""
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
    return {m for line in sent for m in re.findall(r"\bmessages_\d{4,}\b", line)}


@pytest.mark.parametrize("name", sorted(ROUTED))
def test_routed_queries_ask_one_shard(cluster_url: str, world: World, name: str) -> None:
    """The query asks at most one shard of messages on the cluster."""
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
