"""The coordination pages: identities and their mail, topics and queues, reviews, plans, task
lists, leases, the activity feed, search. Owns ``routes``.

Each view reads through the store's public operations (``store.mail.inbox``,
``store.topics.list``, ``store.reviews.iterations``…) or, where no operation offers what a page
shows, the bounded reads of ``web.reads``; a live region is re-rendered alone with
``?fragment=1``. What a page cannot hear: the database notifies mail becoming unread (``mail``,
by recipient), queue messages becoming available (``queue``), task changes (``task``), lease
changes (``lease``) and mail on a thread (``thread``); a mail's state change (read, ack,
archive), a queue claim, completion or dead letter, an issue resolved, and an activity notify
nothing, so those pages show them on the next change they hear, or on reload. Writes (ack,
requeue, force release, decide a plan) pass ``write_form`` first, validate through the
operation (a bad value is ``InvalidArgument``: a 400 page, nothing written) and redirect back
with 303.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from typing import Any

from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from .. import notify
from ..errors import InvalidArgument, NotFound
from ..models import (
    ACTIVITY_TYPES,
    PLAN_STATES,
    REVIEW_STATES,
    SEVERITIES,
    Review,
)
from ..plans import DECISIONS
from ..reviews import REVIEW_TRANSITIONS
from ..validate import check_name
from . import reads
from .pages import int_param, keyset_page, render, text, web_of, write_form

__all__ = ["routes"]

#: Rows on one page of a mailbox, a feed, a list of reviews or plans.
PAGE = 50
#: A mail body on the thread page is cut here (the whole is on ``/mail/{id}``).
THREAD_BODY = 20_000
#: Hits of each kind on the search page.
HITS = 25
#: The mailbox tabs: (tab, the ``state`` given to ``mail.inbox``; ``sent``: ``mail.sent``).
TABS: tuple[tuple[str, str | None], ...] = (
    ("inbox", None),
    ("unread", "unread"),
    ("starred", "starred"),
    ("snoozed", "snoozed"),
    ("archived", "archived"),
    ("trash", "trash"),
    ("sent", None),
)


def _choice(request: Request, name: str, allowed: tuple[str, ...]) -> str | None:
    """An optional query parameter that must be one of ``allowed``."""
    value = request.query_params.get(name) or None
    if value is not None and value not in allowed:
        raise InvalidArgument(f"{name} must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return value


def _name(request: Request, key: str = "name") -> str:
    name: str = request.path_params[key]
    check_name(name, key)
    return name


def _back(request: Request, fallback: str) -> RedirectResponse:
    """303 to the page the form was on (same origin only), else ``fallback``."""
    referer = request.headers.get("referer", "")
    own = f"{request.url.scheme}://{request.headers.get('host', '')}/"
    target = referer if referer.startswith(own) else fallback
    return RedirectResponse(target, status_code=303)


# ---------------------------------------------------------------- identities and mail


async def identities(request: Request) -> Response:
    web = web_of(request)
    retired = request.query_params.get("retired") == "1"
    found = await web.store.identities.discover()
    gone = []
    if retired:
        everyone = await web.store.identities.list(include_retired=True)
        gone = [i for i in everyone if i.retired_at is not None]
    # Unread counts move with mail (``mail:*``); a status moves with time and heartbeats,
    # which notify nothing: the page shows them as of its last refresh.
    return render(
        request,
        "identities.html",
        {"rows": found, "retired": gone, "show_retired": retired},
        fragment="_identities.html",
        live="mail:*",
    )


async def identity(request: Request) -> Response:
    web = web_of(request)
    name = _name(request)
    tab = request.query_params.get("tab") or "inbox"
    states = dict(TABS)
    if tab not in states:
        raise InvalidArgument(f"tab must be one of {', '.join(states)}, got {tab[:40]!r}")
    before = int_param(request, "before")
    who = await web.store.identities.get(name)
    counts = await web.store.mail.counts(name)
    items: list[Any] = []
    sent: list[Any] = []
    next_before = None
    if tab == "sent":
        # mail.sent has no before= (newest PAGE only).
        sent = await web.store.mail.sent(name, limit=PAGE)
    else:
        found = await web.store.mail.inbox(name, state=states[tab], limit=PAGE + 1, before=before)
        items, next_before = keyset_page(found, PAGE, lambda item: int(item.mail.id))
    # Heard: mail to this identity becoming unread. Not heard: its own state changes (ack,
    # archive...) and what it sends: the Sent tab refreshes with the next mail it receives.
    return render(
        request,
        "identity.html",
        {
            "who": who,
            "counts": counts,
            "tab": tab,
            "tabs": [t for t, _ in TABS],
            "items": items,
            "sent": sent,
            "next_before": next_before,
        },
        fragment="_mailbox.html",
        live=f"mail:{who.id}",
    )


async def ack(request: Request) -> Response:
    await write_form(request)
    web = web_of(request)
    name = _name(request)
    mail_id = int_param(request, "mail_id", path=True)
    assert mail_id is not None
    await web.store.mail.ack(name, mail_id)
    return _back(request, f"/identities/{name}")


async def thread(request: Request) -> Response:
    web = web_of(request)
    thread_id: str = request.path_params["thread_id"]
    mails = await web.store.mail.thread(thread_id)
    if not mails:
        raise NotFound(f"thread {thread_id[:200]!r} does not exist")
    key = await web.store._run(notify.thread_hash(thread_id))
    plan = review = None
    try:
        if thread_id.startswith("plan-"):
            plan = await web.store.plans.by_thread(thread_id)
        elif thread_id.startswith("review-"):
            review = await web.store.reviews.resolve_prefix(thread_id.removeprefix("review-"))
    except (NotFound, InvalidArgument):
        pass  # a thread named like one that is not
    return render(
        request,
        "thread.html",
        {
            "thread_id": thread_id,
            "mails": mails,
            "limit": THREAD_BODY,
            "plan": plan,
            "review": review,
        },
        fragment="_thread.html",
        live=f"thread:{key}",
    )


async def mail(request: Request) -> Response:
    web = web_of(request)
    mail_id = int_param(request, "mail_id", path=True)
    assert mail_id is not None
    found = await web.store._run(reads.mail(mail_id))
    if found is None:
        raise NotFound(f"mail {mail_id} does not exist")
    return render(request, "mail.html", {"m": found})


# ---------------------------------------------------------------- topics and queues


async def topics(request: Request) -> Response:
    web = web_of(request)
    rows = await web.store.topics.list()
    await web.hub.watch_topics([r.topic.id for r in rows if r.topic.kind == "queue"])
    # Heard: publishing (a broadcast copy is unread mail, a queue message becomes available).
    return render(
        request, "topics.html", {"rows": rows}, fragment="_topics.html", live="queue:* mail:*"
    )


async def topic(request: Request) -> Response:
    web = web_of(request)
    name = _name(request)
    found = await web.store.topics.get(name)
    subscribers = await web.store._run(reads.subscribers(found.id))
    log = await web.store._run(reads.topic_log(found.id))
    counts = claims = dead = None
    if found.kind == "queue":
        await web.hub.watch_topics([found.id])
        counts = await web.store._run(reads.queue_counts(found.id))
        claims = await web.store._run(reads.queue_claims(found.id))
        dead = await web.store._run(reads.queue_dead(found.id))
    last = max((r["log_offset"] for r in log), default=0)
    # Heard: a publish (queue: available; broadcast: the subscribers' unread copies), a
    # release or an expired lease claimed again (available). Not heard: a claim, a completion,
    # a dead letter, a commit of an offset; the lease countdowns run in the page.
    return render(
        request,
        "topic.html",
        {
            "topic": found,
            "subscribers": subscribers,
            "log": log,
            "last_offset": last,
            "counts": counts,
            "claims": claims,
            "dead": dead,
        },
        fragment="_topic.html",
        live=f"queue:{found.id} mail:*",
    )


async def requeue(request: Request) -> Response:
    await write_form(request)
    web = web_of(request)
    name = _name(request)
    mail_id = int_param(request, "mail_id", path=True)
    assert mail_id is not None
    found = await web.store.topics.get(name)
    dead = await web.store._run(reads.queue_dead(found.id))
    if found.kind != "queue" or all(d["mail_id"] != mail_id for d in dead):
        raise InvalidArgument(f"mail {mail_id} is not a dead letter of topic {name!r}")
    await web.store.topics.requeue(mail_id)
    return _back(request, f"/topics/{name}")


# ---------------------------------------------------------------- reviews and plans

#: Where each review state sits in the diagram (x, y of its box's centre).
_STATE_AT: dict[str, tuple[int, int]] = {
    "new": (75, 70),
    "pending_review": (265, 70),
    "under_review": (455, 70),
    "approved": (665, 28),
    "rejected": (665, 112),
    "changes_requested": (455, 180),
    "re_review": (265, 180),
    "cancelled": (75, 180),
}


#: The size of a state's box in the diagram.
_BOX_W, _BOX_H = 128, 32


def _edge(x: int, y: int, dx: int, dy: int) -> tuple[float, float]:
    """Where the ray from a box's centre (x, y) along (dx, dy) leaves the box."""
    scale = min(
        _BOX_W / 2 / abs(dx) if dx else float("inf"),
        _BOX_H / 2 / abs(dy) if dy else float("inf"),
    )
    return x + dx * scale, y + dy * scale


