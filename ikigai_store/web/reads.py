"""What the coordination pages read beside the store's public operations, without I/O but for
the operations it yields.

Owns the page-shaped reads of ``web.coordination`` (``queries/web.sql``): a whole mail by id,
a topic's subscribers with their offsets and lag, a queue's counts, claims and dead letters, a
topic's newest messages, the task lists with their counts; and ``task_graph``, the layout of a
list's dependency graph. Invariants: every read is bounded (``LIMIT``) and cuts long texts in
the database, so an agent's 1 MB body costs a page a few thousand characters; the graph's
layers follow ``blocked_by`` (a blocker is always left of what it blocks), which terminates
because a list's dependency graph has no cycle (``tasks``), and is guarded anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..models import Mail, Task
from ..ops import Op, many, one
from ..validate import check_id

__all__ = [
    "QueueClaim",
    "QueueCounts",
    "Subscriber",
    "TaskGraph",
    "TaskListRow",
    "mail",
    "queue_claims",
    "queue_counts",
    "queue_dead",
    "subscribers",
    "task_graph",
    "task_lists",
    "topic_log",
]

#: Most rows of any one table on a coordination page.
ROWS = 200


def mail(mail_id: int) -> Op[Mail | None]:
    """One mail, whole (None: no such mail)."""
    check_id(mail_id, "mail_id")
    row = yield one("web_mail", mail_id=mail_id)
    return None if row is None else Mail.from_row(row)


@dataclass(frozen=True, slots=True)
class Subscriber:
    id: int
    name: str
    retired_at: datetime | None
    subscribed_at: datetime
    committed: int
    lag: int
    committed_at: datetime | None


def subscribers(topic_id: int) -> Op[list[Subscriber]]:
    """A topic's subscribers by name (at most ``ROWS``), with committed offset and lag."""
    rows = yield many("web_topic_subscribers", topic_id=topic_id, lim=ROWS)
    return [Subscriber(**r) for r in rows]


@dataclass(frozen=True, slots=True)
class QueueCounts:
    available: int
    claimed: int
    done: int
    dead: int


def queue_counts(topic_id: int) -> Op[QueueCounts]:
    row = yield one("web_queue_counts", topic_id=topic_id)
    return QueueCounts(**{k: int(v) for k, v in row.items()})


@dataclass(frozen=True, slots=True)
class QueueClaim:
    """A claimed queue message; ``seconds_left`` by the database's clock (< 0: expired)."""

    mail_id: int
    subject: str
    holder: str | None
    attempt: int
    lease_until: datetime
    seconds_left: float


def queue_claims(topic_id: int) -> Op[list[QueueClaim]]:
    """A queue's claimed messages, oldest first (at most ``ROWS``)."""
    rows = yield many("web_queue_claims", topic_id=topic_id, lim=ROWS)
    return [QueueClaim(**r) for r in rows]


def queue_dead(topic_id: int) -> Op[list[dict[str, Any]]]:
    """A queue's dead letters, oldest first (at most ``ROWS``), with attempts and last error."""
    rows: list[dict[str, Any]] = yield many("web_queue_dead", topic_id=topic_id, lim=ROWS)
    return rows


def topic_log(topic_id: int, limit: int = 20) -> Op[list[dict[str, Any]]]:
    """A topic's newest ``limit`` messages, newest first, texts cut."""
    rows: list[dict[str, Any]] = yield many("web_topic_log", topic_id=topic_id, lim=limit)
    return rows


@dataclass(frozen=True, slots=True)
class TaskListRow:
    id: int
    list_id: str
    owner: str
    watch_path: str | None
    created_at: datetime
    last_synced_at: datetime | None
    total: int
    pending: int
    in_progress: int
    completed: int
    deleted: int
    available: int
    blocked: int


def task_lists() -> Op[list[TaskListRow]]:
    """Task lists, oldest first (at most ``ROWS``), with their counts."""
    rows = yield many("web_task_lists", lim=ROWS)
    return [TaskListRow(**r) for r in rows]


# ---------------------------------------------------------------- the dependency graph


@dataclass(frozen=True, slots=True)
class Node:
    """A task drawn: ``label`` is its subject cut short with text direction controls shown
    (an SVG ``<text>`` cannot hold ``pages.text``'s markup; autoescape still applies)."""

    task: Task
    state: str
    x: float
    y: float
    label: str
    title: str
    short_id: str


