"""CLI ``export`` and ``import``: a session as one export file (``portability``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .app import cli
from .common import JSON_OPTION, open_store
from .render import json_text


@cli.command("export", short_help="Write a session to an export file.")
@click.argument("session_id", metavar="SESSION", type=int)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="The file to write (default: stdout).",
)
def export_command(session_id: int, output: Path | None) -> None:
    """Write SESSION, its agents and its events as an export file, format version 2 (a JSON
    header naming the event columns, JSON session and agent lines, the events in COPY's text
    format, a trailer with their SHA-256), streamed: constant memory whatever its size. Load
    it into any database with `ikigai-store import` (which also reads version 1 files)."""
    with open_store() as store:
        if output is None:
            done = store.export_session(session_id, sys.stdout.buffer)
        else:
            done = store.export_session(session_id, output)
    if output is not None:
        click.echo(f"exported session {session_id}: {done.lines} lines to {output}", err=True)


@cli.command("import", short_help="Load a session written by `ikigai-store export`.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path))
@click.option(
    "--once",
    is_flag=True,
    help="Refuse a file this database already imported with --once (its export id is kept).",
)
@JSON_OPTION
def import_command(file: Path, once: bool, as_json: bool) -> None:
    """Load FILE (`-`: stdin) as a new session, in one transaction, every id remapped;
    print the new session's id. A truncated, altered or newer file is refused and nothing
    is written."""
    with open_store() as store:
        source = sys.stdin.buffer if str(file) == "-" else file
        done = store.import_session(source, once=once)
    if as_json:
        click.echo(
            json_text(
                {
                    "session_id": done.session_id,
                    "export_id": done.export_id,
                    "events": done.events,
                    "agents": done.agents,
                },
                indent=2,
            )
        )
    else:
        click.echo(done.session_id)
