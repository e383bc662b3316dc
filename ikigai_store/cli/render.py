"""How the CLI shows sessions, replayed contexts, search hits, agents and ranges.

Owns text and JSON rendering (no I/O but ``click.echo``, no store calls but ``_echo_ranges``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import click

from ..models import Agent, DeepJSON, Message, ReplayContext, SearchHit, Session
from ..store import Store

#: Width a message's content is cut to in one-line listings.
CONTENT_WIDTH = 100
#: How many leading characters of an agent uuid identify it in listings.
SHORT_UUID = 8


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
        return _one_line(json_text(msg.data))
    return ""


def json_text(value: Any, indent: int | None = None) -> str:
    """JSON for output. Never fails on stored data: a ``DeepJSON`` is shown as its text (a
    string), and a value too deep for the indenting encoder is written compactly."""

    def default(obj: object) -> str:
        return obj.text if isinstance(obj, DeepJSON) else str(obj)

    try:
        return json.dumps(value, ensure_ascii=False, indent=indent, default=default)
    except RecursionError:  # the indenting encoder recurses in Python, twice per level
        return json.dumps(value, ensure_ascii=False, default=default)


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
    _echo_table(("agent", "name", "start (excl.)", "end (incl.)", "events"), rows, indent)
    click.echo(f"{indent}{total} event(s) in {len(ranges)} range(s); replay reads them in order.")
