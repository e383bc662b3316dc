"""How the CLI shows things: tables, times, shortened text, JSON, and the views several command
modules share (replayed contexts, search hits, agents, ranges, mail).

Owns every piece of output used by more than one command module (one used by a single module
stays there). Invariants:
- no I/O but ``click.echo``, no store calls but ``echo_ranges``;
- one table printer (``echo_table``);
- one JSON converter: ``json_text`` writes any model as the dataclass's fields in declaration
  order (``as_dict``), nested models, lists, tuples and dicts included; a datetime becomes its
  ISO-8601 text, a timedelta its seconds, a UUID its text, a ``DeepJSON`` its text. Where a
  command's JSON differs from the fields (a field left out, renamed, moved, a property added),
  ``SHAPES`` says so; there is no converter written by hand.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from uuid import UUID

import click

from ..models import (
    Agent,
    DeepJSON,
    InboxItem,
    Mail,
    MailCounts,
    MailHit,
    Message,
    PendingOperation,
    PlanReview,
    Queued,
    ReplayContext,
    Review,
    SearchHit,
    TaskList,
    Topic,
    TopicInfo,
)
from ..store import Store

__all__ = [
    "CONTENT_WIDTH",
    "SHAPES",
    "SHORT_UUID",
    "SUBJECT_WIDTH",
    "Shape",
    "age",
    "as_dict",
    "counts_line",
    "describe",
    "echo_agents",
    "echo_body",
    "echo_context",
    "echo_hits",
    "echo_inbox",
    "echo_ranges",
    "echo_table",
    "echo_thread",
    "iso",
    "json_text",
    "model_of",
    "one_line",
    "short",
    "subject_line",
    "when",
]

#: Width a message's content is cut to in one-line listings.
CONTENT_WIDTH = 100
#: How many leading characters of an agent uuid identify it in listings.
SHORT_UUID = 8
#: Width a mail subject is cut to in listings.
SUBJECT_WIDTH = 60

# ---------------------------------------------------------------- text, times, tables


def one_line(text: str, width: int = CONTENT_WIDTH) -> str:
    """Collapse whitespace to single spaces and cut to ``width`` characters."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= width else flat[: width - 3] + "..."


def short(uuid: str | None) -> str:
    """The first ``SHORT_UUID`` characters of an agent uuid ("-" for an event without agent)."""
    return "-" if uuid is None else uuid[:SHORT_UUID]


def when(ts: datetime | None) -> str:
    """``ts`` in local time to the second ("-" for None)."""
    return "-" if ts is None else ts.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def iso(ts: datetime | None) -> str | None:
    """``ts`` as ISO-8601 text, as stored (None for None)."""
    return None if ts is None else ts.isoformat()


