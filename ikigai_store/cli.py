"""The ``ikigai-store`` command line: inspect and drive a store from a terminal or a script.

Owns argument parsing, the rendering of sessions, replayed contexts and search hits, and the
``demo`` walkthrough. Invariants:
- no SQL here: every operation is a call on ``Store`` (or ``ikigai_store.db`` helpers for URL
  resolution and redaction);
- a database URL is only ever printed through ``config.redact`` (``store.url`` is redacted);
- user errors (every ``IkigaiStoreError``, bad JSON, no active session) and usage errors
  (unknown option or command, missing argument, bad value) print one ``Error: ...`` line on
  stderr and exit with status 1, never a traceback or click's usage block; a command group given
  no command prints its help and exits 0;
- the free-text arguments (``search`` QUERY, ``append`` CONTENT) may start with ``-``: an
  argument is an option only when it is one of the command's options or looks like a long
  option (``--word``); ``append KIND -`` reads CONTENT from standard input, verbatim;
- commands that print an id for scripts (``session new``, ``append``, ``agent new``, ``agent
  zero``) print that id alone; ``agent fork`` prints the child's uuid alone on its first line;
- ``demo`` writes only to the session it creates, kills the agents it created and ends that
  session before it returns, so the user's active session and running agents are the same before
  and after.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

import click

from . import __version__
from ._resources import migrations_dir
from .errors import IkigaiStoreError
from .models import VALID_KINDS, Agent, Message, ReplayContext, SearchHit, Session
from .store import Store
from .store import open as open_store

__all__ = ["cli", "main"]

#: Width a message's content is cut to in one-line listings.
CONTENT_WIDTH = 100
#: How many leading characters of an agent uuid identify it in listings.
SHORT_UUID = 8


@contextmanager
def _one_line_usage_errors() -> Iterator[None]:
    """Turn click's usage errors (exit 2 and a usage block) into one ``Error: ...`` line, exit 1."""
    try:
        yield
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx is not None else "ikigai-store"
        message = " ".join(exc.format_message().split())
        raise click.ClickException(f"{message} (see: {where} --help)") from exc


class _Cli(click.Group):
    """The root group: library and usage errors of any subcommand become ``Error: ...``."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        with _one_line_usage_errors():  # the root's own options
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        with _one_line_usage_errors():  # subcommands' arguments, unknown commands
            try:
                return super().invoke(ctx)
            except IkigaiStoreError as exc:
                # Our messages show URLs only through config.redact (tests/unit/test_urls.py).
                raise click.ClickException(str(exc) or type(exc).__name__) from exc


#: A misspelt or unknown long option (``--sesion``): left to click, which names it.
_LONG_OPTION = re.compile(r"--[A-Za-z][\w-]*(=.*)?", re.DOTALL)


class _TextArgs(click.Command):
    """A command whose positional arguments are free text that may start with ``-``.

    click reads every argument starting with ``-`` as an option, so ``search "-foo bar"`` or
    ``append user "--- a/x.c"`` would fail. Here an argument is an option only when it is one of
    the command's options (``-n 5``, ``--limit=5``, ``-n5``) or looks like a long option
    (``--word``, so that a misspelt option is still reported); every other argument is
    positional, wherever it stands. ``--`` still ends the options.
    """

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _positionals_last(ctx, self.get_params(ctx), args))


def _positionals_last(
    ctx: click.Context, params: Sequence[click.Parameter], args: Sequence[str]
) -> list[str]:
    """``args`` with the options (and their values) first, then ``--`` and the positionals."""
    options = {
        name: p
        for p in params
        if isinstance(p, click.Option)
        for name in (*p.opts, *p.secondary_opts)
    }
    head: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positionals.extend(args[i:])
            break
        option = options.get(arg)
        if option is not None:
            head.append(arg)
            if not (option.is_flag or option.count):
                head.extend(args[i : i + option.nargs])
                i += option.nargs
        elif _LONG_OPTION.fullmatch(arg) or _short_with_value(ctx, options, arg):
            head.append(arg)
        else:
            positionals.append(arg)
    return [*head, "--", *positionals] if positionals else head


def _short_with_value(ctx: click.Context, options: dict[str, click.Option], arg: str) -> bool:
    """True for ``-n5``: a short option of ours taking a value, glued to a valid value."""
    option = options.get(arg[:2])
    if len(arg) <= 2 or arg[1] == "-" or option is None or option.is_flag or option.count:
        return False
    try:
        option.type.convert(arg[2:], option, ctx)
    except click.BadParameter:
        return False
    return True


def _show_help_without_command(ctx: click.Context) -> None:
    """A group run without a command prints its help (exit 0) rather than a usage error."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@contextmanager
