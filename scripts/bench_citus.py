"""Benchmark report: ikigai_store on a Citus cluster vs plain PostgreSQL, measured in one run.

Usage: ``python scripts/bench_citus.py [--server URL] [-n N] [--history H]
[--core-only | --search-only]``

``--server`` is a Citus coordinator whose ``postgres`` database has its workers registered
(default: the test cluster of ``../shared/citus/cluster.sh``, 127.0.0.1:57636). Plain
PostgreSQL is a database without the citus extension on the same server: the same binaries
(PostgreSQL 15), settings and machine, with no Citus planning in the way. Scratch databases are
created and dropped. Nothing is asserted; each line prints the cluster's p50, plain's p50 and
their ratio (the coordinator's overhead).

1. append: ``store.append`` of one event, N times, to a session of a 1,000-event history, and
   ``store.append_many`` of 10 events (an OpenAI Agents SDK session's ``add_items``);
2. replay: ``store.replay_session`` of a session with 1,000 live events, among H events of
   other sessions (H default 1,000,000, the issue's history, written server-side in one
   ``INSERT ... SELECT`` per database: about a minute each on 2 cores);
3. mail send: ``store.mail.send`` to one recipient, N times;
4. queue claim: ``store.topics.claim`` of one job (then ``complete``), N times;
5. activity: ``store.activities.record`` of one activity, N times (on the cluster a routed
   insert on the identity's shard);
6. a LangGraph step: ``IkigaiSaver.put_writes`` of a task's write (a new message), ``put`` of
   a checkpoint whose ``messages`` channel gained it (10 at the start), then ``get_tuple`` of
   the thread's newest, N times;
7. a task upsert with two blockers: ``store.tasks.upsert`` of a new task ``blocked_by`` two
   (a task and its two edges on the list's shard), N times;
8. a Claude Agent SDK transcript's batch: what ``IkigaiSessionStore.append`` runs for three
   entries with uuids (dedup against the transcript, the events, the transcript's stamp),
   N times;
9. an agent's replay: ``store.replay_agent`` of an agent three forks deep (four ranges: 100
   events of the root, 50 of each fork), N times;
10. router vs fan-out on the cluster: a session's replay with 100 sessions vs 10,000 sessions
   in the database (flat is the goal), and a cross-session ``store.search`` over the same
   corpus (20,000 events) on plain PostgreSQL and on the cluster with 4, 16 and 32 shards.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base.id import uuid6

import ikigai_store as ik
from ikigai_store import citus, migrate, transcripts
from ikigai_store.config import admin_url
from ikigai_store.integrations.langgraph import IkigaiSaver
from ikigai_store.pool import connect, create_database
from ikigai_store.testing import drop_test_database, fresh_database, test_database_name


def p50(fn: Callable[[], Any], n: int) -> float:
    """Median wall time of ``fn`` in ms over ``n`` runs (after 3 warm-up runs)."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


@contextmanager
def database(server: str, name: str, *, on_citus: bool, shards: int | None = None) -> Iterator[str]:
    """A migrated scratch database: a Citus one (distributed) or a plain one, dropped after."""
    if on_citus:
        url = fresh_database(server, name)
        if shards is not None:
            with connect(url, autocommit=True) as conn:
                conn.execute(f"ALTER DATABASE {name} SET citus.shard_count = {int(shards)}")
    else:
        drop_test_database(server, name)
        create_database(server, name)
        url = admin_url(server, name)
    migrate.apply(url)
    try:
        yield url
    finally:
        drop_test_database(server, name)


def load_history(url: str, sessions: int, per_session: int) -> list[int]:
    """``sessions`` sessions of ``per_session`` events each, written in bulk; their ids."""
    with connect(url, autocommit=True) as conn:
        ids = [
            r[0]
            for r in conn.execute(
                "INSERT INTO sessions (title) SELECT 'h' || g FROM generate_series(1, %s) AS g "
                "RETURNING id",
                (sessions,),
            ).fetchall()
        ]
        conn.execute(
            "INSERT INTO messages (session_id, kind, content) "
            "SELECT s, 'user', 'history event ' || g || ' about word' || (g %% 50) "
            "FROM unnest(CAST(%s AS bigint[])) AS s, generate_series(1, %s) AS g",
            (ids, per_session),
        )
    return ids