def review_diagram(current: str) -> dict[str, Any]:
    """The review state machine to draw: states at fixed places, one arrow per (event, source)
    of ``REVIEW_TRANSITIONS`` but ``cancel``, which every open state may fire (drawn once, as
    a note)."""
    states = [
        {"name": s, "x": x - _BOX_W / 2, "y": y - _BOX_H / 2, "cx": x, "cy": y, "lit": s == current}
        for s, (x, y) in _STATE_AT.items()
    ]
    arrows = []
    for event, (sources, target) in REVIEW_TRANSITIONS.items():
        if event == "cancel":
            continue
        for source in sources:
            (x1, y1), (x2, y2) = _STATE_AT[source], _STATE_AT[target]
            sx, sy = _edge(x1, y1, x2 - x1, y2 - y1)
            ex, ey = _edge(x2, y2, x1 - x2, y1 - y2)
            arrows.append(
                {
                    "event": event,
                    "x1": sx,
                    "y1": sy,
                    "x2": ex,
                    "y2": ey,
                    "mx": (sx + ex) / 2,
                    "my": (sy + ey) / 2,
                }
            )
    return {"states": states, "arrows": arrows, "width": 745, "height": 222}


async def reviews(request: Request) -> Response:
    web = web_of(request)
    state = _choice(request, "state", REVIEW_STATES)
    before = int_param(request, "before")
    rows = await web.store.reviews.list(state=state, limit=PAGE + 1, before=before)
    rows, next_before = keyset_page(rows, PAGE, lambda row: int(row.id))
    # Heard: every review event mails its audience (mail:*); a refreshed list follows.
    return render(
        request,
        "reviews.html",
        {
            "rows": rows,
            "state": state or "",
            "states": REVIEW_STATES,
            "next_before": next_before,
        },
        fragment="_reviews.html",
        live="mail:*",
    )