def _store(*, migrate: bool = True) -> Iterator[Store]:
    """Open the store named by the global ``--database`` option (or the configured default)."""
    ctx = click.get_current_context()
    url: str | None = ctx.find_root().params.get("database")
    with open_store(url, migrate=migrate) as store:
        yield store


def _active_or(store: Store, session_id: int | None) -> int:
    """``session_id`` if given, else the active session; a clear error when there is none."""
    if session_id is not None:
        return session_id
    active = store.get_active_session()
    if active is None:
        raise click.ClickException(
            "no active session; start one with `ikigai-store session new` or pass --session ID"
        )
    return active


# ------------------------------------------------------------------------------------ rendering


def _one_line(text: str, width: int = CONTENT_WIDTH) -> str:
    """Collapse whitespace to single spaces and cut to ``width`` characters."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def _when(ts: datetime | None) -> str:
    return "-" if ts is None else ts.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def _describe(msg: Message) -> str:
    """One line for a message: its content, or its data when it has no content."""
    if msg.kind == "rewind" and isinstance(msg.data, dict) and "target_message_id" in msg.data:
        target = f"-> mark #{msg.data['target_message_id']}"
        return _one_line(f"{target} {msg.content}" if msg.content else target)
    if msg.content is not None:
        return _one_line(msg.content)
    if msg.data is not None:
        return _one_line(json.dumps(msg.data, ensure_ascii=False))
    return ""


def _short(uuid: str | None) -> str:
    """The first ``SHORT_UUID`` characters of an agent uuid ("-" for an event without agent)."""
    return "-" if uuid is None else uuid[:SHORT_UUID]


def _echo_context(ctx: ReplayContext, indent: str = "", *, agents: bool = False) -> None:
    """Print a replayed context: the messages, the mark stack, the skipped rewinds.

    ``agents=True`` adds a column with each message's agent (short uuid prefix).
    """
    if not ctx.messages:
        click.echo(f"{indent}(empty context)")
    else:
        who = f"{'agent':<{SHORT_UUID}}  " if agents else ""
        click.echo(f"{indent}{'pos':>4} {'id':>8}  {who}{'kind':<12} content")
        for pos, msg in enumerate(ctx.messages, start=1):
            who = f"{_short(msg.agent_uuid):<{SHORT_UUID}}  " if agents else ""
            click.echo(f"{indent}{pos:>4} {msg.id:>8}  {who}{msg.kind:<12} {_describe(msg)}")
    if ctx.marks:
        marks = ", ".join(
            f"{m.label or '(unlabelled)'} (message #{m.message_id}, position {m.context_idx + 1})"
            for m in ctx.marks
        )
        click.echo(f"{indent}Marks: {marks}")
    else:
        click.echo(f"{indent}Marks: none")
    if ctx.skipped:
        ids = ", ".join(f"#{i}" for i in ctx.skipped)
        click.echo(f"{indent}Skipped rewinds (target mark no longer on the stack): {ids}")


def _message_json(msg: Message) -> dict[str, Any]:
    return {
        "id": msg.id,
        "session_id": msg.session_id,
        "agent_uuid": msg.agent_uuid,
        "kind": msg.kind,
        "content": msg.content,
        "data": msg.data,
        "created_at": msg.created_at.isoformat(),
    }


def _context_json(session_id: int, ctx: ReplayContext) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "messages": [_message_json(m) for m in ctx.messages],
        "marks": [
            {"message_id": m.message_id, "label": m.label, "context_idx": m.context_idx}
            for m in ctx.marks
        ],
        "skipped": list(ctx.skipped),
    }


def _echo_hits(hits: Sequence[SearchHit], indent: str = "") -> None:
    if not hits:
        click.echo(f"{indent}no matches")
        return
    click.echo(f"{indent}{'rank':>6} {'id':>8} {'session':>8}  {'kind':<12} snippet")
    for hit in hits:
        m = hit.message
        click.echo(
            f"{indent}{hit.rank:>6.3f} {m.id:>8} {m.session_id:>8}  {m.kind:<12} "
            f"{_one_line(hit.snippet)}"
        )


def _session_title(session: Session) -> str:
    return session.title if session.title is not None else "-"


def _echo_table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: str = "") -> None:
    """Print left-aligned columns (a column named in ``_RIGHT`` is right-aligned)."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        cells = [
            c.rjust(w) if h in _RIGHT else c.ljust(w)
            for c, w, h in zip(line, widths, header, strict=True)
        ]
        click.echo(f"{indent}{'  '.join(cells).rstrip()}")


