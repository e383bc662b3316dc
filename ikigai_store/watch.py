"""Watching an identity: what concerns it, reported as it commits (``ikigai-store watch``).

Owns starting a watcher (one per identity, held by a lease), finding what is new for it
(``next``: unread mail, tasks it may claim, waited resources that became free) and keeping what
it reported (``save``), for both faces (see ``ops``). Review and plan events reach their
audience as mail (``post_mail``), so they are mail notices here, named by their metadata.
Invariants:
- ``next`` never polls: it listens (``notify``) for the identity's mail, for every task change
  and for the lease changes of the holders it waits behind, before it looks; without a
  notification it sleeps until its timeout, the next snooze wake-up or the next expiry of a
  lease it waits behind (an expiry notifies nobody);
- a notice is new when ``seen`` does not hold it: ``seen`` holds what the watcher reported that
  is still pending, so a mail read and marked unread again, or a task released, is reported
  again, and nothing is reported twice while it stays pending; the database's copy
  (``watchers``) lets a restarted watcher go on where the last one stopped;
- at most ``MAX_SHOWN`` notices of one kind per batch: the rest are one summary notice (and
  count as reported);
- one watcher per identity: ``start`` takes the exclusive lease ``watch:<name>`` under an
  advisory lock, refusing (``Conflict``) while a live one exists, even the identity's own;
- agent-written text (subjects, names of resources) is reported on one line: whitespace and
  control characters collapsed, cut to ``MAX_TEXT`` characters.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from .errors import Conflict, InvalidArgument, NotFound
from .leases import acquire, check_ttl
from .models import Identity, Lease, Notice, Seen, Watch, WatchBatch
from .notify import ANY, LEASE, MAIL, TASK
from .ops import Area, FaceT, Listen, Op, Sleep, atomic, many, one, operation, statement
from .validate import check_duration, identity_name

__all__ = [
    "MAX_SHOWN",
    "MAX_TEXT",
    "MAX_WAIT",
    "NOTHING_SEEN",
    "PREFIX",
    "TTL",
    "WatchCalls",
    "next_batch",
    "save",
    "start",
    "watching",
]

#: The lease a watcher holds: ``watch:<identity name>``.
PREFIX = "watch:"
#: How long a watcher's lease lasts unless renewed (renew it every third of it).
TTL = timedelta(seconds=15)
#: The longest ``next`` waits.
MAX_WAIT = timedelta(days=1)
#: Notices of one kind in one batch; the rest are summed up in one notice.
MAX_SHOWN = 20
#: Characters of agent-written text in a notice's line.
MAX_TEXT = 200
#: A watcher that has reported nothing yet.
NOTHING_SEEN = Seen()


def _line(text: object) -> str:
    """``text`` on one line: whitespace and control characters collapsed, cut to MAX_TEXT."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return flat if len(flat) <= MAX_TEXT else flat[: MAX_TEXT - 1] + "…"


def _target(name: str) -> Op[int]:
    """The id of the identity ``name``: ``NotFound`` when missing, ``InvalidArgument`` when
    retired."""
    row = yield one("watch_target", identity=name)
    if row is None:
        raise NotFound(f"identity {name!r} does not exist")
    if row["state"] == "retired":
        raise InvalidArgument(f"identity {name!r} is retired: it cannot be watched")
    return int(row["id"])


def watching(identity: str | Identity) -> Op[Lease | None]:
    """The live lease of the watcher of ``identity`` (``watch:<name>``), None when no watcher
    runs."""
    resource = PREFIX + identity_name(identity)
    rows = yield many("leases_held", prefix=resource, holder=None)
    return next((Lease.from_row(r) for r in rows if r["resource"] == resource), None)


@atomic
def start(identity: str | Identity, *, ttl: timedelta | float = TTL) -> Op[Watch]:
    """Start watching ``identity``: take the lease ``watch:<name>`` for ``ttl`` (renew it with
    ``store.leases.renew`` every third of it, release it when done) and read what its earlier
    watchers reported. ``Conflict`` naming the lease while another watcher (a live lease) has
    it; ``NotFound``/``InvalidArgument`` for a missing or retired identity."""
    name = identity_name(identity)
    length = check_ttl(ttl)
    identity_id = yield from _target(name)
    yield one("watch_lock", identity=name)
    running = yield from watching(name)
    if running is not None:
        raise Conflict(
            f"{name} is already watched: another `ikigai-store watch` holds {running.resource} "
            f"(since {running.acquired_at.isoformat(timespec='seconds')}, until "
            f"{running.expires_at.isoformat(timespec='seconds')} unless renewed); stop it "
            "first, one watcher per identity",
            constraint=None,
            sqlstate=None,
        )
    lease = yield from acquire(name, PREFIX + name, ttl=length)
    row = yield one("watch_seen", identity_id=identity_id)
    seen = Seen() if row is None else Seen(frozenset(row["mail"]), frozenset(row["tasks"]))
    return Watch(name, lease, seen)


def _mail_notice(row: Mapping[str, Any]) -> Notice:
    meta = row["metadata"] if isinstance(row["metadata"], Mapping) else {}
    about = ""
    if meta.get("review_id"):
        about = f" (review {str(meta['review_id'])[:8]})"
    elif meta.get("plan_review_id"):
        about = f" (plan {str(meta['plan_review_id'])[:8]})"
    text = (
        f"mail #{row['id']} from {row['sender']} [{row['priority']}]: "
        f"{_line(row['subject'])}{about}"
    )
    detail = {
        "kind": "mail",
        "id": row["id"],
        "thread_id": row["thread_id"],
        "sender": row["sender"],
        "priority": row["priority"],
        "subject": row["subject"],
        "review_id": meta.get("review_id"),
        "plan_review_id": meta.get("plan_review_id"),
    }
    return Notice("mail", int(row["id"]), text, detail)