async def _review(web: Any, key: str) -> Review:
    try:
        uuid.UUID(key)
    except ValueError:
        found: Review = await web.store.reviews.resolve_prefix(key)
        return found
    found = await web.store.reviews.get(key)
    return found


async def review(request: Request) -> Response:
    web = web_of(request)
    found = await _review(web, request.path_params["review_id"])
    iterations = await web.store.reviews.iterations(found)
    issues = await web.store.reviews.issues(found)
    by_severity = {s: [i for i in issues if i.severity == s] for s in SEVERITIES}
    key = await web.store._run(notify.thread_hash(found.thread_id))
    # Heard: a state change or an iteration (each mails the review's thread). Not heard: an
    # issue resolved (no mail): shown at the next change, or on reload.
    return render(
        request,
        "review.html",
        {
            "review": found,
            "diagram": review_diagram(found.state),
            "iterations": iterations,
            "by_severity": by_severity,
            "open": sum(1 for i in issues if i.status == "open"),
        },
        fragment="_review.html",
        live=f"thread:{key}",
    )


async def plans(request: Request) -> Response:
    web = web_of(request)
    state = _choice(request, "state", PLAN_STATES)
    before = int_param(request, "before")
    rows = await web.store.plans.list(state=state, limit=PAGE + 1, before=before)
    rows, next_before = keyset_page(rows, PAGE, lambda row: int(row.id))
    # Heard: a submission or a decision mails the other side (mail:*); not heard: a plan
    # submitted to its own requester (nobody is mailed).
    return render(
        request,
        "plans.html",
        {
            "rows": rows,
            "state": state or "",
            "states": PLAN_STATES,
            "decisions": DECISIONS,
            "next_before": next_before,
        },
        fragment="_plans.html",
        live="mail:*",
    )


async def decide(request: Request) -> Response:
    form = await write_form(request)
    web = web_of(request)
    plan_id: str = request.path_params["plan_id"]
    state = form.get("state", "")
    comment = form.get("comment") or None
    reviewed_by = form.get("reviewed_by") or None
    if state not in DECISIONS:
        raise InvalidArgument(f"state must be one of {', '.join(DECISIONS)}, got {state[:40]!r}")
    # reviewed_by: the form's, else the plan's reviewer (plans.decide's default: "User", the
    # human, unless the plan named another reviewer).
    await web.store.plans.decide(plan_id, state, comment=comment, reviewed_by=reviewed_by)
    return _back(request, "/plans")


# ---------------------------------------------------------------- tasks and leases


async def task_lists(request: Request) -> Response:
    web = web_of(request)
    rows = await web.store._run(reads.task_lists())
    return render(request, "tasks.html", {"rows": rows}, fragment="_task_lists.html", live="task:*")