_RIGHT = frozenset({"fork point", "start (excl.)", "end (incl.)", "events"})


def _agent_tree(agents: Sequence[Agent]) -> list[tuple[str, Agent]]:
    """``(branch drawing, agent)`` in display order: each agent's children under it, oldest first.

    An agent whose parent is not in ``agents`` is shown as a root. Iterative: lineages can be deep.
    """
    present = {a.uuid for a in agents}
    children: dict[str | None, list[Agent]] = {}
    for a in agents:
        children.setdefault(a.parent_uuid if a.parent_uuid in present else None, []).append(a)
    out: list[tuple[str, Agent]] = []
    stack = [(root, "", "") for root in reversed(children.get(None, []))]
    while stack:
        agent, branch, lead = stack.pop()
        out.append((branch, agent))
        kids = children.get(agent.uuid, [])
        for i in range(len(kids) - 1, -1, -1):
            last = i == len(kids) - 1
            stack.append(
                (kids[i], lead + ("└─ " if last else "├─ "), lead + ("   " if last else "│  "))
            )
    return out


def _model_of(agent: Agent) -> str:
    if agent.provider is None and agent.model is None:
        text = "-"
    else:
        text = f"{agent.provider or '-'}/{agent.model or '-'}"
    return text if agent.thinking_level is None else f"{text} ({agent.thinking_level})"


def _echo_agents(agents: Sequence[Agent], indent: str = "") -> None:
    """Print agents as a tree (children indented under their parent)."""
    header = ("uuid", "name", "status", "fork point", "provider/model", "idle")
    rows = [
        (
            branch + a.uuid,
            a.name or "-",
            a.status,
            "-" if a.parent_uuid is None else str(a.fork_message_id),
            _model_of(a),
            "yes" if a.idle else "no",
        )
        for branch, a in _agent_tree(agents)
    ]
    _echo_table(header, rows, indent)


def _echo_ranges(store: Store, uuid: str, indent: str = "") -> None:
    """Print an agent's replay ranges, root first, with the number of events in each."""
    ranges = store.replay_ranges(uuid)
    rows = []
    total = 0
    for r in ranges:
        count = len(store.query_range(r))
        total += count
        rows.append(
            (
                r.agent_uuid,
                store.get_agent(r.agent_uuid).name or "-",
                str(r.start_id),
                "∞" if r.end_id is None else str(r.end_id),
                str(count),
            )
        )
    _echo_table(("agent", "name", "start (excl.)", "end (incl.)", "events"), rows, indent)
    click.echo(f"{indent}{total} event(s) in {len(ranges)} range(s); replay reads them in order.")


# ------------------------------------------------------------------------------------ commands


@click.group(
    "ikigai-store",
    cls=_Cli,
    invoke_without_command=True,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--database",
    metavar="URL",
    default=None,
    help="PostgreSQL URL (postgresql://..., postgresql+psycopg://... as yoyo spells it, or "
    "key=value). Default: $IKIGAI_DATABASE_URL, else $DATABASE_URL, else the embedded "
    "PostgreSQL started on demand.",
)
@click.version_option(__version__, prog_name="ikigai-store")
@click.pass_context
def cli(ctx: click.Context, database: str | None) -> None:
    """ikigai-store: sessions, events, replay and search for LLM coding agents.

    Every command works on one database, chosen by --database. Commands that use it, other than
    `status` and `migrate`, apply pending migrations first.

    For a guided tour of mark, rewind, clear, search and agent forks, run: ikigai-store demo
    """
    _show_help_without_command(ctx)