class LangGraphThread:
    """A LangGraph thread driven as a graph's loop drives its saver: each call stores a task's
    write (the new message) for the current checkpoint, puts a checkpoint whose messages
    gained that message (the version bumped), then reads it back."""

    def __init__(self, store: ik.Store) -> None:
        self.saver = IkigaiSaver(store)
        self.config: Any = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        self.messages = [HumanMessage(f"message {i}", id=f"m{i}") for i in range(10)]
        self.version: Any = None
        self._put()

    def _put(self) -> None:
        self.version = self.saver.get_next_version(self.version, None)
        checkpoint: Any = {
            "v": 4,
            "id": str(uuid6(clock_seq=-1)),
            "ts": "2026-01-01T00:00:00+00:00",
            "channel_values": {"messages": self.messages},
            "channel_versions": {"messages": self.version},
            "versions_seen": {"agent": {"messages": self.version}},
            "updated_channels": ["messages"],
        }
        self.config = self.saver.put(
            self.config, checkpoint, {"step": len(self.messages)}, {"messages": self.version}
        )

    def __call__(self) -> None:
        message = HumanMessage(f"message {len(self.messages)}")
        self.saver.put_writes(self.config, [("messages", [message])], str(uuid.uuid4()))
        self.messages = [*self.messages, message]
        self._put()
        newest = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        assert self.saver.get_tuple(newest) is not None


def upsert_blocked(store: ik.Store, names: Iterator[str]) -> None:
    """Measure 7: a new task of "list" blocked by "a" and "b"."""
    store.tasks.upsert("list", next(names), subject="t", blocked_by=["a", "b"])


def append_entries(store: ik.Store, batches: Iterator[list[dict[str, Any]]]) -> None:
    """Measure 8: IkigaiSessionStore.append's operation, run synchronously."""
    store._run(transcripts.append_entries("bench", "p", "t", None, next(batches)))


