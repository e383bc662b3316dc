"""Probe: does a logical-replication Citus shard move lose acknowledged plain INSERTs?

Usage: ``python scripts/citus_logical_move_probe.py [--server URL] [--rounds R] [--writers W]
[--synchronous-commit inherit|off|local|on] [--mode force_logical|block_writes]``

No ikigai_store schema is involved: a scratch database on the Citus cluster (default: the test
cluster of ``../shared/citus/cluster.sh``, coordinator 127.0.0.1:57636) gets one table,
``probe (k bigint, id bigint)``, distributed by ``k`` over 4 shards. W threads INSERT rows with
ids of their own (autocommit, one row per statement, from the coordinator) and remember every
acknowledged id, while the main thread moves every shard to the other worker R times with
``citus_move_shard_placement(..., shard_transfer_mode => MODE)``. Afterwards it prints the ids
acknowledged but not stored, and stored twice.

For each lost id it says where the row went: every shard placement on the workers has an
``AFTER INSERT`` trigger (added before each move) writing ``(id, shard, clock_timestamp(),
pg_current_wal_insert_lsn(), txid)`` into a local table ``probe_audit`` on that worker, which
a shard move neither copies nor drops. The moves' start and end times are printed next to it,
and, for each move, the last state of its replication slot seen on the source (polled every
20 ms): the position the walsender had sent, the source's WAL write position
(``pg_current_wal_lsn()``) and insert position (``pg_current_wal_insert_lsn()``).

``--synchronous-commit`` sets ``synchronous_commit`` for the scratch database on every worker
(``ALTER DATABASE ... SET``, this database only; ``inherit`` keeps the server's setting). The
test cluster runs with ``synchronous_commit = off``. Citus (13.2, multi_logical_replication.c,
``WaitForAllSubscriptionsToCatchUp``) switches the placement once the target's subscription has
reached the source's ``pg_current_wal_lsn()``, which is the WAL *write* position; an
asynchronous commit is acknowledged before its commit record is written, so it can lie past
that position, and is then left behind on the old placement when Citus' first check already
finds the target caught up (it drops the subscription at once; had the check failed, its 1 s
wait lets the WAL writer write the rest). With ``local`` or ``on`` a commit is flushed (hence
written) before it is acknowledged. The scratch database is dropped at the end (``--keep``
keeps it). A run takes about a minute; ``--pause`` keeps the load light, as a quiet source is
what lets the first check pass.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ikigai_store import citus
from ikigai_store.config import admin_url
from ikigai_store.pool import create_database, drop_database

NAME = "ik_probe_logical_move"

AUDIT = """
SET citus.enable_ddl_propagation = off;
CREATE TABLE IF NOT EXISTS probe_audit (
    id bigint, shard text, at timestamptz, lsn pg_lsn, xid bigint);
CREATE OR REPLACE FUNCTION probe_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO probe_audit VALUES (NEW.id, TG_TABLE_NAME, clock_timestamp(),
                                    pg_current_wal_insert_lsn(), txid_current());
    RETURN NULL;