@cli.command()
def migrate() -> None:
    """Apply pending schema migrations and print each one applied."""
    with _store(migrate=False) as store:
        pending = store.pending_migrations()
        if not pending:
            click.echo("up to date")
            return
        click.echo(f"applying {len(pending)} migration(s) to {store.url}...")
        store.migrate(progress=lambda migration_id: click.echo(f"  applying {migration_id}"))
        click.echo(f"schema version {store.schema_version()}")


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
    with _store(migrate=False) as store:
        where = store.url
        if store.embedded_data_dir is not None:
            where += f"\n{'':17}(embedded PostgreSQL, data dir {store.embedded_data_dir})"
        click.echo(f"{'database:':<17}{where}")
        version = store.schema_version()
        click.echo(f"{'schema version:':<17}{version}")
        pending = store.pending_migrations()
        click.echo(f"{'pending:':<17}{', '.join(pending) if pending else 'none'}")
        if version == 0:
            click.echo(f"{'active session:':<17}- (no schema: run `ikigai-store migrate`)")
            return
        active = store.get_active_session()
        if active is None:
            click.echo(f"{'active session:':<17}none")
        else:
            title = store.get_session(active).title
            click.echo(f"{'active session:':<17}{active}" + (f"  {title}" if title else ""))


# ---------------------------------------------------------------- session


@cli.group(invoke_without_command=True)
@click.pass_context
def session(ctx: click.Context) -> None:
    """Create, list, inspect, end and title sessions."""
    _show_help_without_command(ctx)


@session.command("new")
@click.option("--title", "-t", default=None, help="A title for the session.")
def session_new(title: str | None) -> None:
    """Start a session (it becomes the active one) and print its id."""
    with _store() as store:
        click.echo(store.create_session(title))


@session.command("list")
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="How many to list.")
def session_list(limit: int) -> None:
    """List sessions, newest first; `*` marks the active one."""
    with _store() as store:
        sessions = store.list_sessions(limit)
        active = store.get_active_session()
    if not sessions:
        click.echo("no sessions")
        return
    click.echo(f"  {'id':>8}  {'started':<19}  {'ended':<19}  title")
    for s in sessions:
        flag = "*" if s.id == active else " "
        click.echo(
            f"{flag} {s.id:>8}  {_when(s.started_at):<19}  {_when(s.ended_at):<19}  "
            f"{_session_title(s)}"
        )


@session.command("show")
@click.argument("session_id", metavar="ID", type=int)
def session_show(session_id: int) -> None:
    """Show one session: its fields, message count and context size."""
    with _store() as store:
        s = store.get_session(session_id)
        total = store.count_messages(session_id)
        ctx = store.replay_session(session_id)
        active = store.get_active_session()
    state = "active" if s.id == active else ("ended" if s.ended_at else "open")
    click.echo(f"{'id:':<18}{s.id} ({state})")
    click.echo(f"{'title:':<18}{_session_title(s)}")
    click.echo(f"{'started:':<18}{_when(s.started_at)}")
    click.echo(f"{'ended:':<18}{_when(s.ended_at)}")
    click.echo(f"{'messages:':<18}{total}")
    click.echo(f"{'in context:':<18}{len(ctx.messages)}")
    click.echo(f"{'marks:':<18}{', '.join(m.label or '-' for m in ctx.marks) or 'none'}")


@session.command("end")
@click.argument("session_id", metavar="[ID]", type=int, required=False)
def session_end(session_id: int | None) -> None:
    """End a session (default: the active one). Ending it again is harmless."""
    with _store() as store:
        sid = _active_or(store, session_id)
        store.end_session(sid)
    click.echo(f"ended session {sid}")