def _task_notice(row: Mapping[str, Any]) -> Notice:
    text = (
        f"task {_line(row['list_id'])}/{_line(row['external_id'])} is available: "
        f"{_line(row['subject'])}"
    )
    detail = {
        "kind": "task",
        "id": row["id"],
        "list_id": row["list_id"],
        "external_id": row["external_id"],
        "subject": row["subject"],
    }
    return Notice("task", int(row["id"]), text, detail)


def _lease_notice(resource: str) -> Notice:
    return Notice(
        "lease", None, f"lease freed: {_line(resource)}", {"kind": "lease", "resource": resource}
    )


def _new(
    kind: str,
    rows: Sequence[Mapping[str, Any]],
    seen: frozenset[Any],
    key: Callable[[Mapping[str, Any]], Any],
    notice: Callable[[Mapping[str, Any]], Notice],
) -> tuple[list[Notice], frozenset[Any]]:
    """The notices of ``rows`` (pending now) that ``seen`` does not hold, at most MAX_SHOWN and
    a summary; and ``seen`` once they are reported (only what is still pending)."""
    keys = [key(r) for r in rows]
    fresh = [r for r, k in zip(rows, keys, strict=True) if k not in seen]
    notices = [notice(r) for r in fresh[:MAX_SHOWN]]
    if len(fresh) > MAX_SHOWN:
        more = len(fresh) - MAX_SHOWN
        notices.append(Notice(kind, None, f"{kind}: {more} more", {"kind": kind, "more": more}))
    return notices, (seen & frozenset(keys)) | frozenset(key(r) for r in fresh)


def _batch(
    mail: Sequence[Mapping[str, Any]],
    tasks: Sequence[Mapping[str, Any]],
    freed: Sequence[Mapping[str, Any]],
    seen: Seen,
) -> WatchBatch:
    mail_notices, mail_seen = _new("mail", mail, seen.mail, lambda r: r["id"], _mail_notice)
    task_notices, task_seen = _new("task", tasks, seen.tasks, lambda r: r["id"], _task_notice)
    lease_notices, lease_seen = _new(
        "lease", freed, seen.leases, lambda r: r["resource"], lambda r: _lease_notice(r["resource"])
    )
    return WatchBatch(
        tuple(mail_notices + task_notices + lease_notices),
        Seen(mail_seen, task_seen, lease_seen),
    )


def _check_seen(seen: object) -> Seen:
    if not isinstance(seen, Seen):
        raise InvalidArgument(f"seen must be a Seen, got {seen!r}")
    return seen


def next_batch(
    identity: str | Identity, *, seen: Seen = NOTHING_SEEN, timeout: timedelta | float = 0
) -> Op[WatchBatch]:
    """What concerns ``identity`` that ``seen`` does not hold (its unread mail, the tasks it
    may claim in its project's task lists and in shared ones (of no project: see
    ``tasks.available``), the resources it waits for that became free),
    waiting up to ``timeout`` (a timedelta or seconds, at most a day; 0: do not wait) for
    something to be new. Returns the new notices (empty when the timeout passed) and the
    ``seen`` to pass next time, once they are reported; writes nothing (``save`` keeps it).

    Wakes within milliseconds of the commit that concerns the identity (LISTEN/NOTIFY on the
    store's one listening connection; no polling)."""
    name = identity_name(identity)
    seen = _check_seen(seen)
    seconds = check_duration(timeout, "timeout", maximum=MAX_WAIT).total_seconds()
    deadline = time.monotonic() + seconds
    identity_id = yield from _target(name)
    if seconds > 0:  # before looking: no wake-up is lost
        yield Listen((MAIL, identity_id))
        yield Listen((TASK, ANY))
    holders: set[int] = set()
    while True:
        mail = yield many("watch_mail", identity_id=identity_id)
        tasks = yield many("watch_tasks", identity_id=identity_id)
        freed = yield many("watch_freed", identity_id=identity_id)
        batch = _batch(mail, tasks, freed, seen)
        remaining = deadline - time.monotonic()
        if batch.notices or remaining <= 0:
            return batch
        later = yield one("watch_next", identity_id=identity_id)
        behind = set(later["holders"]) - holders
        if behind:  # listen to them, then look again: a release meanwhile would go unheard
            for holder in sorted(behind):
                yield Listen((LEASE, holder))
            holders |= behind
            continue
        wake = later["next_wake"]
        yield Sleep(remaining if wake is None else min(remaining, max(0.0, float(wake)) + 0.001))


def save(identity: str | Identity, seen: Seen) -> Op[None]:
    """Keep ``seen`` as what ``identity``'s watchers reported (a restarted watcher starts from
    it) and forget the waits of the freed resources it holds."""
    name = identity_name(identity)
    seen = _check_seen(seen)
    identity_id = yield from _target(name)
    yield statement(
        "watch_save",
        identity_id=identity_id,
        mail=sorted(seen.mail),
        tasks=sorted(seen.tasks),
        freed=sorted(seen.leases),
    )


class WatchCalls(Area[FaceT]):
    """``store.watch``: what concerns an identity, as it commits (see ``ikigai_store.watch``;
    the CLI's ``ikigai-store watch`` runs it)."""

    start = operation(start)
    watching = operation(watching)
    next = operation(next_batch)
    save = operation(save)