def age(ts: datetime, now: datetime | None = None) -> str:
    """How long ago ``ts`` was, in one unit: ``12s``, ``5m``, ``3h``, ``4d``."""
    seconds = max(0, int(((now or datetime.now(UTC)) - ts).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def echo_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: frozenset[str] = frozenset(),
    indent: str = "",
) -> None:
    """Print columns under ``header``; the columns named in ``right`` are right-aligned."""
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    for line in (header, *rows):
        cells = [
            c.rjust(w) if h in right else c.ljust(w)
            for c, w, h in zip(line, widths, header, strict=True)
        ]
        click.echo(f"{indent}{'  '.join(cells)}".rstrip())


# ---------------------------------------------------------------- JSON


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """How a model's JSON object differs from its dataclass fields (declaration order)."""

    #: Fields left out.
    omit: frozenset[str] = frozenset()
    #: Field -> the key it is written under.
    rename: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Fields holding a model whose keys are written in their place.
    inline: frozenset[str] = frozenset()
    #: Field or property -> the field it is written right after.
    after: Mapping[str, str] = dataclasses.field(default_factory=dict)


#: The models whose JSON is not simply their fields (every other model's is).
SHAPES: dict[type[Any], Shape] = {
    SearchHit: Shape(omit=frozenset({"horizon"})),
    MailHit: Shape(omit=frozenset({"horizon"})),
    Review: Shape(after={"short_id": "review_id"}),
    PlanReview: Shape(after={"short_id": "plan_review_id"}),
    TaskList: Shape(omit=frozenset({"id"})),
    Topic: Shape(omit=frozenset({"id"}), rename={"retention": "retention_seconds"}),
    TopicInfo: Shape(inline=frozenset({"topic"})),
    PendingOperation: Shape(omit=frozenset({"changed_at"}), after={"payload": "mail_id"}),
    Queued: Shape(after={"idempotency_key": "operation"}),
}


def as_dict(model: object) -> dict[str, Any]:
    """The JSON object of a dataclass instance, one level deep (``json_text`` converts the
    values): its fields in order, as ``SHAPES`` adjusts them."""
    if not dataclasses.is_dataclass(model) or isinstance(model, type):
        raise TypeError(f"not a dataclass instance: {model!r}")
    shape = SHAPES.get(type(model), Shape())
    out: dict[str, Any] = {}
    for f in dataclasses.fields(model):
        if f.name in shape.inline:
            out.update(as_dict(getattr(model, f.name)))
        elif f.name not in shape.omit and f.name not in shape.after:
            out[shape.rename.get(f.name, f.name)] = getattr(model, f.name)
        for moved, anchor in shape.after.items():
            if anchor == f.name:
                out[moved] = getattr(model, moved)
    return out


def _to_json(obj: object) -> Any:
    """What ``json`` cannot write itself, as something it can (one step; it recurses)."""
    if isinstance(obj, DeepJSON):
        return obj.text
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return as_dict(obj)
    if isinstance(obj, date):
        return obj.isoformat()
    if isinstance(obj, timedelta):
        return obj.total_seconds()
    if isinstance(obj, UUID):
        return str(obj)
    return str(obj)


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON for output: models as ``as_dict`` shapes them, lists, dicts and JSON values. Never
    fails on stored data: a ``DeepJSON`` is shown as its text (a string), and a value too deep
    for the indenting encoder is written compactly."""
    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, default=_to_json)
    except RecursionError:  # the indenting encoder recurses in Python, twice per level
        return json.dumps(value, ensure_ascii=False, default=_to_json)


# ---------------------------------------------------------------- events and agents


def describe(msg: Message) -> str:
    """One line for a message: its content, or its data when it has no content."""
    if msg.kind == "rewind" and isinstance(msg.data, dict) and "target_message_id" in msg.data:
        target = f"-> mark #{msg.data['target_message_id']}"
        return one_line(f"{target} {msg.content}" if msg.content else target)
    if msg.kind == "pop" and isinstance(msg.data, dict) and "target_message_id" in msg.data:
        return one_line(f"pops #{msg.data['target_message_id']}")
    if msg.content is not None:
        return one_line(msg.content)
    if msg.data is not None:
        return one_line(json_text(msg.data))
    return ""


def echo_context(ctx: ReplayContext, indent: str = "", *, agents: bool = False) -> None:
    """Print a replayed context: the messages, the mark stack, the skipped rewinds and pops.

    ``agents=True`` adds a column with each message's agent (short uuid prefix).
    """
    if not ctx.messages:
        click.echo(f"{indent}(empty context)")
    else:
        who = f"{'agent':<{SHORT_UUID}}  " if agents else ""
        click.echo(f"{indent}{'pos':>4} {'id':>8}  {who}{'kind':<12} content")
        for pos, msg in enumerate(ctx.messages, start=1):
            who = f"{short(msg.agent_uuid):<{SHORT_UUID}}  " if agents else ""
            click.echo(f"{indent}{pos:>4} {msg.id:>8}  {who}{msg.kind:<12} {describe(msg)}")
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
        click.echo(f"{indent}Skipped rewinds and pops (target no longer there): {ids}")


def echo_hits(hits: Sequence[SearchHit], indent: str = "") -> None:
    """Print search hits: rank, id, session, kind and the snippet on one line each."""
    if not hits:
        click.echo(f"{indent}no matches")
        return
    click.echo(f"{indent}{'rank':>6} {'id':>8} {'session':>8}  {'kind':<12} snippet")
    for hit in hits:
        m = hit.message
        click.echo(
            f"{indent}{hit.rank:>6.3f} {m.id:>8} {m.session_id:>8}  {m.kind:<12} "
            f"{one_line(hit.snippet)}"
        )


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


def model_of(agent: Agent) -> str:
    """``provider/model (thinking level)``, with ``-`` for what is unknown."""
    if agent.provider is None and agent.model is None:
        text = "-"
    else:
        text = f"{agent.provider or '-'}/{agent.model or '-'}"
    return text if agent.thinking_level is None else f"{text} ({agent.thinking_level})"


def echo_agents(agents: Sequence[Agent], indent: str = "") -> None:
    """Print agents as a tree (children indented under their parent)."""
    header = ("uuid", "name", "status", "fork point", "provider/model", "idle")
    rows = [
        (
            branch + a.uuid,
            a.name or "-",
            a.status,
            "-" if a.parent_uuid is None else str(a.fork_message_id),
            model_of(a),
            "yes" if a.idle else "no",
        )
        for branch, a in _agent_tree(agents)
    ]
    echo_table(header, rows, frozenset({"fork point"}), indent)


def echo_ranges(store: Store, uuid: str, indent: str = "") -> None:
    """Print an agent's replay ranges, root first, with the number of events in each."""
    ranges = store._replay_ranges(uuid)
    rows = []
    total = 0
    for r in ranges:
        count = len(store._query_range(r))
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
    header = ("agent", "name", "start (excl.)", "end (incl.)", "events")
    echo_table(header, rows, frozenset({"start (excl.)", "end (incl.)", "events"}), indent)
    click.echo(f"{indent}{total} event(s) in {len(ranges)} range(s); replay reads them in order.")


# ---------------------------------------------------------------- mail


def subject_line(m: Mail, width: int = SUBJECT_WIDTH) -> str:
    """A mail's subject on one line, cut to ``width`` ("(no subject)" when blank)."""
    return one_line(m.subject, width) if m.subject.strip() else "(no subject)"


def counts_line(name: str, c: MailCounts) -> str:
    """One line of ``name``'s mail counts."""
    return (
        f"{name}: {c.unread} unread ({c.urgent_unread} urgent), {c.starred} starred, "
        f"{c.snoozed} snoozed, {c.archived} archived, {c.trash} trash"
    )


def echo_inbox(items: Sequence[InboxItem], indent: str = "") -> None:
    """One line per mail: `*` for unread, id, state, priority, sender, age, subject."""
    if not items:
        click.echo(f"{indent}no mail")
        return
    now = datetime.now(UTC)
    rows = []
    for item in items:
        m = item.mail
        line = subject_line(m)
        if item.snoozed_until is not None:
            line += f"  (until {when(item.snoozed_until)})"
        rows.append(
            (
                "*" if item.state == "unread" else " ",
                str(m.id),
                item.state,
                m.priority,
                m.sender,
                age(m.created_at, now),
                line,
            )
        )
    header = (" ", "id", "state", "priority", "from", "age", "subject")
    echo_table(header, rows, frozenset({"id", "age"}), indent)


def echo_body(body: str, indent: str = "") -> None:
    """A mail body verbatim (each non-empty line indented), ending with one newline."""
    if indent:
        body = "\n".join(indent + line if line else line for line in body.split("\n"))
    click.echo(body, nl=not body.endswith("\n"))


def echo_thread(mails: Sequence[Mail], indent: str = "") -> None:
    """Every mail of a thread in order: a header line, the subject, the body indented."""
    now = datetime.now(UTC)
    for n, m in enumerate(mails):
        if n:
            click.echo()
        extra = [] if m.parent_id is None else [f"reply to #{m.parent_id}"]
        extra.append(f"{age(m.created_at, now)} ago")
        if m.priority != "normal":
            extra.append(m.priority)
        click.echo(f"{indent}#{m.id}  {m.sender} -> {', '.join(m.to)}  ({', '.join(extra)})")
        click.echo(f"{indent}Subject: {subject_line(m, 200)}")
        echo_body(m.body, indent + "    ")
