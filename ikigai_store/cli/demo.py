"""The ``demo`` walkthrough: a seed conversation with mark, rewind, clear, search, a fork,
mail between the demo's agents with a waiter woken by NOTIFY, then a task list, a code review,
a file lease and the activity feed between the same two agents.

Invariant: it writes only to the session it creates and to mail identities it registers under
fresh ``demo-<random>-...`` names (and the task list, review, lease and activities of those
identities); it kills the agents it created, releases its lease, retires those identities
(identities are never deleted) and ends that session before it returns, so the user's active
session, running agents, leases and active identities are unchanged.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from datetime import datetime
from typing import Any

import click

from .._where import describe as describe_database
from ..errors import Conflict, InvalidArgument
from ..models import Agent, InboxItem, Mail, Message
from ..store import Store
from .app import cli
from .common import open_store
from .render import (
    counts_line,
    describe,
    echo_agents,
    echo_context,
    echo_hits,
    echo_inbox,
    echo_ranges,
    echo_thread,
    model_of,
    short,
    subject_line,
)

# ---------------------------------------------------------------- demo


@cli.command(short_help="Record a demo conversation (mark, rewind, clear, search, fork, mail).")
def demo() -> None:
    """Record a short conversation that shows mark, rewind, clear, search, agent forks, and
    mail between two agents with a waiting agent woken as the mail is sent.

    Writes to a new session titled "demo <time>" in the chosen database and registers two mail
    identities named demo-<random>-main and demo-<random>-explorer; then kills the demo's
    agents, retires those identities (identities are never deleted) and ends the session. Your
    own active session, agents and identities are left untouched. Safe to run any number of
    times.
    """
    with open_store() as store:
        title = f"demo {datetime.now().astimezone():%Y-%m-%d %H:%M:%S}"
        sid = store.create_session(title)
        registered: list[str] = []
        try:
            child, thread_id = _run_demo(store, sid, title, registered)
        finally:
            for name in registered:
                store.identities.retire(name)
            for root in store.running_agents(sid):
                if root.parent_uuid is None:
                    store.kill_agent(root.uuid)
            store.end_session(sid)
    click.echo(
        f"\nThe demo session {sid} is ended, its agents are dead and their identities "
        f"({', '.join(registered)}) retired; inspect them with:"
    )
    click.echo(f"  ikigai-store replay --session {sid}")
    click.echo(f"  ikigai-store session show {sid}")
    click.echo(f"  ikigai-store agent replay {child}")
    click.echo(f"  ikigai-store agent ranges {child}")
    click.echo(f"  ikigai-store mail thread {thread_id}")
    click.echo(f"  ikigai-store mail inbox {registered[0]} --state starred")


def _heading(text: str) -> None:
    click.echo()
    click.secho(text, bold=True)


def _run_demo(store: Store, sid: int, title: str, registered: list[str]) -> tuple[str, str]:
    """Sections 1-4 (one session, no agent), then the agent and mail sections; returns the
    child's uuid and the mail thread's id. The identities it registers are added to
    ``registered`` as soon as they exist."""

    def add(kind: str, content: str | None = None, data: Any = None) -> Message:
        msg = store.append(sid, kind, content, data)
        extra = f"  data={json.dumps(data)}" if data is not None else ""
        click.echo(f"   + #{msg.id:<6} {kind:<10} {content or ''}{extra}".rstrip())
        return msg

    data_dir = getattr(store, "embedded_data_dir", None)
    where = describe_database(None, os.fspath(data_dir)) if data_dir else store.url
    click.echo(f"Database: {where}")
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
    echo_context(store.replay_session(sid), indent="   ")

    _heading("3. /clear, then a fresh start")
    click.echo("   A clear empties the context and the mark stack; later events start anew.")
    add("clear")
    add("user", "New topic: Feature Y")
    add("assistant", "Plan for Y...")
    echo_context(store.replay_session(sid), indent="   ")

    _heading('4. Search for "approach" in this session')
    click.echo("   Search covers the whole history: rewound and cleared messages are found too.")
    echo_hits(store.search("approach", session_id=sid, limit=10), indent="   ")
    main, child = _run_agent_demo(store, sid)
    thread_id = _run_mail_demo(store, main, child, registered)
    _run_coordination_demo(store, registered[0], registered[1])
    return child.uuid, thread_id


def _run_agent_demo(store: Store, sid: int) -> tuple[Agent, Agent]:
    """Sections 5-8: a root agent, a fork, a rewind in the child; returns both agents."""
    names: dict[str, str] = {}

    def show(msg: Message) -> Message:
        who = names.get(msg.agent_uuid or "", "-")
        click.echo(f"   + #{msg.id:<6} {who:<9} {msg.kind:<10} {describe(msg)}".rstrip())
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
        f"   one new agents row, {copied} messages copied; model inherited: {model_of(child)}"
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
    click.echo(f"   main ({short(main.uuid)}): {len(main_ctx.messages)} messages")
    echo_context(main_ctx, indent="     ", agents=True)
    click.echo(
        f"   explorer ({short(child.uuid)}): {len(child_ctx.messages)} messages, "
        f"{inherited} inherited from main"
    )
    echo_context(child_ctx, indent="     ", agents=True)
    click.echo('   The rewind cut "Start with the lexer" from explorer\'s context only: main still')
    click.echo('   has it, and main\'s later "Lexer done" never reached explorer.')

    _heading("8. Explorer's replay ranges and the agent tree")
    click.echo(
        "   Replay reads one id range per agent of the lineage, root first, in one statement;"
    )
    click.echo("   main's rows are read in place, never copied.")
    echo_ranges(store, child.uuid, indent="   ")
    click.echo(
        f"   They fold to explorer's {len(child_ctx.messages)}-message context "
        f"(its rewind drops #{dropped.id})."
    )
    click.echo()
    echo_agents(store.running_agents(sid), indent="   ")
    return main, child


#: How long after the waiter starts the demo sends the mail it waits for, in seconds.
WAKE_DELAY = 0.3


def _run_mail_demo(store: Store, main: Agent, child: Agent, registered: list[str]) -> str:
    """Sections 9-10: the two agents' identities exchange mail, then one waits for the other's
    mail and wakes as it is sent; returns the thread's id."""
    tag = secrets.token_hex(3)
    project = f"demo-{tag}"

    _heading("9. Mail: main and explorer get identities and write to each other")
    click.echo("   An identity is a named mail participant, here bound to each agent; it is never")
    click.echo("   deleted (the demo retires its own at the end).")
    names: dict[str, str] = {}
    for agent in (main, child):
        who = agent.name or "agent"
        ident = store.identities.register(
            f"{project}-{who}",
            project_key=project,
            purpose=f"the demo's {who} agent",
            agent_uuid=agent.uuid,
        )
        registered.append(ident.name)
        names[who] = store.identities.for_agent(agent.uuid).name  # the bound identity
        click.echo(f"   {who:<9} -> identity {names[who]} (bound to agent {short(agent.uuid)})")
    me, other = names["main"], names["explorer"]

    def show(sent_mail: Mail) -> None:
        click.echo(
            f"   + mail #{sent_mail.id:<6} {sent_mail.sender} -> {', '.join(sent_mail.to)}: "
            f"{subject_line(sent_mail)}"
        )

    first = store.mail.send(
        me,
        [other],
        "Lexer API",
        "The lexer yields `(kind, text, span)` tuples. Can the parser take those as they are?",
    )
    show(first)
    click.echo(f"   {other}'s inbox (`*` = unread):")
    click.echo(f"     {counts_line(other, store.mail.counts(other))}")
    echo_inbox(store.mail.inbox(other), indent="     ")
    store.mail.read(other, first.id)
    answer = store.mail.reply(other, first.id, "Yes, wrapped in a `Token` class; spans stay.")
    show(answer)
    store.mail.set_state(me, answer.id, "starred")
    store.mail.set_state(other, first.id, "archived")
    click.echo(f"   {me} stars the answer; {other} archives the question.")
    click.echo(f"   The thread, as `ikigai-store mail thread {first.thread_id}` shows it:")
    echo_thread(store.mail.thread(first.thread_id), indent="     ")

    _heading("10. A waiting agent wakes as the mail is sent")
    click.echo(f"   {me} waits for mail (timeout 10 s); {other} sends {WAKE_DELAY} s later. The")
    click.echo("   waiter wakes on PostgreSQL's LISTEN/NOTIFY, not by polling every 5 s.")
    got: list[InboxItem | None] = []
    failed: list[BaseException] = []
    woke = [0.0]

    def waiter() -> None:
        try:
            got.append(store.mail.wait(me, timeout=10))
            woke[0] = time.perf_counter()
        except BaseException as exc:  # re-raised in the demo's thread
            failed.append(exc)

    thread = threading.Thread(target=waiter, name="demo-mail-waiter", daemon=True)
    thread.start()
    time.sleep(WAKE_DELAY)
    started = time.perf_counter()
    done = store.mail.send(
        other,
        [me],
        "Parser done",
        "The recursive-descent parser passes the include tests.",
        thread_id=first.thread_id,
        parent_id=answer.id,
        priority="urgent",
    )
    sent_in = time.perf_counter() - started
    thread.join(15)
    if failed:
        raise failed[0]
    show(done)
    item = got[0] if got else None
    if item is None:
        click.echo(f"   {me} got no mail within 10 s")
    else:
        click.echo(
            f"   {me} woke {1000 * (woke[0] - started):.1f} ms after the send began "
            f"(the send itself took {1000 * sent_in:.1f} ms)"
        )
        click.echo(f'   with mail #{item.mail.id} "{subject_line(item.mail)}", now {item.state}.')
    click.echo("   Who is around (`ikigai-store identity discover`):")
    for status in store.identities.discover(project_key=project):
        click.echo(f"     {status.identity.name:<24} {status.status:<8} {status.unread} unread")
    for name in (me, other):
        click.echo(f"     {counts_line(name, store.mail.counts(name))}")
    return first.thread_id