def core(server: str, n: int, history: int) -> None:
    """Measures 1-9 on both, the cluster's first."""
    results: dict[str, dict[str, float]] = {}
    for label, on_citus in (("cluster", True), ("plain", False)):
        with (
            database(server, f"bench_citus_{label}", on_citus=on_citus) as url,
            ik.Store(url, pool_size=2) as store,
        ):
            load_history(url, max(1, history // 1000), 1000)
            sid = store.create_session("live")
            store.append_many(sid, [("user", f"live {k}", None) for k in range(1000)])
            other = store.create_session("appends")
            store.append_many(other, [("user", f"old {k}", None) for k in range(1000)])
            batch = [("user", f"batch {k}", {"k": k}) for k in range(10)]
            store.identities.register("alice")
            store.identities.register("bob")
            store.topics.create("jobs", "queue")
            store.topics.subscribe("bob", "jobs")
            for k in range(n + 3):
                store.mail.publish("alice", "jobs", f"j{k}", "x")

            lineage = store.create_session("lineage")
            leaf = store.create_agent(lineage).uuid
            for depth in range(4):
                if depth:
                    leaf = store.fork_agent(leaf).uuid
                for k in range(50 if depth else 100):
                    store.append(lineage, "user", f"depth {depth}: {k}", agent_uuid=leaf)
            store.tasks.create_list("list", "alice")
            for blocker in ("a", "b"):
                store.tasks.upsert("list", blocker, subject=blocker)
            tasks = (f"t{k}" for k in range(10**9))
            entries = (
                [
                    {"type": "user", "uuid": str(uuid.uuid4()), "message": {"content": "hi"}}
                    for _ in range(3)
                ]
                for _ in range(10**9)
            )

            def claim() -> None:
                held = store.topics.claim("bob", "jobs", ttl=60)
                assert held is not None
                store.topics.complete(held)

            results[label] = {
                "append": p50(partial(store.append, other, "user", "one more"), n),
                "append_many, 10 events": p50(partial(store.append_many, other, batch), n),
                "replay (1k live events)": p50(partial(store.replay_session, sid), max(5, n // 10)),
                "mail send": p50(partial(store.mail.send, "alice", ["bob"], "s", "b"), n),
                "queue claim + complete": p50(claim, n),
                "activity record": p50(
                    partial(store.activities.record, "alice", "decision", "chose x"), n
                ),
                "LangGraph step": p50(LangGraphThread(store), n),
                "agent replay, 3 forks deep": p50(partial(store.replay_agent, leaf), n),
                "task upsert, 2 blockers": p50(partial(upsert_blocked, store, tasks), n),
                "SDK transcript, 3 entries": p50(partial(append_entries, store, entries), n),
            }
    print(f"{'measure':<28}{'cluster ms':>12}{'plain ms':>12}{'ratio':>8}")
    for measure, cluster_ms in results["cluster"].items():
        plain_ms = results["plain"][measure]
        print(f"{measure:<28}{cluster_ms:>12.3f}{plain_ms:>12.3f}{cluster_ms / plain_ms:>8.2f}")


def router_vs_fan_out(server: str, n: int) -> None:
    """Measure 10: replay at 100 vs 10,000 sessions; search as the shard count grows."""
    print()
    print(f"{'cluster: a session replay':<40}{'p50 ms':>10}")
    for sessions in (100, 10_000):
        with (
            database(server, "bench_citus_router", on_citus=True) as url,
            ik.Store(url, pool_size=2) as store,
        ):
            ids = load_history(url, sessions, 20)
            sid = ids[len(ids) // 2]
            ms = p50(partial(store.replay_session, sid), n)
            print(f"{f'{sessions:,} sessions of 20 events':<40}{ms:>10.3f}")
    search_vs_shards(server, n)


def search_vs_shards(server: str, n: int) -> None:
    """A cross-session search over 20,000 events: plain PostgreSQL, then 4, 16, 32 shards."""
    # test_database_name adds IKIGAI_TEST_DB_TAG: two checkouts' runs on one server keep
    # out of each other's database.
    fan_db = test_database_name("bench_citus_fan")
    print()
    print(f"{'search across 20,000 events':<40}{'p50 ms':>10}")
    for shards in (None, 4, 16, 32):
        with (
            database(server, fan_db, on_citus=shards is not None, shards=shards) as url,
            ik.Store(url, pool_size=2) as store,
        ):
            load_history(url, 200, 100)
            with connect(url, autocommit=True) as conn:
                # Statistics before timing (on Citus, of every shard): without them each
                # shard's planner guesses, and the runs swing with autovacuum's timing.
                conn.execute("VACUUM ANALYZE messages")
            ms = p50(partial(store.search, "word7", limit=10), max(5, n // 5))
            label = "plain PostgreSQL" if shards is None else f"cluster, {shards} shards"
            print(f"{label:<40}{ms:>10.3f}")


def main() -> None:
    """Parse the arguments, check the server is a Citus coordinator, print the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server", default="postgresql://postgres@127.0.0.1:57636/postgres")
    ap.add_argument("-n", type=int, default=200, help="runs per measure (default 200)")
    ap.add_argument(
        "--history", type=int, default=1_000_000, help="events of other sessions (1,000,000)"
    )
    ap.add_argument(
        "--search-only", action="store_true", help="only the search rows (search vs shard count)"
    )
    ap.add_argument("--core-only", action="store_true", help="only measures 1-6 (cluster vs plain)")
    args = ap.parse_args()
    if not citus.is_citus(args.server):
        raise SystemExit(f"{args.server} is not a Citus coordinator (no citus extension)")
    if args.search_only:
        search_vs_shards(args.server, args.n)
        return
    core(args.server, args.n, args.history)
    if args.core_only:
        return
    router_vs_fan_out(args.server, args.n)


if __name__ == "__main__":
    main()