CONTROLS = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def visible(value: str, limit: int) -> str:
    """``value`` cut to ``limit`` characters (``…`` when cut), text direction controls
    written out as ``<U+202E>``: plain text for places markup cannot go (autoescaped)."""
    cut = value if len(value) <= limit else value[: limit - 1] + "…"
    return CONTROLS.sub(lambda m: f"<U+{ord(m[0]):04X}>", cut)


@dataclass(frozen=True, slots=True)
class Edge:
    """An arrow from a blocker to the task it blocks (``done``: the blocker no longer
    blocks)."""

    x1: float
    y1: float
    x2: float
    y2: float
    done: bool


@dataclass(frozen=True, slots=True)
class TaskGraph:
    nodes: list[Node]
    edges: list[Edge]
    width: float
    height: float


NODE_W = 170.0
NODE_H = 40.0
_GAP_X = 70.0
_GAP_Y = 18.0
_MARGIN = 16.0


def task_state(task: Task, by_id: dict[str, Task]) -> str:
    """``completed``, ``deleted``, ``claimed`` (in progress), ``blocked`` (a blocker neither
    completed nor deleted), ``available`` (pending, unowned, nothing blocking) or ``owned``
    (pending but someone's)."""
    if task.status in ("completed", "deleted"):
        return task.status
    if task.status == "in_progress":
        return "claimed"
    blockers = (by_id.get(b) for b in task.blocked_by)
    if any(b is not None and b.status not in ("completed", "deleted") for b in blockers):
        return "blocked"
    return "owned" if task.owner else "available"


def task_graph(tasks: list[Task]) -> TaskGraph:
    """The layout of a list's tasks: a column per layer (a task's layer is one more than its
    blockers' highest), tasks in id order within a column; an edge per ``blocked_by``."""
    by_id = {t.external_id: t for t in tasks}
    # Kahn's order over the edges: a task is placed once all its blockers are, one layer
    # right of the rightmost. Each task enters the queue once, so this ends; a task left
    # unplaced (only on a cycle, which a list never has) goes in the first column.
    blockers = {t.external_id: {b for b in t.blocked_by if b in by_id} for t in tasks}
    blocks: dict[str, list[str]] = {}
    for key, found in blockers.items():
        for b in found:
            blocks.setdefault(b, []).append(key)
    waiting = {key: len(found) for key, found in blockers.items()}
    layer: dict[str, int] = {}
    ready = [t.external_id for t in tasks if not waiting[t.external_id]]
    while ready:
        key = ready.pop()
        layer[key] = 1 + max((layer[b] for b in blockers[key]), default=-1)
        for after in blocks.get(key, ()):
            waiting[after] -= 1
            if not waiting[after]:
                ready.append(after)
    for t in tasks:
        layer.setdefault(t.external_id, 0)
    columns: dict[int, list[Task]] = {}
    for t in tasks:
        columns.setdefault(layer[t.external_id], []).append(t)
    place: dict[str, tuple[float, float]] = {}
    nodes: list[Node] = []
    for col, members in sorted(columns.items()):
        for row, t in enumerate(members):
            x = _MARGIN + col * (NODE_W + _GAP_X)
            y = _MARGIN + row * (NODE_H + _GAP_Y)
            place[t.external_id] = (x, y)
            state = task_state(t, by_id)
            owner = f", {visible(t.owner, 64)}" if t.owner else ""
            title = f"{visible(t.external_id, 64)}: {visible(t.subject, 300)} ({state}{owner})"
            nodes.append(
                Node(t, state, x, y, visible(t.subject, 24), title, visible(t.external_id, 18))
            )
    edges = []
    for t in tasks:
        tx, ty = place[t.external_id]
        for b in t.blocked_by:
            if b not in place:
                continue
            bx, by = place[b]
            done = by_id[b].status in ("completed", "deleted")
            edges.append(Edge(bx + NODE_W, by + NODE_H / 2, tx, ty + NODE_H / 2, done))
    cols = max(columns, default=0) + 1
    rows = max((len(m) for m in columns.values()), default=1)
    return TaskGraph(
        nodes,
        edges,
        width=2 * _MARGIN + cols * NODE_W + (cols - 1) * _GAP_X,
        height=2 * _MARGIN + rows * NODE_H + (rows - 1) * _GAP_Y,
    )