def _run_coordination_demo(store: Store, me: str, other: str) -> None:
    """Sections 11-13: a task list with dependencies, a code review through its state machine
    (each step mails the other side and writes an activity in the same transaction), an
    exclusive file lease, and the activity feed of both agents."""
    project = me.rsplit("-", 1)[0]

    _heading("11. Tasks: a list with dependencies, claimed by one agent at a time")
    click.echo("   A task is available when it is pending, unowned and every blocker is done.")
    tasks = store.tasks
    task_list = tasks.create_list(f"{project}-tasks", me)
    tasks.upsert(task_list, "lexer", subject="Write the lexer")
    tasks.upsert(task_list, "parser", subject="Write the parser", blocked_by=["lexer"])
    tasks.upsert(task_list, "docs", subject="Document the grammar", blocked_by=["parser"])

    def available() -> str:
        return ", ".join(t.external_id for t in tasks.available(task_list)) or "none"

    click.echo(f"   available: {available()}")
    tasks.claim(task_list, "lexer", other)
    click.echo(f"   {other} claims lexer; available: {available()}")
    tasks.upsert(task_list, "lexer", status="completed")
    click.echo(f"   lexer completed; available: {available()}")
    stats = tasks.stats(task_list)
    click.echo(
        f"   stats: {stats.total} tasks, {stats.completed} completed, {stats.available} "
        f"available, {stats.blocked} blocked"
    )

    _heading("12. A code review: request, changes requested, resubmit, approve")
    click.echo(
        "   Every step is one guarded UPDATE plus its mail and activity, in one transaction;"
    )
    click.echo("   an illegal step (approving an approved review) changes nothing.")
    review = store.reviews.create(me, reviewers=[other], branch="feature/parser")
    review = store.reviews.submit(review)
    click.echo(f"   review {review.short_id} {review.state}; thread {review.thread_id}")
    store.reviews.start(review)
    store.reviews.record_iteration(
        review,
        other,
        "request_changes",
        "One bug, one nit.",
        issues=[
            {
                "issue_type": "style",
                "severity": "low",
                "title": "Long line",
                "description": "parse_expr's signature runs past 100 columns.",
            },
            {
                "issue_type": "bug",
                "severity": "high",
                "title": "EOF token missing",
                "description": "The token stream ends without EOF, so the parser reads past it.",
                "file_path": "src/lexer.py",
                "line_start": 42,
            },
        ],
    )
    click.echo("   open issues, most severe first:")
    issues = store.reviews.open_issues(review)
    for issue in issues:
        click.echo(f"     #{issue.id:<5} {issue.severity:<8} {issue.issue_type:<6} {issue.title}")
    store.reviews.resubmit(review)
    store.reviews.start(review)
    it = store.reviews.record_iteration(review, other, "approve", "All fixed.")
    for issue in issues:
        store.reviews.resolve_issue(issue.id, "fixed", iteration=it.iteration_num)
    review = store.reviews.get(review)
    click.echo(
        f"   iteration {it.iteration_num}: {it.decision}; review is {review.state}, "
        f"{len(store.reviews.open_issues(review))} issue(s) open"
    )
    try:
        store.reviews.approve(review)
    except InvalidArgument as refused:
        click.echo(f"   approving again is refused: {refused}")
    click.echo(f"   {me}'s inbox has {store.mail.counts(me).unread} unread review mail(s).")

    _heading("13. A lease on a file, and the activity feed")
    resource = f"repo:{project}/src/parser.py"
    lease = store.leases.acquire(me, resource, ttl=60)
    click.echo(f"   {me} leases {resource} for 60 s")
    try:
        store.leases.acquire(other, resource, ttl=60)
    except Conflict as refused:
        click.echo(f"   {other} is refused: {refused}")
    store.leases.release(lease)
    click.echo(f"   {me} releases it. The feed, newest first:")
    feed = [a for who in (me, other) for a in store.activities.feed(identity=who, limit=10)]
    for activity in sorted(feed, key=lambda a: a.id, reverse=True)[:10]:
        click.echo(f"     {activity.identity:<24} {activity.type:<18} {activity.description}")
