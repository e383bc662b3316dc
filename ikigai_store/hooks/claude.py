"""Claude Code hooks: what ``ikigai-store hook <name>`` does with the event Claude Code sends.

Claude Code runs a hook command with one JSON object on stdin (``session_id``,
``transcript_path``, ``cwd``, ``hook_event_name`` and the event's own fields; a subagent's
events also carry ``agent_id`` and ``agent_type``) and reads its answer from stdout: nothing
(carry on), ``hookSpecificOutput.additionalContext`` (text added to the model's context),
``{"decision": "block", "reason": ...}`` (Stop: keep working) or
``hookSpecificOutput.permissionDecision: "deny"`` (PreToolUse: refuse the tool call).

Owns reading that input, resolving the agent's identity, the store calls each hook makes and
rendering its answer. ``run`` is one hook on one event; ``main`` is the command around it, and
``hooks.http`` answers Claude Code's ``http`` hooks with it inside a running server (its store
injected, so no process start and no store open per hook). Invariants:
- a hook fails open: any failure (the database unreachable, bad JSON on stdin, the deadline
  passed) exits 0 with nothing on stdout and exactly one line on stderr,
  ``ikigai-store hook <name>: <why>``; never a traceback, never a block or a denial;
- a hook with nothing to say prints nothing; it opens the store only when the event concerns it
  (``pre-tool`` on a Read, ``post-tool`` on a Bash call return at once);
- the identity is ``store.identities.resolve(project_key(cwd), role=..., name=...)`` with the
  project, role and name rules of ``hooks.context`` (shared with the MCP server, so an agent's
  hooks and its MCP tools act as one identity); ``source`` (startup, resume, clear, compact)
  does not change it. A subagent's role is ``<role>/<agent_type or agent_id>``, it never
  takes the main agent's explicit name, and its identity is a child (``Identity.parent``) of
  the main agent's;
- ``prompt`` shows each mail once: it keeps, per database and identity, the newest mail id it
  has shown in a small JSON file under the user state directory, replaced atomically;
- ``stop`` never blocks twice in a row (``stop_hook_active`` lets the agent stop), and not
  for mail while a watcher (``ikigai-store watch``) runs for the agent: it will wake it;
- ``pre-tool`` denies an edit only while another identity holds a live exclusive lease whose
  resource covers the file (``context.covers``: the path, a directory above it, or a glob);
  the agent's own leases never deny it, nor, for a subagent, those of the agent that started
  it (resolved with the role and name the subagent's role was derived from). A denied agent
  waits for the lease (``leases.wait_for``): its watcher reports when the lease is freed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import IO, Any

import platformdirs

from ..aio import AsyncStore, open_async
from ..errors import Conflict, NotFound
from ..models import Identity, InboxItem, Task
from ..validate import MAX_SUBJECT_CHARS
from . import failopen
from .context import FILE_PREFIX, agent_name, agent_role, covers, file_resource, project_key
from .failopen import EDIT_TOOLS

__all__ = [
    "EDIT_TOOLS",
    "HOOKS",
    "TASK_TOOLS",
    "HookContext",
    "HookOptions",
    "main",
    "parse_input",
    "post_tool",
    "pre_tool",
    "prompt",
    "run",
    "session_start",
    "state_path",
    "stop",
]

#: Tools whose calls ``post-tool`` mirrors into ``store.tasks``.
TASK_TOOLS = frozenset({"TaskCreate", "TaskUpdate", "TodoWrite"})
#: Default length of an ``--auto-reserve`` lease, in seconds.
AUTO_RESERVE_SECONDS = 300.0
#: How long a hook may take in all (Claude Code's own limit is 60 s), and how long it waits
#: for a connection (libpq's ``PGCONNECT_TIMEOUT``) or for another process's migration.
DEADLINE_SECONDS = 10.0
CONNECT_TIMEOUT_SECONDS = 3
MIGRATION_WAIT_SECONDS = 5.0
#: How many mails, reviews and tasks a context lists (the counts are always complete).
SHOWN = 5
_SUBJECT_CHARS = 80
_TODO_PREFIX = "todo-"


class HookFailed(Exception):
    """Why a hook gave up (reported on its one stderr line)."""


@dataclass(frozen=True)
class HookOptions:
    """The options of every hook: who the agent is, where the database is.

    ``project`` and ``task_list`` stand in for ``CLAUDE_PROJECT_DIR`` and
    ``CLAUDE_CODE_TASK_LIST_ID`` where the hook has no environment of the agent's (an ``http``
    hook, answered by a server): given, they win over the environment."""

    name: str | None = None
    role: str | None = None
    database: str | None = None
    auto_reserve: float | None = None
    deadline: float = DEADLINE_SECONDS
    project: str | None = None
    task_list: str | None = None


def parse_input(text: str) -> dict[str, Any]:
    """Claude Code's hook input: one JSON object (``HookFailed`` for anything else)."""
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError as exc:
        raise HookFailed(f"standard input is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HookFailed("standard input is not a JSON object (Claude Code's hook input)")
    return data


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


class HookContext:
    """One hook run: its input, its store, and (resolved on first use) its identity."""

    def __init__(
        self,
        event: Mapping[str, Any],
        options: HookOptions,
        stack: AsyncExitStack,
        *,
        store: AsyncStore | Callable[[], Awaitable[AsyncStore]] | None = None,
    ) -> None:
        self.event = event
        self.options = options
        self._stack = stack
        self._store = store if isinstance(store, AsyncStore) else None
        self._opener = store if callable(store) else None
        self._parent: Identity | None = None
        self._identity: Identity | None = None

    @cached_property
    def cwd(self) -> str | None:
        """The agent's working directory (the input's ``cwd``)."""
        return _text(self.event.get("cwd"))

    @cached_property
    def project(self) -> str:
        """The project key: ``options.project`` (resolved), else ``context.project_key``."""
        if self.options.project:
            return os.path.realpath(self.options.project)
        return project_key(self.cwd)

    @cached_property
    def subagent(self) -> str | None:
        """For a subagent's event, what its role is suffixed with: its type, else its id."""
        if _text(self.event.get("agent_id")) is None:
            return None
        return _text(self.event.get("agent_type")) or _text(self.event.get("agent_id"))

    @cached_property
    def role(self) -> str:
        """``--role``/``IKIGAI_ROLE``/``main``, suffixed ``/<agent_type or agent_id>`` for a
        subagent."""
        role = agent_role(self.options.role)
        return role if self.subagent is None else f"{role}/{self.subagent}"

    async def store(self) -> AsyncStore:
        """The store given (or that the opener given returns, on first use), else one opened (on
        first use) for this run: ``--database``,
        ``IKIGAI_DATABASE_URL``, ``DATABASE_URL`` or the embedded server, migrated, closed when
        the hook ends."""
        if self._store is None and self._opener is not None:
            self._store = await self._opener()
        if self._store is None:
            os.environ.setdefault("PGCONNECT_TIMEOUT", str(CONNECT_TIMEOUT_SECONDS))
            opening = open_async(
                self.options.database, pool_size=1, migration_lock_timeout=MIGRATION_WAIT_SECONDS
            )
            self._store = await self._stack.enter_async_context(opening)
        return self._store

    async def parent(self) -> Identity | None:
        """For a subagent's event, the identity of the agent that started it (``--role`` and
        ``--as`` of the hook, as for the main agent); None otherwise."""
        if self.subagent is None:
            return None
        if self._parent is None:
            self._parent = await (await self.store()).identities.resolve(
                self.project,
                role=agent_role(self.options.role),
                name=agent_name(self.options.name),
                working_dir=self.cwd,
            )
        return self._parent

    async def identity(self) -> Identity:
        """This agent's identity (see the module docstring); a subagent's is a child of
        ``parent``."""
        if self._identity is None:
            name = agent_name(self.options.name) if self.subagent is None else None
            self._identity = await (await self.store()).identities.resolve(
                self.project,
                role=self.role,
                name=name,
                parent=await self.parent(),
                working_dir=self.cwd,
            )
        return self._identity

    async def team(self) -> frozenset[str]:
        """The identities whose reservations are this agent's own: itself, and for a subagent
        the agent that started it (a subagent edits what its parent reserved)."""
        me, parent = await self.identity(), await self.parent()
        return frozenset({me.name} | ({parent.name} if parent is not None else set()))


# ---------------------------------------------------------------------------------- rendering


def _short(text: str, limit: int = _SUBJECT_CHARS) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mail_lines(items: Sequence[InboxItem]) -> list[str]:
    return [
        f"  #{i.mail.id} from {i.mail.sender} [{i.mail.priority}] {_short(i.mail.subject)!r}"
        for i in items
    ]


def _task_line(task: Task) -> str:
    return f"  {task.list_id}/{task.external_id}: {_short(task.subject)}"


def _context(event: str, text: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# ---------------------------------------------------------------------------------- the hooks


async def session_start(ctx: HookContext) -> dict[str, Any] | None:
    """SessionStart: who the agent is, its unread mail, the reviews waiting for it and the
    tasks anyone may claim in its project's task lists and in those of no project, as
    additional context. The mail it lists counts as shown: the next ``prompt`` does not list
    it again."""
    store = await ctx.store()
    me = await store.identities.heartbeat(await ctx.identity())
    lines = [
        f"ikigai-store: you are {me.name} (role {ctx.role}, project {ctx.project}). Other "
        f"agents reach you by mail to {me.name!r}; the ikigai-store MCP tools read and send "
        "mail, claim tasks and reserve files."
    ]
    counts = await store.mail.counts(me)
    if counts.unread:
        urgent = f", {counts.urgent_unread} urgent" if counts.urgent_unread else ""
        lines.append(f"Unread mail: {counts.unread}{urgent}. Newest:")
        listed = await store.mail.inbox(me, state="unread", limit=SHOWN)
        lines += _mail_lines(listed)
        _mark_seen(state_path(store.url, me.name), max(i.mail.id for i in listed))
    else:
        lines.append("Unread mail: none.")
    waiting = [
        r
        for r in await store.reviews.active()
        if me.name in r.reviewers and r.state in ("pending_review", "under_review", "re_review")
    ]
    if waiting:
        lines.append(f"Reviews waiting for you as reviewer: {len(waiting)}.")
        lines += [
            f"  {r.review_id[:8]} {r.state} from {r.requester}"
            + (f" on {r.branch}" if r.branch else "")
            + (f" (PR #{r.pr_number})" if r.pr_number is not None else "")
            for r in waiting[:SHOWN]
        ]
    available = await store.tasks.available(project_key=ctx.project)
    if available:
        lines.append(f"Tasks anyone may claim in this project: {len(available)}.")
        lines += [_task_line(t) for t in available[:SHOWN]]
    return _context("SessionStart", "\n".join(lines))


def state_path(store_url: str, identity: str) -> Path:
    """The file where ``prompt`` keeps the newest mail id it has shown to ``identity`` on the
    database ``store_url`` (under platformdirs' user state directory)."""
    key = hashlib.sha256(f"{store_url}\x1f{identity}".encode()).hexdigest()[:16]
    return platformdirs.user_state_path("ikigai_store") / "hooks" / f"{identity}-{key}.json"


def _read_mark(path: Path) -> int | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("mail_seen")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _write_mark(path: Path, mail_id: int) -> None:
    """Replace the file atomically (a temporary file in the same directory, then rename)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"mail_seen": mail_id}, f)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _mark_seen(path: Path, mail_id: int) -> None:
    """Raise the shown mark to ``mail_id`` (never lower it)."""
    seen = _read_mark(path)
    if seen is None or mail_id > seen:
        _write_mark(path, mail_id)


async def prompt(ctx: HookContext) -> dict[str, Any] | None:
    """UserPromptSubmit: the unread mail that arrived since the previous prompt or the
    session's start (when neither listed any: all unread mail), as additional context;
    nothing when there is none."""
    store, me = await ctx.store(), await ctx.identity()
    path = state_path(store.url, me.name)
    seen = _read_mark(path)
    unread = await store.mail.inbox(me, state="unread", limit=50)
    fresh = [i for i in unread if seen is None or i.mail.id > seen]
    newest = max([i.mail.id for i in unread] + [seen or 0])
    if seen is None or newest > seen:
        _write_mark(path, newest)
    if not fresh:
        return None
    lines = [f"ikigai-store: {len(fresh)} new mail for {me.name} (read them with the MCP tools):"]
    lines += _mail_lines(fresh[:SHOWN])
    if len(fresh) > SHOWN:
        lines.append(f"  … and {len(fresh) - SHOWN} more")
    return _context("UserPromptSubmit", "\n".join(lines))


async def stop(ctx: HookContext) -> dict[str, Any] | None:
    """Stop: keep the agent working while a task it claimed (in progress, owned by it) waits,
    or urgent unread mail does and no ``ikigai-store watch`` runs for it (a watcher wakes it
    when mail arrives, so it may stop); never twice in a row (``stop_hook_active``)."""
    if ctx.event.get("stop_hook_active") is True:
        return None
    store, me = await ctx.store(), await ctx.identity()
    reasons = []
    if (await store.mail.counts(me)).urgent_unread and await store.watch.watching(me) is None:
        urgent = await store.mail.inbox(me, state="unread", priority="urgent", limit=SHOWN)
        reasons.append("urgent unread mail:\n" + "\n".join(_mail_lines(urgent)))
    working = await store.tasks.owned(me, status="in_progress")
    if working:
        reasons.append(
            "tasks you claimed are still in progress (complete or release them):\n"
            + "\n".join(_task_line(t) for t in working[:SHOWN])
        )
    if not reasons:
        return None
    return {
        "decision": "block",
        "reason": f"ikigai-store: before stopping, {me.name} has " + "; and ".join(reasons),
    }


def _list_id(ctx: HookContext) -> str:
    list_id = (
        ctx.options.task_list
        or os.environ.get("CLAUDE_CODE_TASK_LIST_ID")
        or _text(ctx.event.get("session_id"))
    )
    if list_id is None:
        raise HookFailed("no task list: neither CLAUDE_CODE_TASK_LIST_ID nor session_id is set")
    return list_id


async def _ensure_list(ctx: HookContext, list_id: str) -> None:
    """The list exists (created with this identity as its owner on first use)."""
    try:
        await (await ctx.store()).tasks.get_list(list_id)
    except NotFound:
        with contextlib.suppress(Conflict):  # made by someone else meanwhile: use it
            await (await ctx.store()).tasks.create_list(list_id, owner=await ctx.identity())


async def _get_task(store: AsyncStore, list_id: str, external_id: str) -> Task | None:
    try:
        return await store.tasks.get(list_id, external_id)
    except NotFound:
        return None


async def _task_create(ctx: HookContext, list_id: str, data: Mapping[str, Any]) -> None:
    created = data.get("tool_response")
    task = created.get("task") if isinstance(created, Mapping) else None
    if not isinstance(task, Mapping) or task.get("id") is None:
        raise HookFailed("TaskCreate's tool_response has no task id")
    task_id = task["id"]
    fields = data.get("tool_input") or {}
    subject = _text(fields.get("subject")) or _text(task.get("subject"))
    metadata = fields.get("metadata")
    await (await ctx.store()).tasks.upsert(
        list_id,
        str(task_id),
        subject=subject,
        description=_text(fields.get("description")),
        active_form=_text(fields.get("activeForm")),
        metadata=metadata if isinstance(metadata, Mapping) else None,
    )


def _ids(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


async def _task_update(ctx: HookContext, list_id: str, data: Mapping[str, Any]) -> None:
    result = data.get("tool_response")
    if isinstance(result, Mapping) and result.get("success") is False:
        return  # Claude Code refused the update: nothing changed
    fields = data.get("tool_input") or {}
    task_id = fields.get("taskId")
    if task_id is None:
        raise HookFailed("TaskUpdate's tool_input has no taskId")
    key, store = str(task_id), await ctx.store()
    existing = await _get_task(store, list_id, key)
    blocked_by = None
    add = [b for b in _ids(fields.get("addBlockedBy")) if b != key]
    if add:  # blockers the mirror does not have (made before the hooks) are left out
        known = {t.external_id for t in await store.tasks.list(list_id)}
        add = [b for b in add if b in known]
    if add:
        current = list(existing.blocked_by) if existing is not None else []
        blocked_by = list(dict.fromkeys(current + add))
    metadata = fields.get("metadata")
    await store.tasks.upsert(
        list_id,
        key,
        # a task made before the hooks were installed is mirrored under a stand-in subject
        subject=_text(fields.get("subject")) or (None if existing else f"Task {key}"),
        description=_text(fields.get("description")),
        active_form=_text(fields.get("activeForm")),
        metadata=metadata if isinstance(metadata, Mapping) else None,
        status=_text(fields.get("status")),
        owner=_text(fields.get("owner")),
        blocked_by=blocked_by,
    )
    for blocked in _ids(fields.get("addBlocks")):
        other = await _get_task(store, list_id, blocked) if blocked != key else None
        if other is not None and key not in other.blocked_by:
            await store.tasks.upsert(list_id, blocked, blocked_by=[*other.blocked_by, key])


def todo_id(content: str) -> str:
    """The external id of a TodoWrite item (its text is all that names it)."""
    return _TODO_PREFIX + hashlib.sha256(content.encode()).hexdigest()[:16]


async def _todo_write(ctx: HookContext, list_id: str, data: Mapping[str, Any]) -> None:
    fields = data.get("tool_input") or {}
    todos = fields.get("todos")
    if not isinstance(todos, list):
        raise HookFailed("TodoWrite's tool_input has no todos list")
    store = await ctx.store()
    items: dict[str, Mapping[str, Any]] = {}
    for todo in todos:
        if isinstance(todo, Mapping) and _text(todo.get("content")):
            items[todo_id(todo["content"])] = todo
    async with store.transaction():
        for key, todo in items.items():
            content = " ".join(todo["content"].split())
            long = len(content) > MAX_SUBJECT_CHARS
            await store.tasks.upsert(
                list_id,
                key,
                subject=_short(content, MAX_SUBJECT_CHARS) if long else content,
                description=todo["content"] if long else None,
                active_form=_short(_text(todo.get("activeForm")) or "", MAX_SUBJECT_CHARS),
                status=_text(todo.get("status")),
            )
        others = [
            t.external_id
            for t in await store.tasks.list(list_id)
            if not t.external_id.startswith(_TODO_PREFIX)
        ]
        await store.tasks.sync(list_id, [*others, *items])


async def post_tool(ctx: HookContext) -> dict[str, Any] | None:
    """PostToolUse: mirror Claude Code's task tools (TaskCreate, TaskUpdate, the older
    TodoWrite) into the task list ``CLAUDE_CODE_TASK_LIST_ID``, else the session's id. Other
    tools: nothing. Prints nothing."""
    tool = ctx.event.get("tool_name")
    if tool not in TASK_TOOLS:
        return None
    list_id = _list_id(ctx)
    await _ensure_list(ctx, list_id)
    if tool == "TaskCreate":
        await _task_create(ctx, list_id, ctx.event)
    elif tool == "TaskUpdate":
        await _task_update(ctx, list_id, ctx.event)
    else:
        await _todo_write(ctx, list_id, ctx.event)
    return None


def _deny(reason: str) -> dict[str, Any]:
    return {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    }


def _edited_path(ctx: HookContext) -> str | None:
    fields = ctx.event.get("tool_input")
    if ctx.event.get("tool_name") not in EDIT_TOOLS or not isinstance(fields, Mapping):
        return None
    path = _text(fields.get("file_path")) or _text(fields.get("notebook_path"))
    if path is None:
        return None
    return os.path.normpath(os.path.join(ctx.cwd or ctx.project, path))


async def pre_tool(ctx: HookContext) -> dict[str, Any] | None:
    """PreToolUse on Edit, Write, MultiEdit and NotebookEdit: deny the edit while another
    identity holds a live exclusive lease covering the file; with ``--auto-reserve``, take an
    exclusive lease on a free file for this identity (refused: deny, naming the holder)."""
    path = _edited_path(ctx)
    if path is None:
        return None
    targets = {path, os.path.realpath(path)}
    store, me, team = await ctx.store(), await ctx.identity(), await ctx.team()
    # Every live file lease, not only those under the project: a glob's literal prefix (or a
    # directory above the project) may be shorter than the project's path. Live leases are few.
    held_by_team = False
    for lease in await store.leases.held(FILE_PREFIX):
        if not any(covers(lease.resource, t) for t in targets):
            continue
        if lease.holder in team:
            held_by_team = held_by_team or lease.holder != me.name
        elif lease.exclusive:
            where = "" if lease.resource == FILE_PREFIX + path else f" ({lease.resource})"
            await store.leases.wait_for(me, lease.resource)
            return _deny(
                f"{path} is reserved by {lease.holder} until "
                f"{lease.expires_at.isoformat(timespec='seconds')}{where}; ask them by mail "
                "or wait for the reservation to end (`ikigai-store watch` reports "
                f"'lease freed: {lease.resource}' when it does)"
            )
    if ctx.options.auto_reserve is not None and not held_by_team:
        try:
            await store.leases.acquire(
                me, file_resource(ctx.project, path), ttl=ctx.options.auto_reserve
            )
        except Conflict as exc:
            return _deny(f"{path} is reserved: {exc}")
    return None


#: Each hook by its command name.
HOOKS: dict[str, Callable[[HookContext], Awaitable[dict[str, Any] | None]]] = {
    "session-start": session_start,
    "prompt": prompt,
    "stop": stop,
    "post-tool": post_tool,
    "pre-tool": pre_tool,
}


# ---------------------------------------------------------------------------------- running


async def run(
    name: str,
    event: Mapping[str, Any],
    options: HookOptions,
    *,
    store: AsyncStore | Callable[[], Awaitable[AsyncStore]] | None = None,
) -> dict[str, Any] | None:
    """Run hook ``name`` (a key of ``HOOKS``) on Claude Code's ``event``: its answer, None
    when it has nothing to say. Any failure raises (``HookFailed``, the store's errors, ...):
    failing open is the caller's part. ``store``: an open store to use (left open), or a
    coroutine function giving one when the event concerns the store; else one is opened for
    this run when the event concerns the store, and closed after it."""
    async with AsyncExitStack() as stack:
        return await HOOKS[name](HookContext(event, options, stack, store=store))


def main(
    name: str,
    options: HookOptions,
    stdin: IO[str] | None = None,
    stdout: IO[str] | None = None,
    stderr: IO[str] | None = None,
) -> int:
    """Run hook ``name`` in this process on the JSON event read from ``stdin``; write its
    answer (if any) to ``stdout``; return the exit status, always 0 (a failure is one line on
    ``stderr``, and ``failopen.answer`` on ``stdout``)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    event: dict[str, Any] | None = None

    async def bounded() -> dict[str, Any] | None:
        nonlocal event
        event = parse_input(stdin.read())
        async with asyncio.timeout(options.deadline if options.deadline > 0 else None):
            return await run(name, event, options)

    try:
        answer = asyncio.run(bounded())
    except (Exception, KeyboardInterrupt) as exc:
        if isinstance(exc, TimeoutError):
            why = f"gave up after {options.deadline:g} s"
        else:
            why = str(exc) if isinstance(exc, HookFailed) else failopen.one_line(exc)
        failopen.report(name, why, stderr)
        answer = failopen.answer(name, event, why)
    write_answer(answer, stdout)
    return 0


def write_answer(answer: Mapping[str, Any] | None, stdout: IO[str]) -> None:
    """Print a hook's answer (nothing for None) as one JSON line."""
    if answer is not None:
        with contextlib.suppress(OSError):  # Claude Code stopped reading: nothing to tell
            stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
            stdout.flush()
