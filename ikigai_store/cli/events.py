"""CLI commands on the event stream: ``append``, ``replay``, ``search``."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from ..models import VALID_KINDS
from .app import TextArgs, cli
from .common import JSON_OPTION, SESSION_OPTION, active_or, open_store, read_stdin
from .params import AGO, JSON
from .render import as_dict, echo_context, echo_hits, json_text

# ---------------------------------------------------------------- events


@cli.command(
    cls=TextArgs,
    short_help="Append one event to a session and print its id.",
    epilog="Kinds: " + ", ".join(sorted(VALID_KINDS)) + ". Examples:\n\n"
    "\b\n"
    "  ikigai-store append user 'Add a --verbose flag'\n"
    "  make test 2>&1 | ikigai-store append tool_result -\n"
    '  ikigai-store append mark approach-a --data \'{"label": "approach-a"}\'\n'
    "  ikigai-store append rewind --data '{\"target_message_id\": 42}'\n"
    "  ikigai-store append clear",
)
@SESSION_OPTION
@click.argument("kind")
@click.argument("content", required=False)
@click.option(
    "--data", type=JSON, metavar="JSON", default=None, help="Structured data, as JSON text."
)
@click.option(
    "--agent",
    "agent_uuid",
    metavar="UUID",
    default=None,
    help="Record the event as this agent's (the session defaults to the agent's).",
)
@click.option(
    "--idempotency-key",
    "key",
    metavar="KEY",
    default=None,
    help="Store the event once per KEY in the session: run again, it prints the first id.",
)
def append(
    session_id: int | None,
    kind: str,
    content: str | None,
    data: Any,
    agent_uuid: str | None,
    key: str | None,
) -> None:
    """Append one event of KIND (with optional CONTENT) and print its id.

    CONTENT `-` reads the content from standard input, stored verbatim (trailing newline
    included). CONTENT may start with '-' ("- item", "--- a/file"). A mark's label is data.label;
    a rewind names its mark with data.target_message_id. With --idempotency-key a retry (the
    same command again) stores nothing and prints the id stored first; the key given with
    another event is an error.
    """
    if content == "-":
        content = read_stdin()
    with open_store() as store:
        if session_id is None and agent_uuid is not None:
            sid = store.get_agent(agent_uuid).session_id
        else:
            sid = active_or(store, session_id)
        click.echo(
            store.append(sid, kind, content, data, agent_uuid=agent_uuid, idempotency_key=key).id
        )


@cli.command(short_help="Print the context a session replays to.")
@SESSION_OPTION
@JSON_OPTION
def replay(session_id: int | None, as_json: bool) -> None:
    """Print the context a session replays to (honouring clear, mark and rewind).

    One line per message in context (position, id, kind, content cut to one line), then the mark
    stack and any rewinds that were skipped because their mark was gone.
    """
    with open_store() as store:
        sid = active_or(store, session_id)
        ctx = store.replay_session(sid)
    if as_json:
        click.echo(json_text({"session_id": sid, **as_dict(ctx)}, indent=2))
        return
    click.echo(f"session {sid}: {len(ctx.messages)} message(s) in context")
    echo_context(ctx)


@cli.command(cls=TextArgs, short_help="Full-text search over every message.")
@click.argument("query")
@click.option(
    "--session",
    "-s",
    "session_id",
    type=int,
    default=None,
    metavar="ID",
    help="Only search this session (default: every session).",
)
@click.option(
    "--agent", "agent_uuid", metavar="UUID", default=None, help="Only this agent's events."
)
@click.option(
    "--kind",
    "kinds",
    metavar="KIND",
    multiple=True,
    type=click.Choice(sorted(VALID_KINDS)),
    help="Only events of this kind (repeat for several).",
)
@click.option(
    "--since",
    type=AGO,
    metavar="WHEN",
    default=None,
    help="Only events created at or after WHEN: an ISO-8601 date or time (local without an "
    "offset), or a duration ago (2h, 7d).",
)
@click.option(
    "--until",
    type=AGO,
    metavar="WHEN",
    default=None,
    help="Only events created before WHEN (as --since).",
)
@click.option(
    "--order",
    type=click.Choice(["rank", "recent"]),
    default="rank",
    show_default=True,
    help="rank: best of the newest 1000 matches first; recent: newest first.",
)
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="Most hits to show.")
@JSON_OPTION
def search(
    query: str,
    session_id: int | None,
    agent_uuid: str | None,
    kinds: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    order: str,
    limit: int,
    as_json: bool,
) -> None:
    """Full-text search over every message, best match first.

    QUERY uses web-search syntax: "quoted phrase", `or`, -excluded; it may start with '-'
    (`search "-lexer parser"`). Matches in the snippet are shown in [brackets]. Rewound and
    cleared messages are still found: history is never lost. A query with no searchable word
    (only stop words such as "the") is an error: it could match nothing.

    By rank, hits are the best of the newest 1000 matches, and messages holding the words of a
    plain query as an exact phrase come first. WHEN is ISO 8601 (2025-06-01, 2025-06-01T14:30,
    2025-06-01T14:30+02:00; without an offset it is local time) or a duration ago (2h, 7d).
    """
    with open_store() as store:
        hits = store.search(
            query,
            session_id=session_id,
            agent_uuid=agent_uuid,
            kinds=list(kinds) or None,
            since=since,
            until=until,
            order=order,
            limit=limit,
        )
        if not hits and not store.search_terms(query):
            raise click.ClickException(
                f"the query {query!r} has no searchable word (only stop words such as 'the', "
                "or punctuation): nothing to search"
            )
    if as_json:
        click.echo(json_text(hits, indent=2))
        return
    echo_hits(hits)