@session.command("title")
@click.argument("session_id", metavar="ID", type=int)
@click.argument("title", required=False)
@click.option("--clear", is_flag=True, help="Remove the title instead of setting one.")
def session_title(session_id: int, title: str | None, clear: bool) -> None:
    """Set a session's TITLE, or remove it with --clear."""
    if clear == (title is not None):
        raise click.ClickException("give either a TITLE or --clear")
    with _store() as store:
        store.set_session_title(session_id, None if clear else title)
    click.echo(f"session {session_id}: " + ("title cleared" if clear else f"title set to {title}"))


# ---------------------------------------------------------------- events


def _parse_data(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise click.ClickException(f"--data is not valid JSON: {exc}") from exc


def _read_stdin() -> str:
    """All of standard input, decoded as UTF-8 (a user error if it is not)."""
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise click.ClickException("standard input is not valid UTF-8 text") from None


_SESSION_OPTION = click.option(
    "--session",
    "-s",
    "session_id",
    type=int,
    default=None,
    metavar="ID",
    help="Session id (default: the active session).",
)


@cli.command(
    cls=_TextArgs,
    short_help="Append one event to a session and print its id.",
    epilog="Kinds: " + ", ".join(sorted(VALID_KINDS)) + ". Examples:\n\n"
    "\b\n"
    "  ikigai-store append user 'Add a --verbose flag'\n"
    "  make test 2>&1 | ikigai-store append tool_result -\n"
    '  ikigai-store append mark approach-a --data \'{"label": "approach-a"}\'\n'
    "  ikigai-store append rewind --data '{\"target_message_id\": 42}'\n"
    "  ikigai-store append clear",
)
@_SESSION_OPTION
@click.argument("kind")
@click.argument("content", required=False)
@click.option("--data", metavar="JSON", default=None, help="Structured data, as JSON text.")
@click.option(
    "--agent",
    "agent_uuid",
    metavar="UUID",
    default=None,
    help="Record the event as this agent's (the session defaults to the agent's).",
)
def append(
    session_id: int | None,
    kind: str,
    content: str | None,
    data: str | None,
    agent_uuid: str | None,
) -> None:
    """Append one event of KIND (with optional CONTENT) and print its id.

    CONTENT `-` reads the content from standard input, stored verbatim (trailing newline
    included). CONTENT may start with '-' ("- item", "--- a/file"). A mark's label is data.label;
    a rewind names its mark with data.target_message_id.
    """
    parsed = _parse_data(data)
    if content == "-":
        content = _read_stdin()
    with _store() as store:
        if session_id is None and agent_uuid is not None:
            sid = store.get_agent(agent_uuid).session_id
        else:
            sid = _active_or(store, session_id)
        click.echo(store.append(sid, kind, content, parsed, agent_uuid=agent_uuid).id)


@cli.command(short_help="Print the context a session replays to.")
@_SESSION_OPTION
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def replay(session_id: int | None, as_json: bool) -> None:
    """Print the context a session replays to (honouring clear, mark and rewind).

    One line per message in context (position, id, kind, content cut to one line), then the mark
    stack and any rewinds that were skipped because their mark was gone.
    """
    with _store() as store:
        sid = _active_or(store, session_id)
        ctx = store.replay_session(sid)
    if as_json:
        click.echo(json.dumps(_context_json(sid, ctx), ensure_ascii=False, indent=2))
        return
    click.echo(f"session {sid}: {len(ctx.messages)} message(s) in context")
    _echo_context(ctx)


@cli.command(cls=_TextArgs)
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
@click.option("--limit", "-n", type=int, default=20, show_default=True, help="Most hits to show.")
def search(query: str, session_id: int | None, limit: int) -> None:
    """Full-text search over every message, best match first.

    QUERY uses web-search syntax: "quoted phrase", `or`, -excluded; it may start with '-'
    (`search "-lexer parser"`). Matches in the snippet are shown in [brackets]. Rewound and
    cleared messages are still found: history is never lost. A query with no searchable word
    (only stop words such as "the") is an error: it could match nothing.
    """
    with _store() as store:
        hits = store.search(query, session_id=session_id, limit=limit)
        if not hits and not store.search_terms(query):
            raise click.ClickException(
                f"the query {query!r} has no searchable word (only stop words such as 'the', "
                "or punctuation): nothing to search"
            )
    _echo_hits(hits)


# ---------------------------------------------------------------- agents


@cli.group(invoke_without_command=True)
@click.pass_context
def agent(ctx: click.Context) -> None:
    """Create, fork, list, kill and replay agents.

    A fork inherits its parent's history up to the fork point without copying any event; replay
    reads the inherited ranges, then the agent's own events.
    """
    _show_help_without_command(ctx)


_F = TypeVar("_F", bound=Callable[..., Any])


def _agent_fields(
    name: str | None, provider: str | None, model: str | None, thinking_level: str | None
) -> dict[str, str | None]:
    return {"name": name, "provider": provider, "model": model, "thinking_level": thinking_level}


def _agent_options(fn: _F) -> _F:
    """--name, --provider, --model, --thinking-level (shared by `agent new` and `agent fork`)."""
    for option in reversed(
        (
            click.option("--name", "-n", default=None, help="A name for the agent."),
            click.option("--provider", default=None, help="LLM provider."),
            click.option("--model", "-m", default=None, help="Model name."),
            click.option("--thinking-level", default=None, help="Thinking level."),
        )
    ):
        fn = option(fn)
    return fn


@agent.command("list", short_help="List running agents as a tree.")
@_SESSION_OPTION
@click.option("--all", "all_sessions", is_flag=True, help="Running agents of every session.")
def agent_list(session_id: int | None, all_sessions: bool) -> None:
    """List running agents as a tree: children indented under their parent."""
    if all_sessions and session_id is not None:
        raise click.ClickException("give --session or --all, not both")
    with _store() as store:
        if all_sessions:
            agents = store.running_agents()
        else:
            sid = _active_or(store, session_id)
            store.get_session(sid)  # NotFound for a session that does not exist
            agents = store.running_agents(sid)
    if not agents:
        click.echo("no running agents")
        return
    by_session: dict[int, list[Agent]] = {}
    for a in agents:
        by_session.setdefault(a.session_id, []).append(a)
    for n, (sid, group) in enumerate(by_session.items()):
        if n:
            click.echo()
        click.echo(f"session {sid}")
        _echo_agents(group, indent="  ")


@agent.command("new", short_help="Create a root agent and print its uuid.")
@_SESSION_OPTION
@_agent_options
def agent_new(
    session_id: int | None,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Register a root agent (no parent) in a session and print its uuid."""
    with _store() as store:
        sid = _active_or(store, session_id)
        fields = _agent_fields(name, provider, model, thinking_level)
        click.echo(store.create_agent(sid, **fields).uuid)


@agent.command("zero", short_help="Print (or create) the session's root agent.")
@_SESSION_OPTION
@_agent_options
def agent_zero(
    session_id: int | None,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Print the session's root agent ("agent zero"), creating it if missing.

    Events of the session that belong to no agent are given to it. The options apply only when it
    is created.
    """
    with _store() as store:
        sid = _active_or(store, session_id)
        fields = _agent_fields(name, provider, model, thinking_level)
        click.echo(store.ensure_root_agent(sid, **fields).uuid)


@agent.command("fork", short_help="Fork an agent; print the child uuid and fork point.")
@click.argument("parent_uuid", metavar="PARENT_UUID")
@_agent_options
def agent_fork(
    parent_uuid: str,
    name: str | None,
    provider: str | None,
    model: str | None,
    thinking_level: str | None,
) -> None:
    """Fork a running agent: print the child's uuid (first line) and its fork point.

    The child inherits the parent's history up to the parent's newest event (the fork point) and,
    unless given, its provider, model and thinking level. No event is copied.
    """
    with _store() as store:
        child = store.fork_agent(
            parent_uuid, **_agent_fields(name, provider, model, thinking_level)
        )
    click.echo(child.uuid)
    if child.fork_message_id:
        click.echo(f"fork point: #{child.fork_message_id} (inherits the parent's events up to it)")
    else:
        click.echo("fork point: 0 (the parent had no events of its own)")


@agent.command("kill", short_help="Kill an agent and its descendants.")
@click.argument("uuid", metavar="UUID")
def agent_kill(uuid: str) -> None:
    """Mark an agent and its running descendants dead; print their uuids, parents first."""
    with _store() as store:
        killed = store.kill_agent(uuid)
    for killed_uuid in killed:
        click.echo(killed_uuid)
    if not killed:
        click.echo(f"agent {uuid} and its descendants were not running", err=True)


@agent.command("replay", short_help="Print the context an agent replays to.")
@click.argument("uuid", metavar="UUID")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
def agent_replay(uuid: str, as_json: bool) -> None:
    """Print the context an agent replays to: inherited events, then its own.

    Like `replay`, with an extra column: the agent each event belongs to (a short uuid prefix),
    so events inherited from ancestors are visible.
    """
    with _store() as store:
        me = store.get_agent(uuid)
        ctx = store.replay_agent(uuid)
    if as_json:
        doc = {"agent_uuid": me.uuid, **_context_json(me.session_id, ctx)}
        click.echo(json.dumps(doc, ensure_ascii=False, indent=2))
        return
    inherited = sum(1 for m in ctx.messages if m.agent_uuid != me.uuid)
    click.echo(
        f"agent {me.uuid} ({_short(me.uuid)}, session {me.session_id}): "
        f"{len(ctx.messages)} message(s) in context, {inherited} inherited"
    )
    _echo_context(ctx, agents=True)


@agent.command("ranges", short_help="Print the id ranges an agent's replay reads.")
@click.argument("uuid", metavar="UUID")
def agent_ranges(uuid: str) -> None:
    """Print the id ranges an agent's replay reads, root first: start < id <= end per agent."""
    with _store() as store:
        _echo_ranges(store, uuid)


# ---------------------------------------------------------------- demo


@cli.command(short_help="Record a demo conversation (mark, rewind, clear, search, fork).")
def demo() -> None:
    """Record a short conversation that shows mark, rewind, clear, search and agent forks.

    Writes to a new session titled "demo <time>" in the chosen database, then kills the demo's
    agents and ends the session; your own active session and agents are left untouched. Safe to
    run any number of times.
    """
    with _store() as store:
        title = f"demo {datetime.now().astimezone():%Y-%m-%d %H:%M:%S}"
        sid = store.create_session(title)
        try:
            child = _run_demo(store, sid, title)
        finally:
            for root in store.running_agents(sid):
                if root.parent_uuid is None:
                    store.kill_agent(root.uuid)
            store.end_session(sid)
    click.echo(f"\nThe demo session {sid} is ended and its agents are dead; inspect them with:")
    click.echo(f"  ikigai-store replay --session {sid}")
    click.echo(f"  ikigai-store session show {sid}")
    click.echo(f"  ikigai-store agent replay {child}")
    click.echo(f"  ikigai-store agent ranges {child}")


def _heading(text: str) -> None:
    click.echo()
    click.secho(text, bold=True)


def _run_demo(store: Store, sid: int, title: str) -> str:
    """Sections 1-4 (one session, no agent), then the agent sections; returns the child's uuid."""

    def add(kind: str, content: str | None = None, data: Any = None) -> Message:
        msg = store.append(sid, kind, content, data)
        extra = f"  data={json.dumps(data)}" if data is not None else ""
        click.echo(f"   + #{msg.id:<6} {kind:<10} {content or ''}{extra}".rstrip())
        return msg

    click.echo(f"Database: {store.url}")
    click.echo(f"Created session {sid} ({title}).")

    _heading("1. A conversation with a checkpoint, a detour and a rewind")
    click.echo("   A mark saves a point in the conversation; a rewind returns to it and drops")
    click.echo("   everything recorded after the mark from the context (but not from history).")
    add("user", "Feature X")
    add("assistant", "Approach A...")
    mark = add("mark", "approach-a", {"label": "approach-a"})
    add("user", "Try B")
    add("assistant", "Approach B...")
    add("rewind", "approach-a", {"target_message_id": mark.id, "target_label": "approach-a"})
    add("user", "Improve A")
    add("assistant", "Improved A...")

    _heading("2. Replay: the context the model sees now")
    click.echo("   8 events were stored; the 2 turns about approach B were rewound away, so 6")
    click.echo("   remain, and the mark stays on the stack for later rewinds.")
    _echo_context(store.replay_session(sid), indent="   ")

    _heading("3. /clear, then a fresh start")
    click.echo("   A clear empties the context and the mark stack; later events start anew.")
    add("clear")
    add("user", "New topic: Feature Y")
    add("assistant", "Plan for Y...")
    _echo_context(store.replay_session(sid), indent="   ")

    _heading('4. Search for "approach" in this session')
    click.echo("   Search covers the whole history: rewound and cleared messages are found too.")
    _echo_hits(store.search("approach", session_id=sid, limit=10), indent="   ")
    return _run_agent_demo(store, sid)


def _run_agent_demo(store: Store, sid: int) -> str:
    """Sections 5-8: a root agent, a fork, a rewind in the child; returns the child's uuid."""
    names: dict[str, str] = {}

    def show(msg: Message) -> Message:
        who = names.get(msg.agent_uuid or "", "-")
        click.echo(f"   + #{msg.id:<6} {who:<9} {msg.kind:<10} {_describe(msg)}".rstrip())
        return msg

    def say(agent: Agent, kind: str, content: str) -> Message:
        return show(store.append(sid, kind, content, agent_uuid=agent.uuid))

    _heading("5. Agents: a root agent records an exchange with a mark")
    click.echo("   Agents share the session's event stream; every event belongs to one agent.")
    main = store.create_agent(sid, name="main", provider="anthropic", model="claude-sonnet-4-5")
    names[main.uuid] = "main"
    click.echo(f"   created root agent main = {main.uuid}")
    say(main, "user", "Port the config parser to Rust")
    say(main, "assistant", "Plan: a lexer first, then a recursive-descent parser")
    show(store.mark(main.uuid, "plan"))
    dropped = say(main, "user", "Start with the lexer")

    _heading("6. Fork: the child inherits main's history without copying it")
    before = store.count_messages(sid)
    child = store.fork_agent(main.uuid, name="explorer")
    copied = store.count_messages(sid) - before
    names[child.uuid] = "explorer"
    click.echo(f"   forked explorer = {child.uuid} at fork point #{child.fork_message_id}:")
    click.echo(
        f"   one new agents row, {copied} messages copied; model inherited: {_model_of(child)}"
    )
    click.echo("   main carries on (explorer will not see this):")
    say(main, "assistant", "Lexer done: 14 token kinds")
    click.echo('   explorer tries a detour, rewinds to the inherited mark "plan", and continues:')
    say(child, "user", "What about a parser generator instead?")
    say(child, "assistant", "Tried one: the grammar gets awkward for includes")
    show(store.rewind(child.uuid, "plan"))
    say(child, "user", "Back to the plan: hand-written parser")
    say(child, "assistant", "Parser sketched, reusing the planned lexer")

    _heading("7. Replay each agent (the agent column shows whose event it is)")
    main_ctx, child_ctx = store.replay_agent(main.uuid), store.replay_agent(child.uuid)
    inherited = sum(1 for m in child_ctx.messages if m.agent_uuid == main.uuid)
    click.echo(f"   main ({_short(main.uuid)}): {len(main_ctx.messages)} messages")
    _echo_context(main_ctx, indent="     ", agents=True)
    click.echo(
        f"   explorer ({_short(child.uuid)}): {len(child_ctx.messages)} messages, "
        f"{inherited} inherited from main"
    )
    _echo_context(child_ctx, indent="     ", agents=True)
    click.echo('   The rewind cut "Start with the lexer" from explorer\'s context only: main still')
    click.echo('   has it, and main\'s later "Lexer done" never reached explorer.')

    _heading("8. Explorer's replay ranges and the agent tree")
    click.echo(
        "   Replay reads one id range per agent of the lineage, root first, in one statement;"
    )
    click.echo("   main's rows are read in place, never copied.")
    _echo_ranges(store, child.uuid, indent="   ")
    click.echo(
        f"   They fold to explorer's {len(child_ctx.messages)}-message context "
        f"(its rewind drops #{dropped.id})."
    )
    click.echo()
    _echo_agents(store.running_agents(sid), indent="   ")
    return child.uuid


def main(args: Sequence[str] | None = None) -> None:
    """Console-script entry point (``ikigai-store``, ``python -m ikigai_store``)."""
    cli.main(args=args, prog_name="ikigai-store")
