"""In-memory reference model of task lists, tasks and dependencies: the store's oracle.

Written from issue 10 ("Tasks") and the decisions recorded in notes/tasks-readme.md, not from
the SQL; it imports nothing from ``ikigai_store``. Everything is plain dicts, recomputed on every
read (availability is asked of the blockers each time; cycles are found by a depth-first search
of the whole list, not by the store's walk). It holds its own clock, ``now``; every time it writes
is ``now``. Ids: the store's ids are passed in when known (``id=``), else counted from 1; order is
always by id.

Identities: ``register(name, project_key=None)`` / ``retire(name)``; names match ``NAME``.

Projects: a list belongs to its owner's project (None: to no project). A ``project_key``
argument (None, or a string without NUL, else ``RefInvalid`` naming "project_key", checked
after the list id) keeps the lists of that project and those of no project (shared); None
keeps every list. ``lists(project_key)`` and ``available_tasks(list_id, project_key)`` take
it; a list of another project that exists gives ``[]``, not ``RefNotFound``.

Keys: a list id, an external id and an owner are strings of 1-200 characters without control
characters (code points below 32, and 127). An ``owner`` argument may also be ``RefIdentity``-like
(anything with a ``name``): its name. Text fields: subject and active_form at most 1000
characters, description any length; none may hold NUL.

Lists: ``create_list(list_id, owner, watch_path=None)``: arguments (list id; owner a valid
identity name; watch_path None or 1-4096 characters without NUL); then, if the list exists, the
same owner and watch_path return it unchanged (idempotent), anything else is ``RefConflict``
naming the list; a missing owner ``RefNotFound``, a retired one ``RefInvalid``. A new list has
``last_synced_at`` None. ``get_list`` (``RefNotFound``), ``all_lists(project_key=None)`` by id.

Upsert: ``upsert_task(list_id, external_id, subject, description, active_form, metadata, status,
owner, blocked_by)``. Checks in order: arguments (in that order; ``metadata`` None or a dict;
``status`` None, "" or one of ``TASK_STATUSES``; ``blocked_by`` None or a list/tuple of keys,
duplicates dropped; a task naming itself in blocked_by is ``RefInvalid`` naming it); the list
exists (``RefNotFound``); a task that does not exist needs a subject (``RefInvalid``); every
blocker names a task of the list (``RefNotFound`` naming the missing ones); the new edges close
no cycle (``RefInvalid`` naming "cycle"). A refusal changes nothing.
New task: subject, description, active_form, owner as given ("" is None), metadata the dict or
{}, status given or pending, created_at = updated_at = now, started_at = now if in_progress,
completed_at = now if completed. Existing task: every None/"" argument leaves the stored value;
metadata is merged (``stored | given``); status and owner replace when given; started_at is set
when it is None and the status given is in_progress, completed_at likewise for completed;
updated_at = now. ``blocked_by`` not None replaces the task's edges.

Completion activity: an upsert that sets a task's completed_at (its first completion: a new
task created completed, or a task whose completed_at was None upserted with status completed)
records one task_complete activity when the task's owner after the merge is a registered identity
that is not retired: (identity, list_id, external_id, subject after the merge, task id) with the
time ``now``. A free-text owner, no owner or a retired identity records none; so does any other
upsert (re-completion included). ``activities`` holds them oldest first.

Availability: pending, owner None, and every blocker (an edge that still exists: pruning removes
edges with their task) is completed or deleted. ``available_tasks(list_id=None,
project_key=None)``: by id.

Claim: ``claim_task(list_id, external_id, owner)``. Checks in order: arguments; list, then task
exists (``RefNotFound``); completed or deleted: ``RefInvalid`` naming the status; owned by
someone else: ``RefConflict`` naming the owner; in_progress without owner: ``RefInvalid``;
in_progress with this owner: returned unchanged; pending with an unfinished blocker:
``RefInvalid`` naming each unfinished blocker. Else it becomes in_progress with this owner,
started_at = now if None, updated_at = now.

Release: ``release_task(list_id, external_id, owner)``. Checks in order: arguments; list, then
task exists (``RefNotFound``); not in_progress: ``RefInvalid`` naming the status; in_progress
without owner: ``RefInvalid``; held by someone else: ``RefConflict`` naming the holder. Else it
becomes pending with owner None, updated_at = now; started_at and completed_at stay.

Stats: per status, available (as above) and blocked (pending with an unfinished blocker).
``sync_list(list_id, active)``: active a list/tuple of keys; list exists; every task of the list
not in active and not deleted becomes deleted (updated_at = now); last_synced_at = now; returns
how many. ``prune(older_than)``: a timedelta in [0, 36500 days]; deletes completed and deleted
tasks with updated_at < now - older_than, and every edge touching them; returns how many.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from tests.reference_mail import EPOCH, NAME, RefConflict, RefInvalid, RefNotFound

__all__ = ["TASK_STATUSES", "RefActivity", "RefList", "RefTask", "RefTaskWorld"]

TASK_STATUSES = ("pending", "in_progress", "completed", "deleted")
DONE = ("completed", "deleted")
MAX_KEY = 200
MAX_SUBJECT = 1000
MAX_PATH = 4096
MAX_AGE = timedelta(days=36500)


def _key(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_KEY:
        raise RefInvalid(f"bad {what} {value!r}", what)
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise RefInvalid(f"{what} has a control character", what)
    return value


def _project(value: object) -> None:
    if value is not None and (not isinstance(value, str) or "\x00" in value):
        raise RefInvalid(f"bad project_key {value!r}", "project_key")


def _text(value: object, what: str, max_chars: int | None) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or (max_chars is not None and len(value) > max_chars):
        raise RefInvalid(f"bad {what} {value!r}", what)
    if "\x00" in value:
        raise RefInvalid(f"{what} holds NUL", what)
    return value


def _ids(values: object, what: str) -> list[str]:
    if not isinstance(values, (list, tuple)):
        raise RefInvalid(f"{what} must be a list, got {values!r}", what)
    out: list[str] = []
    for v in values:
        k = _key(v, what)
        if k not in out:
            out.append(k)
    return out


@dataclass
class RefList:
    id: int
    list_id: str
    owner: str
    watch_path: str | None
    created_at: datetime
    last_synced_at: datetime | None = None

    def view(self) -> tuple[Any, ...]:
        return (
            self.id,
            self.list_id,
            self.owner,
            self.watch_path,
            self.created_at,
            self.last_synced_at,
        )


@dataclass
class RefTask:
    id: int
    list_id: str
    external_id: str
    subject: str
    description: str | None
    active_form: str | None
    metadata: dict[str, Any]
    status: str
    owner: str | None
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None


@dataclass(frozen=True)
class RefActivity:
    """One task_complete activity: who, which task (its subject then, its id), when."""

    identity: str
    list_id: str
    external_id: str
    subject: str
    task_id: int
    created_at: datetime


@dataclass
class RefTaskWorld:
    """Identities, lists, tasks and edges; ``deps[(list, task)]`` is the set of its blockers."""

    now: datetime = EPOCH
    identities: dict[str, bool] = field(default_factory=dict)  # name -> retired
    projects: dict[str, str | None] = field(default_factory=dict)  # name -> project_key
    lists: dict[str, RefList] = field(default_factory=dict)
    items: dict[tuple[str, str], RefTask] = field(default_factory=dict)
    deps: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    activities: list[RefActivity] = field(default_factory=list)
    counter: int = 0

    # -- helpers -------------------------------------------------------------------------------

    def advance(self, delta: timedelta) -> datetime:
        self.now += delta
        return self.now

    def _next(self, given: int | None) -> int:
        self.counter += 1
        return self.counter if given is None else given

    def register(self, name: str, project_key: str | None = None) -> None:
        self.identities[name] = False
        self.projects[name] = project_key

    def in_project(self, lst: RefList, project_key: object) -> bool:
        """Whether ``lst`` is kept by ``project_key`` (already checked)."""
        return project_key is None or self.projects[lst.owner] in (None, project_key)

    def retire(self, name: str) -> None:
        self.identities[name] = True

    def _list(self, list_id: object) -> RefList:
        name = _key(list_id, "list_id")
        if name not in self.lists:
            raise RefNotFound(f"no list {name!r}", name)
        return self.lists[name]

    def _task(self, lst: str, ext: str) -> RefTask:
        if (lst, ext) not in self.items:
            raise RefNotFound(f"no task {ext!r} in {lst!r}", ext)
        return self.items[(lst, ext)]

    def of_list(self, lst: str) -> list[RefTask]:
        return sorted((t for t in self.items.values() if t.list_id == lst), key=lambda t: t.id)

    def blockers(self, t: RefTask) -> list[RefTask]:
        names = self.deps.get((t.list_id, t.external_id), set())
        return sorted((self.items[(t.list_id, b)] for b in names), key=lambda b: b.id)

    def dependents(self, t: RefTask) -> list[RefTask]:
        return [
            self.items[(lst, ext)]
            for (lst, ext), names in self.deps.items()
            if lst == t.list_id and t.external_id in names
        ]

    def unfinished(self, t: RefTask) -> list[str]:
        return [b.external_id for b in self.blockers(t) if b.status not in DONE]

    def is_available(self, t: RefTask) -> bool:
        return t.status == "pending" and t.owner is None and not self.unfinished(t)

    def view(self, t: RefTask) -> tuple[Any, ...]:
        """What ``Task`` holds, field by field."""
        return (
            t.id,
            t.list_id,
            t.external_id,
            t.subject,
            t.description,
            t.active_form,
            t.metadata,
            t.status,
            t.owner,
            tuple(b.external_id for b in self.blockers(t)),
            tuple(d.external_id for d in sorted(self.dependents(t), key=lambda d: d.id)),
            t.created_at,
            t.updated_at,
            t.started_at,
            t.completed_at,
        )

    def has_cycle(self, lst: str, edges: dict[str, set[str]]) -> bool:
        """Depth-first search of a whole list's graph (``edges``: task -> its blockers)."""
        state: dict[str, int] = {}  # 1 on the stack, 2 finished

        def visit(node: str) -> bool:
            state[node] = 1
            for nxt in edges.get(node, set()):
                if state.get(nxt) == 1 or (state.get(nxt) is None and visit(nxt)):
                    return True
            state[node] = 2
            return False

        return any(state.get(n) is None and visit(n) for n in list(edges))

    def graph_with(self, lst: str, ext: str, blockers: list[str]) -> dict[str, set[str]]:
        """The list's edges with ``ext``'s replaced by ``blockers``."""
        edges = {e: set(b) for (lz, e), b in self.deps.items() if lz == lst}
        edges[ext] = set(blockers)
        return edges

    def is_cycle_path(self, lst: str, ext: str, blockers: list[str], path: list[str]) -> bool:
        """True when ``path`` (a -> b -> ... -> a) follows edges of the graph after the change,
        starting and ending at ``ext``."""
        edges = self.graph_with(lst, ext, blockers)
        return (
            len(path) >= 2
            and path[0] == path[-1] == ext
            and all(b in edges.get(a, set()) for a, b in itertools.pairwise(path))
        )

    # -- lists ---------------------------------------------------------------------------------

    def create_list(
        self, list_id: object, owner: object, watch_path: object = None, *, id: int | None = None
    ) -> RefList:
        name = _key(list_id, "list_id")
        if not isinstance(owner, str) or not NAME.fullmatch(owner):
            raise RefInvalid(f"bad owner {owner!r}", "owner")
        if watch_path is not None and (
            not isinstance(watch_path, str)
            or not watch_path
            or len(watch_path) > MAX_PATH
            or "\x00" in watch_path
        ):
            raise RefInvalid(f"bad watch_path {watch_path!r}", "watch_path")
        if name in self.lists:
            found = self.lists[name]
            if (found.owner, found.watch_path) == (owner, watch_path):
                return found
            raise RefConflict(f"list {name!r} exists", name)
        if owner not in self.identities:
            raise RefNotFound(f"no identity {owner!r}", owner)
        if self.identities[owner]:
            raise RefInvalid(f"{owner!r} is retired", owner, "retired")
        made = RefList(self._next(id), name, owner, watch_path, self.now)
        self.lists[name] = made
        return made

    def get_list(self, list_id: object) -> RefList:
        return self._list(list_id)

    def all_lists(self, project_key: object = None) -> list[RefList]:
        _project(project_key)
        kept = [x for x in self.lists.values() if self.in_project(x, project_key)]
        return sorted(kept, key=lambda x: x.id)

    # -- tasks ---------------------------------------------------------------------------------

    def upsert_task(
        self,
        list_id: object,
        external_id: object,
        subject: object = None,
        description: object = None,
        active_form: object = None,
        metadata: object = None,
        status: object = None,
        owner: object = None,
        blocked_by: object = None,
        *,
        id: int | None = None,
    ) -> RefTask:
        lst = _key(list_id, "list_id")
        ext = _key(external_id, "external_id")
        subj = _text(subject, "subject", MAX_SUBJECT)
        desc = _text(description, "description", None)
        form = _text(active_form, "active_form", MAX_SUBJECT)
        if metadata is not None and not isinstance(metadata, dict):
            raise RefInvalid(f"metadata must be a dict, got {metadata!r}", "metadata")
        state = None if status in (None, "") else status
        if state is not None and state not in TASK_STATUSES:
            raise RefInvalid(f"bad status {status!r}", "status")
        if owner is not None and not isinstance(owner, str):
            owner = getattr(owner, "name", owner)
        who = None if owner in (None, "") else _key(owner, "owner")
        blockers = None if blocked_by is None else _ids(blocked_by, "blocked_by")
        if blockers is not None and ext in blockers:
            raise RefInvalid(f"{ext!r} blocked by itself", ext, "itself")
        self._list(lst)
        existing = self.items.get((lst, ext))
        if existing is None and subj is None:
            raise RefInvalid(f"new task {ext!r} needs a subject", ext, "subject")
        if blockers:
            missing = sorted(b for b in blockers if (lst, b) not in self.items)
            if missing:
                raise RefNotFound(f"no blockers {missing}", *missing)
            if self.has_cycle(lst, self.graph_with(lst, ext, blockers)):
                raise RefInvalid(f"{ext!r} would close a cycle", "cycle", ext)
        first_completion = state == "completed" and (
            existing is None or existing.completed_at is None
        )
        if existing is None:
            task = RefTask(
                id=self._next(id),
                list_id=lst,
                external_id=ext,
                subject=str(subj),
                description=desc,
                active_form=form,
                metadata=dict(metadata) if isinstance(metadata, dict) else {},
                status=state or "pending",
                owner=who,
                created_at=self.now,
                updated_at=self.now,
                started_at=self.now if state == "in_progress" else None,
                completed_at=self.now if state == "completed" else None,
            )
            self.items[(lst, ext)] = task
        else:
            task = existing
            task.subject = subj if subj is not None else task.subject
            task.description = desc if desc is not None else task.description
            task.active_form = form if form is not None else task.active_form
            if isinstance(metadata, dict):
                task.metadata = {**task.metadata, **metadata}
            if state is not None:
                task.status = state
                if state == "in_progress" and task.started_at is None:
                    task.started_at = self.now
                if state == "completed" and task.completed_at is None:
                    task.completed_at = self.now
            task.owner = who if who is not None else task.owner
            task.updated_at = self.now
        if blockers is not None:
            if blockers:
                self.deps[(lst, ext)] = set(blockers)
            else:
                self.deps.pop((lst, ext), None)
        if first_completion and task.owner is not None and self.identities.get(task.owner) is False:
            self.activities.append(
                RefActivity(task.owner, lst, ext, task.subject, task.id, self.now)
            )
        return task

    def get_task(self, list_id: object, external_id: object) -> RefTask:
        lst = _key(list_id, "list_id")
        ext = _key(external_id, "external_id")
        self._list(lst)
        return self._task(lst, ext)

    def tasks(self, list_id: object, status: object = None) -> list[RefTask]:
        lst = _key(list_id, "list_id")
        if status is not None and status not in TASK_STATUSES:
            raise RefInvalid(f"bad status {status!r}", "status")
        self._list(lst)
        return [t for t in self.of_list(lst) if status is None or t.status == status]

    def available_tasks(self, list_id: object = None, project_key: object = None) -> list[RefTask]:
        if list_id is None:
            _project(project_key)
            pool = sorted(self.items.values(), key=lambda t: t.id)
        else:
            name = _key(list_id, "list_id")
            _project(project_key)
            pool = self.of_list(self._list(name).list_id)
        return [
            t
            for t in pool
            if self.is_available(t) and self.in_project(self.lists[t.list_id], project_key)
        ]

    def claim_task(self, list_id: object, external_id: object, owner: object) -> RefTask:
        lst = _key(list_id, "list_id")
        ext = _key(external_id, "external_id")
        if owner is not None and not isinstance(owner, str):
            owner = getattr(owner, "name", owner)
        who = _key(owner, "owner")
        self._list(lst)
        task = self._task(lst, ext)
        if task.status in DONE:
            raise RefInvalid(f"{ext!r} is {task.status}", ext, task.status)
        if task.owner is not None and task.owner != who:
            raise RefConflict(f"{ext!r} is held by {task.owner!r}", ext, task.owner)
        if task.status == "in_progress":
            if task.owner is None:
                raise RefInvalid(f"{ext!r} is in_progress without an owner", ext, "in_progress")
            return task
        waiting = self.unfinished(task)
        if waiting:
            raise RefInvalid(f"{ext!r} is blocked by {waiting}", ext, "blocked", *waiting)
        task.status, task.owner = "in_progress", who
        task.started_at = task.started_at or self.now
        task.updated_at = self.now
        return task

    def release_task(self, list_id: object, external_id: object, owner: object) -> RefTask:
        lst = _key(list_id, "list_id")
        ext = _key(external_id, "external_id")
        if owner is not None and not isinstance(owner, str):
            owner = getattr(owner, "name", owner)
        who = _key(owner, "owner")
        self._list(lst)
        task = self._task(lst, ext)
        if task.status != "in_progress":
            raise RefInvalid(f"{ext!r} is {task.status}", ext, task.status)
        if task.owner is None:
            raise RefInvalid(f"{ext!r} is in_progress without an owner", ext, "without an owner")
        if task.owner != who:
            raise RefConflict(f"{ext!r} is held by {task.owner!r}", ext, task.owner)
        task.status, task.owner = "pending", None
        task.updated_at = self.now
        return task

    def task_stats(self, list_id: object = None) -> tuple[int, ...]:
        """(total, pending, in_progress, completed, deleted, available, blocked)."""
        if list_id is None:
            pool = list(self.items.values())
        else:
            pool = self.of_list(self._list(list_id).list_id)
        per = [sum(t.status == s for t in pool) for s in TASK_STATUSES]
        available = sum(self.is_available(t) for t in pool)
        blocked = sum(t.status == "pending" and bool(self.unfinished(t)) for t in pool)
        return (len(pool), *per, available, blocked)

    def sync_list(self, list_id: object, active: object) -> int:
        lst = _key(list_id, "list_id")
        keep = _ids(active, "active_external_ids")
        the_list = self._list(lst)
        count = 0
        for t in self.of_list(lst):
            if t.external_id not in keep and t.status != "deleted":
                t.status, t.updated_at = "deleted", self.now
                count += 1
        the_list.last_synced_at = self.now
        return count

    def prune(self, older_than: object) -> int:
        if not isinstance(older_than, timedelta) or not timedelta(0) <= older_than <= MAX_AGE:
            raise RefInvalid(f"bad older_than {older_than!r}", "older_than")
        gone = [
            key
            for key, t in self.items.items()
            if t.status in DONE and t.updated_at < self.now - older_than
        ]
        for key in gone:
            del self.items[key]
            self.deps.pop(key, None)
        for (lst, _), names in self.deps.items():
            names.difference_update(ext for (lz, ext) in gone if lz == lst)
        self.deps = {k: v for k, v in self.deps.items() if v}
        return len(gone)

    def check(self) -> None:
        """The model's own invariants: edges join existing tasks of one list; no cycle."""
        for (lst, ext), names in self.deps.items():
            assert (lst, ext) in self.items and names
            assert all((lst, b) in self.items and b != ext for b in names)
        for lst in self.lists:
            edges = {e: set(b) for (lz, e), b in self.deps.items() if lz == lst}
            assert not self.has_cycle(lst, edges)