END $$;
"""


def workers(server: str) -> list[str]:
    """The conninfo of each worker of the coordinator at ``server`` (same user), database NAME."""
    params = conninfo_to_dict(server)
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT nodename, nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY nodeport"
        ).fetchall()
    return [
        make_conninfo("", **{**params, "host": h, "port": str(p), "dbname": NAME}) for h, p in rows
    ]


def main() -> None:
    """Run the probe and print what was lost, where it went and when."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:57636/postgres")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument(
        "--pause",
        type=float,
        default=0.01,
        help="seconds each writer sleeps between INSERTs (a source busy with other writes "
        "makes Citus' first catch-up check fail, and the 1 s it then waits hides the loss)",
    )
    parser.add_argument(
        "--synchronous-commit", default="inherit", choices=["inherit", "off", "local", "on"]
    )
    parser.add_argument(
        "--mode", default="force_logical", choices=["force_logical", "block_writes"]
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    args = parser.parse_args()

    server = args.server
    drop_database(server, NAME)
    citus.drop_database(server, NAME)
    create_database(server, NAME)
    citus.prepare_database(server, NAME)
    url = admin_url(server, NAME)
    nodes = workers(server)
    try:
        for node in nodes:
            with psycopg.connect(node, autocommit=True) as conn:
                conn.execute("SET citus.enable_ddl_propagation = off")
                if args.synchronous_commit != "inherit":
                    conn.execute(
                        f"ALTER DATABASE {NAME} SET synchronous_commit = {args.synchronous_commit}"
                    )
                conn.execute(AUDIT)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE probe (k bigint NOT NULL, id bigint NOT NULL)")
            conn.execute("SELECT create_distributed_table('probe', 'k', shard_count => 4)")
            conn.execute("ALTER TABLE probe ADD PRIMARY KEY (k, id)")
        run(url, nodes, args)
    finally:
        if not args.keep:
            drop_database(server, NAME)
            citus.drop_database(server, NAME)


def run(url: str, nodes: list[str], args: argparse.Namespace) -> None:
    """The load, the moves and the report."""
    stop = threading.Event()
    acked: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        rng = random.Random(w)
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                n = 0
                while not stop.is_set():
                    row_id = w * 1_000_000_000 + n
                    conn.execute(
                        "INSERT INTO probe (k, id) VALUES (%s, %s)", (rng.randrange(1000), row_id)
                    )
                    with lock:
                        acked.append(row_id)
                    n += 1
                    time.sleep(args.pause)
        except BaseException as exc:
            errors.append(exc)
            stop.set()

    # The last state of each move's replication slot seen on its source before it was dropped.
    slots: dict[str, tuple[Any, ...]] = {}

    def watch(node: str) -> None:
        with psycopg.connect(node, autocommit=True) as conn:
            while not stop.is_set():
                for row in conn.execute(
                    "SELECT s.slot_name, clock_timestamp(), r.sent_lsn, "
                    "pg_current_wal_lsn(), pg_current_wal_insert_lsn() "
                    "FROM pg_replication_slots AS s JOIN pg_stat_replication AS r "
                    "ON r.pid = s.active_pid WHERE s.database = current_database()"
                ).fetchall():
                    slots[f"{conninfo_to_dict(node)['port']} {row[0]}"] = row[1:]
                time.sleep(0.02)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.writers)]
    threads += [threading.Thread(target=watch, args=(node,)) for node in nodes]
    for t in threads:
        t.start()
    moves: list[tuple[int, str, str, float, float]] = []
    try:
        time.sleep(1.0)
        with psycopg.connect(url, autocommit=True) as conn:
            for _ in range(args.rounds):
                for shard, host, port in conn.execute(
                    "SELECT shardid, nodename, nodeport FROM pg_dist_shard_placement "
                    "JOIN pg_dist_shard USING (shardid) WHERE logicalrelid = 'probe'::regclass "
                    "ORDER BY shardid"
                ).fetchall():
                    if stop.is_set():
                        break
                    conn.execute(
                        "SELECT run_command_on_placements('probe', "
                        "'CREATE OR REPLACE TRIGGER audit AFTER INSERT ON %s "
                        "FOR EACH ROW EXECUTE FUNCTION probe_audit()')"
                    )
                    target = next(
                        conninfo_to_dict(n)
                        for n in nodes
                        if int(conninfo_to_dict(n)["port"]) != port
                    )
                    started = time.time()
                    conn.execute(
                        "SELECT citus_move_shard_placement(%s, %s, %s, %s, %s, "
                        "shard_transfer_mode => CAST(%s AS citus.shard_transfer_mode))",
                        (shard, host, port, target["host"], int(target["port"]), args.mode),
                    )
                    moves.append((shard, f"{port}", target["port"], started, time.time()))
        time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    if errors:
        raise errors[0]
    with psycopg.connect(url, autocommit=True) as conn:
        stored = [r[0] for r in conn.execute("SELECT id FROM probe").fetchall()]
    lost = sorted(set(acked) - set(stored))
    twice = len(stored) - len(set(stored))
    print(
        f"mode={args.mode} synchronous_commit={args.synchronous_commit} moves={len(moves)} "
        f"acknowledged={len(acked)} stored={len(stored)} lost={len(lost)} duplicated={twice} "
        f"unacknowledged_stored={len(set(stored) - set(acked))}"
    )
    for shard, src, dst, started, ended in moves:
        print(f"  move shard {shard} {src} -> {dst}: {fmt(started)} .. {fmt(ended)}")
    for slot, (seen, sent, write, insert) in sorted(slots.items(), key=lambda kv: kv[1][0]):
        print(
            f"  slot on :{slot}, last seen {seen:%H:%M:%S.%f}: sent {sent}, "
            f"source write position {write}, insert position {insert}"
        )
    for row_id in lost:
        for node in nodes:
            with psycopg.connect(node, autocommit=True) as conn:
                for audit in conn.execute(
                    "SELECT shard, at, lsn, xid FROM probe_audit WHERE id = %s", (row_id,)
                ).fetchall():
                    report(row_id, conninfo_to_dict(node)["port"], audit)


def fmt(at: float) -> str:
    """A wall-clock time with milliseconds."""
    return time.strftime("%H:%M:%S", time.gmtime(at)) + f".{int(at % 1 * 1000):03d}"


def report(row_id: int, port: Any, audit: tuple[Any, ...]) -> None:
    """One lost id: the node and shard it was written to, when, at which WAL position."""
    shard, at, lsn, xid = audit
    print(
        f"  lost id {row_id}: written on :{port} in {shard} at {at:%H:%M:%S.%f} lsn {lsn} xid {xid}"
    )


if __name__ == "__main__":
    main()