async def task_list(request: Request) -> Response:
    web = web_of(request)
    list_id: str = request.path_params["list_id"]
    found = await web.store.tasks.get_list(list_id)
    tasks = await web.store.tasks.list(found)
    stats = await web.store.tasks.stats(found)
    graph = reads.task_graph(tasks)
    return render(
        request,
        "task_list.html",
        {
            "tasks_list": found,
            "tasks": tasks,
            "stats": stats,
            "graph": graph,
            "node_w": reads.NODE_W,
            "node_h": reads.NODE_H,
            "states": {n.task.external_id: n.state for n in graph.nodes},
        },
        fragment="_task_list.html",
        live=f"task:{found.id}",
    )


async def leases(request: Request) -> Response:
    web = web_of(request)
    held = await web.store.leases.held()
    now = datetime.now(UTC)
    rows = [(lease, (lease.expires_at - now).total_seconds()) for lease in held]
    # Heard: every lease granted, renewed or ended (by holder: lease:*). An expiry notifies
    # nothing: the countdown runs in the page and the row goes at the next change.
    return render(request, "leases.html", {"rows": rows}, fragment="_leases.html", live="lease:*")


async def release(request: Request) -> Response:
    form = await write_form(request)
    web = web_of(request)
    resource = form.get("resource")
    if not resource:
        raise InvalidArgument("resource is required")
    await web.store.leases.force_release(resource)
    return _back(request, "/leases")


# ---------------------------------------------------------------- activity and search


async def activity(request: Request) -> Response:
    web = web_of(request)
    before = int_param(request, "before")
    who = request.query_params.get("identity") or None
    if who is not None:
        check_name(who, "identity")
    kind = _choice(request, "type", ACTIVITY_TYPES)
    rows = await web.store.activities.feed(
        identity=who, activity_type=kind, limit=PAGE + 1, before=before
    )
    rows, next_before = keyset_page(rows, PAGE, lambda row: int(row.id))
    # Activities have no channel of their own: most are written with mail (reviews, plans),
    # a task completion or a lease change, so the feed refreshes on those; the others
    # (commit, decision, heartbeat... recorded alone) show at the next change, or on reload.
    return render(
        request,
        "activity.html",
        {
            "rows": rows,
            "identity": who or "",
            "type": kind or "",
            "types": ACTIVITY_TYPES,
            "next_before": next_before,
            "paged": before is not None,
        },
        fragment="_activity.html",
        live="" if before is not None else "mail:* task:* lease:*",
    )


_MARKED = re.compile(r"\[([^\[\]]*)\]")
_WORD = re.compile(r"\w+")


def highlight(snippet: str, query: str) -> Markup:
    """A search snippet for a page. ``ts_headline`` marks matches ``[like this]``, and the
    text may hold brackets of its own: a bracketed piece is marked only when it looks like a
    query word (they share a 4-letter stem; the match is by stem), the others stay literal.
    Every piece is escaped (``pages.text``) before the marks become ``<mark>``."""
    stems = [w[:4] for w in _WORD.findall(query.lower()) if w != "or"]

    def matches(piece: str) -> bool:
        words = _WORD.findall(piece.lower())
        word = words[0] if words else ""
        return bool(word) and any(word.startswith(s) or s.startswith(word[:4]) for s in stems)

    parts: list[str] = []
    at = 0
    for found in _MARKED.finditer(snippet):
        if not matches(found[1]):
            continue
        parts.append(text(snippet[at : found.start()]))
        parts.append(Markup("<mark>") + text(found[1]) + Markup("</mark>"))
        at = found.end()
    parts.append(text(snippet[at:]))
    return Markup("").join(parts)


async def search(request: Request) -> Response:
    web = web_of(request)
    q = (request.query_params.get("q") or "").strip()
    events: list[Any] = []
    mails: list[Any] = []
    if q:
        events = await web.store.search(q, limit=HITS)
        mails = await web.store.mail.search(q, limit=HITS)
    return render(
        request,
        "search.html",
        {
            "q": q,
            "events": [(h, highlight(h.snippet, q)) for h in events],
            "mails": [(h, highlight(h.snippet, q)) for h in mails],
        },
    )


routes: list[BaseRoute] = [
    Route("/identities", identities),
    Route("/identities/{name}", identity),
    Route("/identities/{name}/mail/{mail_id}/ack", ack, methods=["POST"]),
    Route("/threads/{thread_id:path}", thread),
    Route("/mail/{mail_id}", mail),
    Route("/topics", topics),
    Route("/topics/{name}", topic),
    Route("/topics/{name}/dead/{mail_id}/requeue", requeue, methods=["POST"]),
    Route("/reviews", reviews),
    Route("/reviews/{review_id}", review),
    Route("/plans", plans),
    Route("/plans/{plan_id}/decide", decide, methods=["POST"]),
    Route("/tasks", task_lists),
    Route("/tasks/{list_id:path}", task_list),
    Route("/leases", leases),
    Route("/leases/release", release, methods=["POST"]),
    Route("/activity", activity),
    Route("/search", search),
]
