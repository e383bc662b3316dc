"""CLI commands about the database itself: ``migrate``, ``status``, ``embedded``, ``citus``."""

from __future__ import annotations

from collections.abc import Callable

import click

from .. import citus as citus_ops
from .._resources import migrations_dir
from ..embedded import embedded_info, run_client
from ..migrate import packaged_version
from .app import cli
from .common import open_store


@cli.command()
def migrate() -> None:
    """Apply pending schema migrations and print each one applied."""
    with open_store(migrate=False) as store:
        pending = store.pending_migrations()
        if not pending:
            click.echo("up to date")
            return
        click.echo(f"{len(pending)} migration(s) pending on {store.url}")
        applied = store.migrate(
            progress=lambda migration_id: click.echo(f"  applying {migration_id}")
        )
        if applied:
            click.echo(f"applied {len(applied)}: schema version {store.schema_version()}")
        else:  # another migrator applied them while this one waited for the lock
            click.echo(f"applied by another migrator: schema version {store.schema_version()}")


@cli.command("migrations-path", short_help="Print the installed migrations directory.")
def migrations_path() -> None:
    """Print the directory of the packaged yoyo migrations (no database is opened).

    For plain yoyo, from any directory (with DATABASE_URL=postgresql+psycopg://...):

    \b
      yoyo apply --batch -d "$DATABASE_URL" "$(ikigai-store migrations-path)"
    """
    click.echo(migrations_dir())


@cli.command(short_help="Show database, schema version and active session.")
def status() -> None:
    """Show the database, schema version, pending migrations and the active session."""
    with open_store(migrate=False) as store:
        where = store.url
        if store.embedded_data_dir is not None:
            where += f"\n{'':17}(embedded PostgreSQL, data dir {store.embedded_data_dir})"
        click.echo(f"{'database:':<17}{where}")
        version = store.schema_version()
        newest = packaged_version()
        ahead = (
            f" (newer than this ikigai-store's {newest}: upgrade it)" if version > newest else ""
        )
        click.echo(f"{'schema version:':<17}{version}{ahead}")
        pending = store.pending_migrations()
        click.echo(f"{'pending:':<17}{', '.join(pending) if pending else 'none'}")
        cluster = citus_ops.summary(store.url)
        if cluster is not None:
            click.echo(f"{'citus:':<17}{_cluster_line(cluster)}")
        if version == 0:
            click.echo(f"{'active session:':<17}- (no schema: run `ikigai-store migrate`)")
            return
        active = store.get_active_session()
        if active is None:
            click.echo(f"{'active session:':<17}none")
        else:
            title = store.get_session(active).title
            click.echo(f"{'active session:':<17}{active}" + (f"  {title}" if title else ""))


@cli.command(
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
    short_help="Show the embedded server's paths, or run psql/pg_dump on it.",
)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def embedded(command: tuple[str, ...]) -> None:
    """Show where the embedded PostgreSQL keeps its data and socket, or run COMMAND on it.

    COMMAND (psql, pg_dump, pg_restore, ...) runs with the server started, PGHOST, PGUSER and
    PGDATABASE set to the store's database and the bundled PostgreSQL binaries first on PATH; the
    server stops afterwards unless something else uses it. Ignores --database. Example:
    ikigai-store embedded psql
    """
    if command:
        code = run_client(command)
        raise SystemExit(code if code >= 0 else 128 - code)  # killed by a signal: 128 + signum
    info = embedded_info()
    running = f"running (pid {info.pid})" if info.pid else "not running (starts on first use)"
    made_by = f"PostgreSQL {info.data_version}" if info.data_version else "none yet (first use)"
    if info.data_version not in (None, info.version):
        made_by += " (the binaries cannot open it: `ikigai-store status` says what to do)"
    for label, value in (
        ("data dir", f"{info.data_dir}"),
        ("data version", made_by),
        ("socket dir", info.socket_dir),
        ("database URL", info.url),
        ("binaries", f"{info.bin_dir} (PostgreSQL {info.version})"),
        ("server", running),
    ):
        click.echo(f"{label + ':':<17}{value}")


@cli.group(short_help="Place the tables on a Citus cluster (docs/concepts/citus.md).")
def citus() -> None:
    """Run ikigai_store on a Citus cluster: connect to its coordinator."""


@citus.command(short_help="Distribute a migrated database's tables (rows move to the shards).")
def distribute() -> None:
    """Distribute the tables of a database migrated before citus was created in it.

    Migrating a database that has the citus extension distributes them already; this is for a
    database that held data first. Idempotent: prints each table it placed, or "already
    distributed". Fails, changing nothing, when the database has no citus extension.
    """
    with open_store(migrate=False) as store:
        changed = citus_ops.distribute(store.url)
    if not changed:
        click.echo("already distributed")
    for relation, made in changed:
        click.echo(f"{relation}: {made}")


