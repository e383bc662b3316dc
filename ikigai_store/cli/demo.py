"""The ``demo`` walkthrough: a seed conversation with mark, rewind, clear, search and a fork.

Invariant: it writes only to the session it creates, kills the agents it created and ends that
session before it returns, so the user's active session and running agents are unchanged.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import click

from ..models import Agent, Message
from ..store import Store
from .app import _store, cli
from .render import (
    _describe,
    _echo_agents,
    _echo_context,
    _echo_hits,
    _echo_ranges,
    _model_of,
    _short,
)

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
