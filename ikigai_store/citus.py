"""Citus: running ikigai_store on a distributed PostgreSQL (docs/concepts/citus.md).

Owns preparing a database on a Citus cluster and distributing its tables. Invariants:
- nothing here changes a plain PostgreSQL database: every step first asks whether the citus
  extension is there (``is_citus``) and does nothing when it is not;
- the placement of the tables is decided in the migrations, never here: the SQL function
  ``ikigai_distribute()`` (migration 0030; its body since 0033) calls one function per area,
  ``ikigai_distribute_NNNN_<area>()``, in migration order, each defined by the migration that
  distributes that area (0033 for 0030's and its own; 0036, 0038) and dropped by its rollback.
  Every Citus migration calls it when citus is installed, and ``distribute`` calls it for a
  database that was migrated before citus was (existing rows move to the shards);
- every application session connects to the coordinator: notifications (LISTEN/NOTIFY) and
  advisory locks are per node, and only the coordinator's are the store's;
- ``rebalance`` never starts a logical-replication move from a node that acknowledges commits
  before writing them (``synchronous_commit = off``): Citus 13.2 switches a moved shard once
  its copy has reached the source's WAL *write* position, and such a commit can lie past it.

Citus is a test tool here (AGPL-3.0): it is never a dependency of the package.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from .errors import DatabaseError, IkigaiStoreError, InvalidArgument, translate_errors
from .pool import connect, create_database
from .pool import drop_database as drop_one
from .sql import queries

__all__ = [
    "TRANSFER_MODES",
    "ClusterSummary",
    "Placement",
    "RebalanceError",
    "RebalanceProgress",
    "distribute",
    "drain",
    "is_citus",
    "placements",
    "prepare_database",
    "rebalance",
    "summary",
]

#: Citus' shard transfer modes: ``auto`` and ``force_logical`` move by logical replication
#: (writes go on during the copy), ``block_writes`` copies with the shard's writes blocked.
TRANSFER_MODES = ("auto", "force_logical", "block_writes")


@dataclass(frozen=True)
class Placement:
    """Where one table lives on the cluster: ``distributed`` (by ``column``), ``reference``
    (a copy on every node) or ``local`` (on the coordinator only)."""

    relation: str
    kind: str
    column: str | None
    colocation_id: int | None
    shard_count: int | None
    #: The nodes holding its shards (None for a local table).
    nodes: int | None = None
    #: Its size in bytes: of one copy for a reference table; on the coordinator for a local one.
    size_bytes: int | None = None


@dataclass(frozen=True)
class ClusterSummary:
    """The Citus cluster as one database sees it (``summary``)."""

    #: Whether the database is on the coordinator (a worker holds the coordinator's shards).
    coordinator: bool
    #: Active worker nodes registered in the database.
    workers: int
    #: How many of its application tables are distributed, reference or local.
    distributed: int
    reference: int
    local: int


def is_citus(url: str) -> bool:
    """True when the database at ``url`` has the citus extension (it is a Citus coordinator)."""
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        return bool(queries.citus_installed(conn)["installed"])


def prepare_database(server_url: str, name: str) -> bool:
    """Make the new database ``name`` a Citus database when ``server_url``'s server is a Citus
    coordinator with workers; returns whether it did.

    ``server_url``'s database must already have citus and its workers registered (Citus does not
    propagate ``CREATE DATABASE``): the database is created on the coordinator and on every
    worker unless it exists there (same user and credentials), citus is created in it on every
    node, and the coordinator and the workers are registered in it. Nothing is done when the
    server's database has no citus extension; ``InvalidArgument`` (nothing created) when it
    has citus but no workers.
    """
    if not is_citus(server_url):
        return False
    # One preparation at a time on this coordinator (its session lock, released when ``lock``
    # closes): concurrent node registrations for two databases collide on the workers.
    with (
        connect(server_url, autocommit=True, row_factory=dict_row) as lock,
        translate_errors(lock),
    ):
        queries.citus_prepare_lock(lock)
        return _prepare(server_url, name)


def _prepare(server_url: str, name: str) -> bool:
    """``prepare_database``'s work, under its lock."""
    params = conninfo_to_dict(server_url)
    with connect(server_url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        nodes = list(queries.citus_nodes(conn))
    coordinator = [n for n in nodes if n["groupid"] == 0]
    workers = [n for n in nodes if n["groupid"] != 0]
    if not coordinator or not workers:
        raise InvalidArgument(
            "the server's database has citus but no coordinator and workers registered "
            "(citus_set_coordinator_host, citus_add_node)"
        )
    create_database(server_url, name)
    for node in workers:
        worker = make_conninfo(
            "", **{**params, "host": node["nodename"], "port": str(node["nodeport"])}
        )
        create_database(worker, name)
        with (
            connect(
                make_conninfo(worker, dbname=name), autocommit=True, row_factory=dict_row
            ) as conn,
            translate_errors(conn),
        ):
            queries.citus_create_extension(conn)
    url = make_conninfo(server_url, dbname=name)
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        queries.citus_create_extension(conn)
        head = coordinator[0]
        queries.citus_set_coordinator(conn, host=head["nodename"], port=head["nodeport"])
        for node in workers:
            queries.citus_add_worker(conn, host=node["nodename"], port=node["nodeport"])
    return True


def drop_database(server_url: str, name: str) -> None:
    """Drop ``name`` on the workers of ``server_url``'s cluster (the coordinator's copy is the
    caller's to drop); nothing when the server is not a Citus coordinator."""
    if not is_citus(server_url):
        return
    params = conninfo_to_dict(server_url)
    with connect(server_url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        workers = [n for n in queries.citus_nodes(conn) if n["groupid"] != 0]
    for node in workers:
        worker = make_conninfo(
            "", **{**params, "host": node["nodename"], "port": str(node["nodeport"])}
        )
        drop_one(worker, name)


def distribute(url: str) -> list[tuple[str, str]]:
    """Distribute the tables of the migrated database at ``url`` (its rows move to the shards).

    Idempotent: a table already placed is left alone. Returns ``(table, what it became)`` for
    each table changed. Raises ``InvalidArgument`` (and changes nothing) when the database has
    no citus extension.
    """
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        _require_coordinator(conn, "nothing to distribute")
        with conn.transaction():
            return [(r["relation"], r["made"]) for r in queries.citus_distribute(conn)]


def _require_coordinator(conn: Any, then: str = "") -> None:
    """``InvalidArgument`` unless ``conn``'s database has citus (the message ends with
    ``then``) and is on the coordinator."""
    if not queries.citus_installed(conn)["installed"]:
        raise InvalidArgument(
            "this database has no citus extension" + (f": {then}" if then else "")
        )
    if not queries.citus_is_coordinator(conn)["coordinator"]:
        raise InvalidArgument(
            "this database is on a Citus worker (its tables are the coordinator's shards): "
            "connect to the coordinator"
        )


def placements(url: str) -> list[Placement]:
    """How each application table of the Citus database at ``url`` is placed."""
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        _require_coordinator(conn)
        return [
            Placement(
                r["relation"],
                r["kind"],
                r["column_name"],
                r["colocation_id"],
                r["shard_count"],
                r["nodes"],
                r["size_bytes"],
            )
            for r in queries.citus_tables(conn)
        ]


def summary(url: str) -> ClusterSummary | None:
    """The Citus cluster of the database at ``url`` (``ikigai-store status`` shows it); None
    when the database has no citus extension."""
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        if not queries.citus_installed(conn)["installed"]:
            return None
        r = queries.citus_summary(conn)
        return ClusterSummary(
            bool(r["coordinator"]),
            int(r["workers"]),
            int(r["distributed"]),
            int(r["reference"]),
            int(r["local"]),
        )


def rebalance(
    url: str,
    *,
    mode: str = "auto",
    wait: bool = True,
    timeout: float | None = None,
    stall_timeout: float = 60.0,
    progress: Callable[[RebalanceProgress], None] | None = None,
    poll_interval: float = 1.0,
) -> int | None:
    """Move shards of the Citus database at ``url`` onto its nodes evenly
    (``citus_rebalance_start``), refusing a move that could lose acknowledged writes.

    ``mode`` is Citus' ``shard_transfer_mode``: ``auto`` and ``force_logical`` move by logical
    replication, writes continuing during the copy; ``block_writes`` blocks a shard's writes
    while it is copied. A logical move is refused (``InvalidArgument``, nothing moved) when a
    node commits with ``synchronous_commit = off`` for this database and user, or cannot be
    asked: Citus switches a moved shard once its copy has reached the source's WAL write
    position, and a commit acknowledged before it was written can lie past that position and
    be left on the old placement (docs/concepts/citus.md, "Growing the cluster"). Set
    ``synchronous_commit`` to ``local`` (or ``on``) on the nodes, or use ``block_writes``.

    Returns the rebalance job's id, or ``None`` when no shard needs to move. With ``wait``
    (the default) it follows the job every ``poll_interval`` seconds until it has finished,
    calling ``progress`` with a ``RebalanceProgress`` whenever that changed, and raises
    ``RebalanceError`` (the job cancelled first, so nothing moves later behind the caller's
    back; the moves already done stay) when the job failed or was cancelled, when no move has
    run for ``stall_timeout`` seconds (Citus could not start its background workers, for
    example: each move runs in one, and every database with citus holds workers of its own
    out of the coordinator's ``max_worker_processes``), or when it has not finished within
    ``timeout`` seconds (``None``: no limit). Raises ``InvalidArgument`` (nothing moved) for
    an unknown mode, a non-positive timeout, a database without citus, or a coordinator with
    fewer than two background worker slots free (the job would never start).
    """
    return _move(url, None, mode, False, wait, timeout, stall_timeout, progress, poll_interval)


def drain(
    url: str,
    host: str,
    port: int,
    *,
    mode: str = "auto",
    remove: bool = False,
    wait: bool = True,
    timeout: float | None = None,
    stall_timeout: float = 60.0,
    progress: Callable[[RebalanceProgress], None] | None = None,
    poll_interval: float = 1.0,
) -> int | None:
    """Move every shard of the Citus database at ``url`` off the worker ``host:port``, to
    take it out of the cluster: the node is marked ``shouldhaveshards = false`` in this
    database (so no later rebalance puts shards back on it), then Citus' rebalancer moves its
    shards in drain-only mode, followed as ``rebalance`` follows a job; with ``remove`` the
    node is removed from this database's nodes once it holds nothing (``citus_remove_node``).

    Nodes are registered per database: drain it in every Citus database on the cluster. The
    same refusal as ``rebalance`` for a logical move from a node committing with
    ``synchronous_commit = off`` (checked before anything changes). Returns the job's id, or
    ``None`` when the node held no shard. ``InvalidArgument`` for a node this database does not
    know, or the coordinator; ``RebalanceError`` as ``rebalance`` (the node stays marked).
    """
    return _move(
        url, (host, port), mode, remove, wait, timeout, stall_timeout, progress, poll_interval
    )


def _move(
    url: str,
    node: tuple[str, int] | None,
    mode: str,
    remove: bool,
    wait: bool,
    timeout: float | None,
    stall_timeout: float,
    progress: Callable[[RebalanceProgress], None] | None,
    poll_interval: float,
) -> int | None:
    """``rebalance`` (``node`` None) or ``drain`` (of ``node``)."""
    what = "rebalance" if node is None else "drain"
    if mode not in TRANSFER_MODES:
        raise InvalidArgument(f"mode must be one of {', '.join(TRANSFER_MODES)}, not {mode!r}")
    for name, value in (("stall_timeout", stall_timeout), ("poll_interval", poll_interval)):
        if not value > 0:
            raise InvalidArgument(f"{name} must be a positive number of seconds, got {value!r}")
    if timeout is not None and not timeout > 0:
        raise InvalidArgument(f"timeout must be a positive number of seconds, got {timeout!r}")
    if remove and not wait:
        raise InvalidArgument("remove needs wait: the node is removed once it holds nothing")
    with connect(url, autocommit=True, row_factory=dict_row) as conn, translate_errors(conn):
        _require_coordinator(conn, f"nothing to {what}")
        if node is not None:
            known = [
                n for n in queries.citus_nodes(conn) if (n["nodename"], int(n["nodeport"])) == node
            ]
            if not known:
                raise InvalidArgument(
                    f"node {node[0]}:{node[1]} is not one of this database's nodes "
                    "(citus_add_node registers a node per database)"
                )
            if known[0]["groupid"] == 0:
                raise InvalidArgument(f"node {node[0]}:{node[1]} is the coordinator")
        if mode != "block_writes":
            unsafe = [
                f"{r['nodename']}:{r['nodeport']}"
                + ("" if r["success"] else f" (not asked: {r['result']})")
                for r in queries.citus_async_commit_nodes(conn)
            ]
            if unsafe:
                raise InvalidArgument(
                    f"a {what} in mode {mode!r} moves shards by logical replication, which "
                    "can lose acknowledged writes from a node committing with "
                    "synchronous_commit = off: "
                    f"{', '.join(unsafe)}; set synchronous_commit to local or on there (for "
                    "example ALTER DATABASE ... SET synchronous_commit = local on the "
                    "coordinator), or move with mode 'block_writes' (the CLI's "
                    "--mode block_writes)"
                )
        _check_worker_slots(queries.citus_worker_slots(conn), what)
        if node is not None:
            queries.citus_node_keeps_no_shards(conn, host=node[0], port=node[1])
        job = queries.citus_rebalance_start(conn, mode=mode, drain_only=node is not None)["job_id"]
        if job is not None and wait:
            _follow(conn, int(job), timeout, stall_timeout, progress, poll_interval)
        if remove and node is not None:
            _remove(conn, node, int(known[0]["groupid"]))
        return None if job is None else int(job)


#: Background workers a rebalance job needs free on the coordinator: Citus' task queue
#: monitor and one executor for its moves.
JOB_WORKERS = 2


def _check_worker_slots(row: Any, what: str) -> None:
    """``InvalidArgument`` when the coordinator's background worker slots held for good
    (``row``: the ``citus_worker_slots`` query's) leave fewer than ``JOB_WORKERS``: the job
    would be scheduled and never run. Slots held by workers that end by themselves (another
    job's, a parallel query's) are left to the stall timeout."""
    slots, held, daemons = int(row["slots"]), int(row["held"]), int(row["daemons"])
    if slots - held >= JOB_WORKERS:
        return
    raise InvalidArgument(
        f"the coordinator has {max(slots - held, 0)} of its {slots} background worker slots "
        f"(max_worker_processes) free, and a {what} needs {JOB_WORKERS} (Citus' task queue "
        f"monitor and a move executor): it would never start. {held} are held, {daemons} of "
        "them by Citus' maintenance daemons, one per database that has used citus since the "
        "server started. Raise max_worker_processes on the coordinator (it takes a restart), "
        "or drop the Citus databases no longer used; nothing was moved"
    )


def _remove(conn: Any, node: tuple[str, int], group: int, attempts: int = 30) -> None:
    """Remove the drained ``node`` (of ``group``) once Citus has dropped the copies its moves
    left there (deferred cleanup): removed before, the node would leave cleanup records that
    nothing can finish, and the shards they name could never move again."""
    for attempt in range(attempts):
        queries.citus_cleanup_orphans(conn)
        left = int(queries.citus_pending_cleanup(conn, group_id=group)["n"])
        if left == 0:
            queries.citus_remove_worker(conn, host=node[0], port=node[1])
            return
        if attempt < attempts - 1:
            time.sleep(1.0)
    raise DatabaseError(
        f"node {node[0]}:{node[1]} holds no shard, but Citus has not yet dropped {left} copies "
        "its moves left there (pg_dist_cleanup; something holds a lock on them): it is "
        "drained, not removed; run the drain with --remove again later"
    )


@dataclass(frozen=True)
class RebalanceProgress:
    """Where a rebalance job stands: its ``state`` (Citus' job states: ``scheduled``,
    ``running``, ``finished``, ``cancelling``, ``cancelled``, ``failing``, ``failed``), its
    shard moves (``tasks``), how many are ``done`` and ``running``, and what moves that failed
    or wait to be retried said (``messages``)."""

    job_id: int
    state: str
    tasks: int
    done: int
    running: int
    messages: tuple[str, ...]


class RebalanceError(IkigaiStoreError):
    """A rebalance job failed, was cancelled, stalled or ran out of time (``rebalance``);
    ``progress`` is where it stood. The moves done before stay done; the job was cancelled,
    so no other move starts."""

    def __init__(self, message: str, *, progress: RebalanceProgress) -> None:
        super().__init__(message)
        self.progress = progress


def _progress(conn: Any, job: int) -> RebalanceProgress:
    row = queries.citus_job_progress(conn, job_id=job)
    if row is None:  # removed by hand (DELETE FROM pg_dist_background_job)
        return RebalanceProgress(job, "cancelled", 0, 0, 0, ("the job is gone",))
    return RebalanceProgress(
        job,
        row["state"],
        int(row["tasks"]),
        int(row["done"]),
        int(row["running"]),
        tuple(sorted(row["messages"])),
    )


def _follow(
    conn: Any,
    job: int,
    timeout: float | None,
    stall_timeout: float,
    progress: Callable[[RebalanceProgress], None] | None,
    poll_interval: float,
) -> None:
    """Follow rebalance job ``job`` to its end (``rebalance``'s ``wait``)."""
    start = moved_at = time.monotonic()
    last: RebalanceProgress | None = None
    while True:
        now = time.monotonic()
        seen = _progress(conn, job)
        if seen.running or last is None or seen.done != last.done:
            moved_at = now  # a move finished, or one in progress (however long it takes)
        if seen != last and progress is not None:
            progress(seen)
        last = seen
        if seen.state == "finished":
            return
        said = f"; its moves said: {' | '.join(seen.messages)}" if seen.messages else ""
        where = f"{seen.done} of its {seen.tasks} tasks done"
        if seen.state in ("failed", "cancelled"):
            raise RebalanceError(f"rebalance job {job} {seen.state} ({where}){said}", progress=seen)
        why = None
        stalled = now - moved_at > stall_timeout
        if stalled and seen.messages:
            why = f"no shard move has succeeded for {stall_timeout:g} s ({where}): they fail"
        elif stalled:
            why = (
                f"no shard move has run for {stall_timeout:g} s ({where}): Citus runs each "
                "move in a background worker, and when the coordinator's log says \"unable to "
                'start background worker" its max_worker_processes is used up (every '
                "database with citus holds workers of its own: drop unused ones, or raise it "
                "and restart)"
            )
        elif timeout is not None and now - start > timeout:
            why = f"not finished within {timeout:g} s ({where})"
        if why is not None:
            if seen.state not in ("cancelling", "failing"):
                queries.citus_job_cancel(conn, job_id=job)
            raise RebalanceError(
                f"rebalance job {job}: {why}; the job was cancelled, the moves done stay "
                f"done{said}",
                progress=_progress(conn, job),
            )
        time.sleep(poll_interval)