@citus.command(short_help="Show how each table is placed on the cluster.")
def tables() -> None:
    """Show each application table: distributed (and by which column), reference or local;
    the shards and nodes it is on and its size (a reference table's: of one copy)."""
    with open_store(migrate=False) as store:
        rows = citus_ops.placements(store.url)
    click.echo(f"{'table':<24}{'placement':<28}{'shards':>7}{'nodes':>7}{'size':>11}")
    for p in rows:
        how = f"distributed by {p.column}" if p.kind.startswith("distributed") else p.kind
        shards = "" if p.shard_count is None else str(p.shard_count)
        nodes = "" if p.nodes is None else str(p.nodes)
        size = "" if p.size_bytes is None else _size(p.size_bytes)
        click.echo(f"{p.relation:<24}{how:<28}{shards:>7}{nodes:>7}{size:>11}")


def _cluster_line(c: citus_ops.ClusterSummary) -> str:
    """``status``'s line about the Citus cluster."""
    if not c.coordinator:
        return (
            "a worker's database (its tables are the coordinator's shards): "
            "connect to the coordinator"
        )
    workers = f"coordinator with {c.workers} worker{'s' if c.workers != 1 else ''}"
    if c.workers == 0:
        workers += " (shards stay on the coordinator: `citus_add_node`, docs/concepts/citus.md)"
    if c.distributed == 0 and c.reference == 0:
        return f"{workers}; nothing distributed yet: run `ikigai-store citus distribute`"
    return (
        f"{workers}; {c.distributed} tables distributed, {c.reference} reference, "
        f"{c.local} local (`ikigai-store citus tables`)"
    )


def _size(n: int) -> str:
    """``n`` bytes in pg_size_pretty's units (1024-based, below 10 of the next one), rounded
    down."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 10 * 1024 or unit == "GB":
            return f"{n} {unit}"
        n //= 1024
    raise AssertionError("unreachable")


def _moving(command: Callable[..., None]) -> Callable[..., None]:
    """The options of the commands that move shards (rebalance, drain)."""
    for option in reversed(
        [
            click.option(
                "--mode",
                type=click.Choice(citus_ops.TRANSFER_MODES),
                default="auto",
                show_default=True,
                help="Citus' shard_transfer_mode: auto and force_logical move by logical "
                "replication, block_writes blocks a shard's writes while it is copied.",
            ),
            click.option(
                "--wait/--no-wait", default=True, help="Return when the job has finished."
            ),
            click.option(
                "--timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=None,
                metavar="SECONDS",
                help="Cancel the job (the moves done stay) and fail when it has not finished "
                "by then.",
            ),
            click.option(
                "--stall-timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=60.0,
                show_default=True,
                metavar="SECONDS",
                help="Cancel the job and fail when no move has run for this long.",
            ),
        ]
    ):
        command = option(command)
    return command


def _report(p: citus_ops.RebalanceProgress) -> None:
    """A job's progress, on stderr."""
    failing = f"; failing: {p.messages[-1]}" if p.messages else ""
    click.echo(
        f"rebalance job {p.job_id}: {p.state}, {p.done} of {p.tasks} tasks done{failing}",
        err=True,
    )


@citus.command(short_help="Spread the shards over the nodes, refusing a move that can lose writes.")
@_moving
def rebalance(mode: str, wait: bool, timeout: float | None, stall_timeout: float) -> None:
    """Start Citus' rebalancer (citus_rebalance_start) after adding a node, and follow it.

    A logical move (auto, force_logical) is refused, moving nothing, while a node that holds
    shards commits with synchronous_commit = off: Citus could leave acknowledged writes on the
    old placement (docs/concepts/citus.md, "Growing the cluster"). Prints the job's progress
    on stderr as its tasks (shard moves) finish, then its id, or "nothing to move". A job that
    fails, stalls (Citus could not start its background workers) or outlives --timeout is
    cancelled and the command fails saying why.
    """
    with open_store(migrate=False) as store:
        job = citus_ops.rebalance(
            store.url,
            mode=mode,
            wait=wait,
            timeout=timeout,
            stall_timeout=stall_timeout,
            progress=_report,
        )
    if job is None:
        click.echo("nothing to move")
    else:
        click.echo(f"rebalance job {job}: {'done' if wait else 'started'}")


@citus.command(short_help="Move every shard off a worker (to take it out), and follow it.")
@click.argument("node", metavar="HOST:PORT")
@_moving
@click.option(
    "--remove", is_flag=True, help="Then remove the node from this database (it holds nothing)."
)
def drain(
    node: str, mode: str, wait: bool, timeout: float | None, stall_timeout: float, remove: bool
) -> None:
    """Mark the worker HOST:PORT to hold no shards in this database and move its shards to the
    others (Citus' rebalancer, drain only), as `citus rebalance` does; with --remove, remove
    it from this database's nodes afterwards.

    Nodes are registered per database: drain the node in each Citus database of the cluster.
    A later rebalance puts nothing back on a drained node; to use it again, run
    SELECT citus_set_node_property('HOST', PORT, 'shouldhaveshards', true).
    """
    host, sep, port = node.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {node!r}", param_hint="NODE")
    with open_store(migrate=False) as store:
        job = citus_ops.drain(
            store.url,
            host,
            int(port),
            mode=mode,
            remove=remove,
            wait=wait,
            timeout=timeout,
            stall_timeout=stall_timeout,
            progress=_report,
        )
    if job is None:
        click.echo(f"{node} holds no shard" + (": removed" if remove else ""))
    else:
        click.echo(
            f"rebalance job {job}: {'done' if wait else 'started'}"
            + (f"; {node} removed" if remove else "")
        )
