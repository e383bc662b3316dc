"""Tasks: lists of tasks with dependencies, guarded claims, and the mirror of an external task
list (seed 004's task_lists and agent_tasks, e.g. Claude Code's task lists), wired.

Owns task lists, tasks, their dependency edges (``task_deps``), claims and releases, the
``task_complete`` activity, counts, syncing and pruning, for both faces (see ``ops``).
Invariants:
- a list's ``list_id`` is unique and its owner is an identity (not retired when the list is
  made); a task's ``external_id`` is unique in its list;
- ``upsert_task`` never erases: a None or empty text argument (subject, description,
  active_form, status, owner) leaves the stored value; ``metadata`` is merged into the stored
  object (top-level keys given win, others stay); ``started_at`` is set the first time the
  task becomes in_progress, ``completed_at`` the first time it becomes completed, and neither
  changes after; a new task needs a subject; an upsert mirrors a source that is the truth, so
  it may set any status or owner (``claim_task`` is the guarded path); the owner is free text
  (an agent's name as the source writes it), not an identity;
- dependencies are rows, "task is blocked by blocker", both in the same list; ``blocked_by``
  given replaces a task's dependencies (``[]`` clears them, None leaves them); every blocker
  must name a task of the list (``NotFound`` otherwise: no placeholder tasks are invented);
- the dependency graph of a list never has a cycle: dependency changes of a list hold its
  row's lock until commit and are checked against every committed edge before anything is
  written, so two racing changes that would each close half of a cycle cannot both succeed;
  a refused upsert writes nothing (the task, its fields and its edges are one transaction);
- a task is *available* when it is pending, unowned, and each of its blockers is completed
  or deleted (a pruned blocker is gone with its edges, so it blocks nothing either);
- ``claim_task`` is one guarded UPDATE (pending, unowned or already the claimant's, nothing
  blocking): of racing claimers exactly one wins; the others get ``Conflict`` naming the
  owner; a task that cannot be claimed by anyone now is ``InvalidArgument`` saying why;
- ``release_task`` is one guarded UPDATE too (in_progress and held by the releaser): the task
  becomes pending and unowned, ``started_at`` stays; another holder is ``Conflict`` naming
  it, a task not in progress ``InvalidArgument``;
- a task's first completion (the upsert that sets ``completed_at``) writes exactly one
  ``task_complete`` activity, in the same statement, when its owner after the merge is the
  name of an identity that is not retired; a free-text owner (or none, or a retired identity)
  writes none, and so do a re-upsert of a completed task and a reopened task completed again
  (``completed_at`` is set once). Whether a completion is the first is decided on the locked,
  newest row version, so racing completers write one activity between them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from .errors import Conflict, InvalidArgument, NotFound
from .models import TASK_STATUSES, Identity, Task, TaskList, TaskStats
from .ops import Area, FaceT, Op, atomic, many, one, operation
from .validate import (
    MAX_KEY_CHARS,
    MAX_SUBJECT_CHARS,
    check_choice,
    check_content,
    check_duration,
    check_key,
    check_str,
    check_text,
    dump_json,
    identity_name,
    require,
)

__all__ = [
    "MAX_BLOCKERS",
    "MAX_KEY_CHARS",
    "MAX_SYNC_IDS",
    "available_tasks",
    "claim_task",
    "create_list",
    "get_list",
    "get_task",
    "list_key",
    "lists",
    "owned_tasks",
    "prune",
    "release_task",
    "sync_list",
    "task_stats",
    "tasks",
    "upsert_task",
]

#: Most blockers one task may have.
MAX_BLOCKERS = 10_000
#: Most external ids ``sync_list`` accepts as active.
MAX_SYNC_IDS = 100_000
_MAX_PATH_CHARS = 4096
#: How often claim_task tries again when the task became claimable while it looked for why not.
_RACE_RETRIES = 3
_DONE = ("completed", "deleted")


# ---------------------------------------------------------------- validation


def _check_key(value: object, what: str) -> str:
    """A list id, external id or owner: 1-200 characters, no control characters."""
    text = check_key(value, what)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidArgument(f"{what} must not contain control characters, got {text!r}")
    return text


def list_key(value: object) -> str:
    """The public id of a list given as its id or a ``TaskList``; ``InvalidArgument``
    otherwise."""
    if isinstance(value, TaskList):
        return value.list_id
    return _check_key(value, "list_id")


def _owner(value: object, what: str = "owner") -> str:
    """A task owner: free text (an agent's name), or an ``Identity`` (its name)."""
    if isinstance(value, Identity):
        return value.name
    return _check_key(value, what)


def _optional(value: object, what: str, *, max_chars: int | None) -> str | None:
    """None for None or ''; else a string (at most ``max_chars``, or ``check_content``)."""
    if value is None or value == "":
        return None
    if max_chars is None:
        if not isinstance(value, str):
            raise InvalidArgument(f"{what} must be a string or None, got {type(value).__name__}")
        check_content(value, what)
        return value
    return check_str(value, what, max_chars=max_chars)


def _external_ids(values: object, what: str, limit: int) -> list[str]:
    """A collection of external ids (not one string), each checked, duplicates dropped."""
    if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{what} must be a list of external ids, got {type(values).__name__}")
    items = list(values)
    if len(items) > limit:
        raise InvalidArgument(f"{what} has {len(items)} ids; at most {limit}")
    return list(dict.fromkeys(_check_key(item, f"an id in {what}") for item in items))


def _list_missing(name: str) -> NotFound:
    return NotFound(f"task list {name!r} does not exist")


def _require_list(name: str) -> Op[TaskList]:
    row = yield one("task_get_list", list_id=name)
    if row is None:
        raise _list_missing(name)
    return TaskList.from_row(row)


# ---------------------------------------------------------------- lists


def create_list(
    list_id: str, owner: str | Identity, *, watch_path: str | None = None
) -> Op[TaskList]:
    """Create a list owned by an identity. The same request again returns the existing list
    (a retry is harmless); ``list_id`` taken with another owner or watch_path is
    ``Conflict``; a missing owner ``NotFound``, a retired one ``InvalidArgument``."""
    name = list_key(list_id)
    owner_name = identity_name(owner, "owner")
    if watch_path is not None:
        check_str(watch_path, "watch_path", max_chars=_MAX_PATH_CHARS)
    row = yield one("task_create_list", list_id=name, owner=owner_name, watch_path=watch_path)
    if row is not None:
        return TaskList.from_row(row)
    existing = yield one("task_get_list", list_id=name)
    if existing is not None:
        found = TaskList.from_row(existing)
        if (found.owner, found.watch_path) == (owner_name, watch_path):
            return found  # the same request again (e.g. a retry): idempotent
        raise Conflict(
            f"task list {name!r} already exists (owner {found.owner!r}, watch_path "
            f"{found.watch_path!r})",
            constraint="task_lists_list_id_key",
            sqlstate=None,
        )
    identity = yield from require(owner_name)
    raise InvalidArgument(f"identity {identity.name!r} is retired: it cannot own a new list")


def get_list(list_id: str | TaskList) -> Op[TaskList]:
    """One list; ``NotFound`` if there is none with that id."""
    return (yield from _require_list(list_key(list_id)))


def lists(*, project_key: str | None = None) -> Op[list[TaskList]]:
    """Every list, oldest first. With ``project_key``: only that project's lists and those of
    no project (a list belongs to its owner's project: the identity's ``project_key``)."""
    check_text(project_key, "project_key")
    rows = yield many("task_all_lists", project_key=project_key)
    return [TaskList.from_row(r) for r in rows]


# ---------------------------------------------------------------- tasks


@atomic
def upsert_task(
    list_id: str | TaskList,
    external_id: str,
    *,
    subject: str | None = None,
    description: str | None = None,
    active_form: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    status: str | None = None,
    owner: str | Identity | None = None,
    blocked_by: Sequence[str] | None = None,
) -> Op[Task]:
    """Create or update task ``external_id`` of a list and return it (completion is
    ``status="completed"``).

    Merge rules (an upsert never erases): None or ``""`` leaves a text field, the status or
    the owner as stored; ``metadata`` (a dict) is merged into the stored object, its
    top-level keys winning; ``started_at`` / ``completed_at`` are set the first time the
    task becomes in_progress / completed and never change after. A new task needs a
    ``subject``. ``blocked_by`` (external ids of tasks of the same list) replaces the
    task's dependencies: ``[]`` clears them, None leaves them.

    The task's first completion (the upsert that sets ``completed_at``) writes a
    ``task_complete`` activity in the same statement when its owner, after the merge, is
    the name of an identity that is not retired (``store.activities.feed``); a free-text
    owner writes none, and neither does completing an already completed or a reopened
    task again.

    Refused, writing nothing: bad arguments, a new task without a subject, a dependency on
    itself or one that would close a cycle (``InvalidArgument`` naming the cycle's path);
    a missing list or a blocker that names no task of the list (``NotFound``).
    """
    name = list_key(list_id)
    key = _check_key(external_id, "external_id")
    subject_text = _optional(subject, "subject", max_chars=MAX_SUBJECT_CHARS)
    description_text = _optional(description, "description", max_chars=None)
    form = _optional(active_form, "active_form", max_chars=MAX_SUBJECT_CHARS)
    if metadata is not None and not isinstance(metadata, Mapping):
        raise InvalidArgument(
            f"metadata must be a JSON object (a dict) or None, got {type(metadata).__name__}"
        )
    metadata_json = dump_json(None if metadata is None else dict(metadata), "metadata")
    state = (
        None if status is None or status == "" else check_choice(status, "status", TASK_STATUSES)
    )
    owner_name = None if owner is None or owner == "" else _owner(owner)
    blockers = None if blocked_by is None else _external_ids(blocked_by, "blocked_by", MAX_BLOCKERS)
    if blockers is not None and key in blockers:
        raise InvalidArgument(
            f"task {key!r} cannot be blocked by itself (a dependency cycle: {key} -> {key})"
        )
    blocker_ids: list[int] = []
    if blockers:
        # Under the list's lock (held to commit), so the check below sees every committed edge
        # and no other dependency change of this list can slip in before this one commits.
        locked = yield one("task_lock_list", list_id=name)
        if locked is None:
            raise _list_missing(name)
        check = yield one(
            "task_dependency_check", list_pk=locked["id"], external_id=key, blocked_by=blockers
        )
        if check["task_id"] is None and subject_text is None:
            raise _needs_subject(name, key)
        if check["missing"]:
            raise NotFound(
                f"blocked_by names no task of list {name!r}: {', '.join(check['missing'])} "
                "(create the blockers first)"
            )
        if check["cycle"]:
            path = " -> ".join([key, *check["cycle"]])
            raise InvalidArgument(
                f"blocked_by would close a dependency cycle in list {name!r}: {path} "
                "(each is blocked by the next); nothing was written"
            )
        blocker_ids = list(check["blocker_ids"])
    for _ in range(_RACE_RETRIES):
        row = yield one(
            "task_upsert",
            list_id=name,
            external_id=key,
            subject=subject_text,
            description=description_text,
            active_form=form,
            metadata=metadata_json,
            status=state,
            owner=owner_name,
            replace_deps=blockers is not None,
            blocker_ids=blocker_ids,
        )
        if row is not None:
            break
        # No row: the list is missing, or (completing) a racing creator committed the task
        # after this statement's snapshot; it wrote nothing, and the next snapshot sees the row.
        yield from _require_list(name)
    else:
        raise Conflict(
            f"task {key!r} of list {name!r} kept changing while it was being completed; try again",
            constraint="task_owner",
            sqlstate=None,
        )
    if row["inserted"] and subject_text is None:
        raise _needs_subject(name, key)  # raised inside the transaction: the row is rolled back
    return Task.from_row(row)


def _needs_subject(name: str, key: str) -> InvalidArgument:
    return InvalidArgument(
        f"task {key!r} does not exist in list {name!r}: a new task needs a subject"
    )


def get_task(list_id: str | TaskList, external_id: str) -> Op[Task]:
    """One task; ``NotFound`` when the list or the task does not exist."""
    name = list_key(list_id)
    key = _check_key(external_id, "external_id")
    row = yield one("task_get", list_id=name, external_id=key)
    if row is None:
        yield from _require_list(name)
        raise NotFound(f"task {key!r} does not exist in list {name!r}")
    return Task.from_row(row)


def tasks(list_id: str | TaskList, *, status: str | None = None) -> Op[list[Task]]:
    """A list's tasks in creation (id) order, all of them or those with ``status``."""
    name = list_key(list_id)
    if status is not None:
        check_choice(status, "status", TASK_STATUSES)
    rows = yield many("task_list_tasks", list_id=name, status=status)
    if not rows:
        yield from _require_list(name)
    return [Task.from_row(r) for r in rows]


def available_tasks(
    list_id: str | TaskList | None = None, *, project_key: str | None = None
) -> Op[list[Task]]:
    """The tasks anyone may claim now, in id order: pending, unowned, and each blocker
    completed or deleted. ``list_id`` None: over every list. ``project_key``: only in that
    project's lists and those of no project, as ``lists`` keeps them (a list of another
    project gives ``[]``)."""
    name = None if list_id is None else list_key(list_id)
    check_text(project_key, "project_key")
    if name is None:
        rows = yield many("task_available_all", project_key=project_key)
    else:
        rows = yield many("task_available_in_list", list_id=name, project_key=project_key)
        if not rows:
            yield from _require_list(name)
    return [Task.from_row(r) for r in rows]


def owned_tasks(owner: str | Identity, *, status: str | None = None) -> Op[list[Task]]:
    """The tasks of every list held by ``owner`` (an identity, or the free text a source
    wrote), in id order: all of them, or those with ``status`` (``"in_progress"``: what it is
    working on now)."""
    holder = _owner(owner)
    if status is not None:
        check_choice(status, "status", TASK_STATUSES)
    rows = yield many("task_owned", owner=holder, status=status)
    return [Task.from_row(r) for r in rows]


def claim_task(list_id: str | TaskList, external_id: str, owner: str | Identity) -> Op[Task]:
    """Make a task in_progress with ``owner``, in one guarded statement: only when it is
    pending, unowned (or assigned to ``owner``) and nothing blocks it. Of racing claimers
    exactly one wins; claiming a task one already holds returns it unchanged.

    Refusals: another owner holds it (``Conflict`` naming the owner); it is completed,
    deleted, in_progress without an owner, or blocked (``InvalidArgument`` saying which,
    and by what); the list or the task does not exist (``NotFound``).
    """
    name = list_key(list_id)
    key = _check_key(external_id, "external_id")
    claimant = _owner(owner)
    for _ in range(_RACE_RETRIES):
        row = yield one("task_claim", list_id=name, external_id=key, owner=claimant)
        if row is not None:
            return Task.from_row(row)
        why = yield one("task_claim_refusal", list_id=name, external_id=key)
        if why["list_pk"] is None:
            raise _list_missing(name)
        if why["task_id"] is None:
            raise NotFound(f"task {key!r} does not exist in list {name!r}")
        status, holder = why["status"], why["owner"]
        if status in _DONE:
            raise InvalidArgument(
                f"task {key!r} of list {name!r} is {status}: only a pending task can be claimed"
            )
        if holder is not None and holder != claimant:
            raise Conflict(
                f"task {key!r} of list {name!r} is held by {holder!r} ({status})",
                constraint="task_owner",
                sqlstate=None,
            )
        if status == "in_progress":
            if holder is None:
                raise InvalidArgument(
                    f"task {key!r} of list {name!r} is in_progress without an owner: only a "
                    "pending task can be claimed"
                )
            got = yield one("task_get", list_id=name, external_id=key)
            if got is not None:
                return Task.from_row(got)  # already the claimant's: claiming again is a no-op
            continue
        if why["waiting_on"]:
            raise InvalidArgument(
                f"task {key!r} of list {name!r} is blocked by {', '.join(why['waiting_on'])} "
                "(neither completed nor deleted)"
            )
        # Claimable now: it changed between the two statements; try again.
    raise Conflict(
        f"task {key!r} of list {name!r} kept changing while it was being claimed; try again",
        constraint="task_owner",
        sqlstate=None,
    )


def release_task(list_id: str | TaskList, external_id: str, owner: str | Identity) -> Op[Task]:
    """Give back an in_progress task held by ``owner`` (e.g. for an agent that died), in
    one guarded statement: it becomes pending and unowned, available again once nothing
    blocks it; ``started_at`` keeps the first start.

    Refusals: another owner holds it (``Conflict`` naming the holder); it is not in
    progress, or in progress without an owner (``InvalidArgument``); the list or the task
    does not exist (``NotFound``). Releasing twice is refused the second time (the task is
    pending by then).
    """
    name = list_key(list_id)
    key = _check_key(external_id, "external_id")
    holder_name = _owner(owner)
    for _ in range(_RACE_RETRIES):
        row = yield one("task_release", list_id=name, external_id=key, owner=holder_name)
        if row is not None:
            return Task.from_row(row)
        why = yield one("task_claim_refusal", list_id=name, external_id=key)
        _refuse_unless_held(why, name, key, holder_name, "release")
        # Releasable now: it changed between the two statements; try again.
    raise Conflict(
        f"task {key!r} of list {name!r} kept changing while it was being released; try again",
        constraint="task_owner",
        sqlstate=None,
    )


def _refuse_unless_held(
    why: dict[str, Any], name: str, key: str, holder_name: str, verb: str
) -> None:
    """Raise why the task (``task_claim_refusal``'s row) is not an in_progress task held by
    ``holder_name``, the only task its holder can ``verb``; return when it is."""
    if why["list_pk"] is None:
        raise _list_missing(name)
    if why["task_id"] is None:
        raise NotFound(f"task {key!r} does not exist in list {name!r}")
    status, holder = why["status"], why["owner"]
    if status != "in_progress":
        raise InvalidArgument(
            f"task {key!r} of list {name!r} is {status}: only an in_progress task can be {verb}d"
        )
    if holder is None:
        raise InvalidArgument(
            f"task {key!r} of list {name!r} is in_progress without an owner: there is no "
            f"holder to {verb} it"
        )
    if holder != holder_name:
        raise Conflict(
            f"task {key!r} of list {name!r} is held by {holder!r}, not {holder_name!r}: "
            f"only its holder can {verb} it",
            constraint="task_owner",
            sqlstate=None,
        )


@atomic
def complete_task(list_id: str | TaskList, external_id: str, owner: str | Identity) -> Op[Task]:
    """Complete an in_progress task held by ``owner`` (the holder finishing its claim):
    ``upsert(..., status="completed")`` with the holder checked under the task's row lock,
    so no claim or release slips in between. The first completion writes its
    ``task_complete`` activity, as ``upsert`` does.

    Refusals (nothing written): another owner holds it (``Conflict`` naming the holder); it
    is not in progress, or in progress without an owner (``InvalidArgument``); the list or
    the task does not exist (``NotFound``).
    """
    name = list_key(list_id)
    key = _check_key(external_id, "external_id")
    holder_name = _owner(owner)
    why = yield one("task_lock_task", list_id=name, external_id=key)
    _refuse_unless_held(why, name, key, holder_name, "complete")
    return (yield from upsert_task(name, key, status="completed"))


def task_stats(list_id: str | TaskList | None = None) -> Op[TaskStats]:
    """Counts per status, available and blocked, in one query (``list_id`` None: every
    list)."""
    if list_id is None:
        row = yield one("task_stats_all")
    else:
        name = list_key(list_id)
        row = yield one("task_stats_in_list", list_id=name)
        if row["list_pk"] is None:
            raise _list_missing(name)
    return TaskStats.from_row(row)


def sync_list(list_id: str | TaskList, active_external_ids: Iterable[str]) -> Op[int]:
    """Mirror the source of a list: every task not named in ``active_external_ids`` (and
    not deleted yet) becomes deleted, and ``last_synced_at`` is set; return how many were
    deleted. Names of tasks that do not exist are ignored."""
    name = list_key(list_id)
    active = _external_ids(active_external_ids, "active_external_ids", MAX_SYNC_IDS)
    row = yield one("task_sync_list", list_id=name, active=active)
    if row["list_pk"] is None:
        raise _list_missing(name)
    return int(row["deleted"])


def prune(*, older_than: timedelta | float) -> Op[int]:
    """Delete the completed and deleted tasks (of every list) last updated more than
    ``older_than`` (a timedelta or seconds) ago, with their dependency edges; return how
    many. A pruned blocker blocks nothing, as it did not while completed or deleted."""
    age = check_duration(older_than, "older_than")
    row = yield one("task_prune", older_than=age)
    return int(row["deleted"])


class TaskCalls(Area[FaceT]):
    """``store.tasks``: task lists, tasks with dependencies, claims and releases, counts,
    syncing and pruning (see ``ikigai_store.tasks``). A list may be passed by its ``list_id``
    or as a ``TaskList``; a task is named by its list and its ``external_id`` there."""

    create_list = operation(create_list)
    get_list = operation(get_list)
    lists = operation(lists)
    upsert = operation(upsert_task)
    get = operation(get_task)
    list = operation(tasks)
    available = operation(available_tasks)
    owned = operation(owned_tasks)
    claim = operation(claim_task)
    release = operation(release_task)
    complete = operation(complete_task)
    stats = operation(task_stats)
    sync = operation(sync_list)
    prune = operation(prune)
