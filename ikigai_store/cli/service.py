"""CLI ``service``: see, start, stop or run the warm local service (``ikigai_store.service``) of
the database chosen by ``--database`` (else the configured one).

The hook commands and ``ikigai-store mcp`` start the service themselves on first use; these
commands are for people. Invariants: ``status`` and ``stop`` never start a service; ``stop``
returns once the service's process has exited; the database URL is shown redacted.
"""

from __future__ import annotations

import time
from typing import Any

import click

from ..service import client
from .app import cli
from .common import JSON_OPTION, database_option, show_help_without_command
from .render import json_text


@cli.group(invoke_without_command=True)
@click.pass_context
def service(ctx: click.Context) -> None:
    """The warm local service behind the hooks and `ikigai-store mcp`.

    One service runs per OS user and database. It keeps the store open (and the embedded
    PostgreSQL running) so that a hook answers in milliseconds; the first hook or MCP server
    that needs it starts it, and it exits after $IKIGAI_SERVICE_IDLE seconds (default 1800)
    without a client. Its socket and log live in $IKIGAI_RUNTIME_DIR, else
    $XDG_RUNTIME_DIR/ikigai-store, else /tmp/ikigai-store-<uid> (mode 0700). Set
    IKIGAI_SERVICE=off to run hooks in their own process instead.
    """
    show_help_without_command(ctx)


def _target() -> client.Target:
    return client.target(database_option())


def _show(where: client.Target, state: dict[str, Any] | None, as_json: bool) -> None:
    shown = {"running": state is not None, "socket": where.socket_path, "log": where.log_path}
    if state is not None:
        shown.update({k: v for k, v in state.items() if k not in ("ok", "socket")})
    if as_json:
        click.echo(json_text(shown, indent=2))
        return
    if state is None:
        click.echo(f"not running (socket {shown['socket']}, log {shown['log']})")
        return
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(state["started"]))
    rss = state.get("rss_bytes")
    lines = [
        f"running: pid {state['pid']}, version {state['version']}",
        f"database: {state['database']}",
        f"socket: {shown['socket']}",
        f"log: {shown['log']}",
        f"started: {started} (up {state['uptime']:.0f} s); stops after "
        f"{state['idle_timeout']:g} s without a client",
        f"connections: {state['connections']} open, {state['requests']} requests served",
        f"memory: {rss / 2**20:.1f} MiB resident" if isinstance(rss, int) else "memory: unknown",
    ]
    click.echo("\n".join(lines))


@service.command("status")
@JSON_OPTION
def status(as_json: bool) -> None:
    """Show whether the service runs: its pid, version, database, socket, log, uptime,
    connections and memory. Never starts it."""
    where = _target()
    _show(where, client.status(where), as_json)


@service.command("start")
@JSON_OPTION
def start(as_json: bool) -> None:
    """Start the service (detached) unless it runs, and show its status."""
    where = _target()
    try:
        client.connect(where).close()
    except client.ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    _show(where, client.status(where), as_json)


@service.command("stop")
def stop() -> None:
    """Stop the running service and wait for it to exit (the next client starts a new one)."""
    try:
        state = client.stop(_target())
    except client.ServiceError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo("not running" if state is None else f"stopped (pid {state['pid']})")


@service.command("run")
@click.option(
    "--idle",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="Exit after this long without a client (default: $IKIGAI_SERVICE_IDLE, else 1800).",
)
def run(idle: float | None) -> None:
    """Run the service in the foreground (logging to stderr) until it is stopped, e.g. under a
    process supervisor. Exits at once if it cannot listen."""
    from ..service.server import main

    args = ["--idle", repr(idle)] if idle is not None else []
    database = database_option()
    if database is not None:
        args += ["--database", database]
    if main(args) != 0:
        raise click.ClickException("the service could not start (see above)")
