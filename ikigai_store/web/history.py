"""The history pages: sessions, a session's timeline, an agent's context, the fork tree.

Owns ``routes``. Each view reads through the store's operations (``replay_session``,
``replay_agent``, ``get_agent``…) or the page-shaped reads of ``web.timeline``, and renders a
template; a live region is re-rendered alone when asked with ``?fragment=1``.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import Conflict, DatabaseError, NotFound
from ..models import ReplayContext
from . import timeline
from .pages import int_param, keyset_page, render, web_of

__all__ = ["routes"]

#: Events of the replayed context on one page of the "as the model sees it" view.
MODEL_PAGE = 500


async def sessions(request: Request) -> Response:
    web = web_of(request)
    q = (request.query_params.get("q") or "").strip()[:200] or None
    before = int_param(request, "before")
    rows = await web.store._run(timeline.sessions_page(q, before))
    rows, next_before = keyset_page(rows, timeline.SESSIONS_PAGE, lambda row: row.id)
    return render(
        request,
        "sessions.html",
        {"rows": rows, "q": q or "", "next_before": next_before},
        live="",
    )


async def session_timeline(request: Request) -> Response:
    web = web_of(request)
    session_id = int_param(request, "session_id", path=True)
    assert session_id is not None
    session = await web.store.get_session(session_id)
    await web.hub.watch_session(session_id)
    controls = await web.store._run(timeline.controls(session_id))
    agents = await web.store._run(timeline.agents(session_id))
    context = {
        "session": session,
        "controls": controls,
        "names": _names(agents),
        "forks": _forks(agents),
        "agents": agents,
    }
    if request.query_params.get("view") == "model":
        replayed = await web.store.replay_session(session_id)
        return _model_view(request, replayed, context, live=f"session:{session_id}")
    before = int_param(request, "before")
    after = int_param(request, "after")
    page = await web.store._run(timeline.events_page(session_id, before=before, after=after))
    return render(
        request,
        "timeline.html",
        {**context, "page": page, "view": "all", "events": page.events},
        fragment="_events.html",
        live=f"session:{session_id}",
    )


async def session_tail(request: Request) -> Response:
    """The events after ``?after=`` as rows to append (header ``X-Reload`` when one is a mark,
    rewind, clear or pop: earlier rows change state, the page refreshes the whole list)."""
    web = web_of(request)
    session_id = int_param(request, "session_id", path=True)
    after = int_param(request, "after") or 0
    assert session_id is not None
    await web.hub.watch_session(session_id)
    try:
        rows = await web.store._run(timeline.tail(session_id, after))
    except Conflict:
        raise
    except DatabaseError:  # lock_timeout: an append held the session open; the page asks again
        return Response("", headers={"X-Retry": "1"})
    reload = any(r.kind in ("mark", "rewind", "clear", "pop") for r in rows)
    controls = await web.store._run(timeline.controls(session_id)) if reload else None
    agents = await web.store._run(timeline.agents(session_id))
    response = render(
        request,
        "_events.html",
        {
            "events": rows,
            "controls": controls or timeline.Controls(),
            "names": _names(agents),
            "forks": _forks(agents),
        },
    )
    if reload:
        response.headers["X-Reload"] = "1"
    return response


def _names(agents: list[timeline.AgentNode]) -> dict[str, str]:
    """How a page names each agent: its name, else the start of its uuid."""
    return {a.uuid: a.name or a.uuid[:8] for a in agents}


def _forks(agents: list[timeline.AgentNode]) -> dict[int, list[timeline.AgentNode]]:
    """The agents forked at each event (their fork point), for the timeline's markers."""
    found: dict[int, list[timeline.AgentNode]] = {}
    for a in agents:
        if a.parent_uuid is not None:
            found.setdefault(a.fork_message_id, []).append(a)
    return found


def _model_view(
    request: Request, replayed: ReplayContext, context: dict[str, object], *, live: str
) -> Response:
    """The replayed context (``replay_session``'s or ``replay_agent``'s), a page of it."""
    total = len(replayed.messages)
    pages = max(1, -(-total // MODEL_PAGE))
    number = min(max(int_param(request, "page") or 1, 1), pages)
    shown = replayed.messages[(number - 1) * MODEL_PAGE : number * MODEL_PAGE]
    return render(
        request,
        "model.html",
        {
            **context,
            "view": "model",
            "replayed": replayed,
            "messages": shown,
            "page_number": number,
            "pages": pages,
            "total": total,
            "marks": {m.message_id: m.label for m in replayed.marks},
        },
        fragment="_model.html",
        live=live,
    )


async def agent(request: Request) -> Response:
    web = web_of(request)
    uuid = request.path_params["uuid"]
    found = await web.store.get_agent(uuid)
    await web.hub.watch_session(found.session_id)
    replayed = await web.store.replay_agent(uuid)
    agents = await web.store._run(timeline.agents(found.session_id))
    children = [a for a in agents if a.parent_uuid == uuid]
    parent = next((a for a in agents if a.uuid == found.parent_uuid), None)
    return _model_view(
        request,
        replayed,
        {
            "agent": found,
            "parent": parent,
            "children": children,
            "session": await web.store.get_session(found.session_id),
            "names": _names(agents),
            "controls": timeline.Controls(),
        },
        live=f"session:{found.session_id}",
    )


@dataclass(frozen=True, slots=True)
class Lane:
    """One agent drawn in the fork tree: its row, where it starts (its fork point on the
    parent's lane) and ends, and where its parent's lane is."""

    agent: timeline.AgentNode
    y: float
    x0: float
    x1: float
    parent_y: float | None


def layout(agents: list[timeline.AgentNode]) -> tuple[list[Lane], float, float]:
    """Lanes for the fork tree: a depth-first order of the agents (children under their
    parent), x by the rank of the ids that matter (fork points, first and newest events);
    returns the lanes, the width and the height of the drawing."""
    by_parent: dict[str | None, list[timeline.AgentNode]] = {}
    known = {a.uuid for a in agents}
    for a in agents:
        parent = a.parent_uuid if a.parent_uuid in known else None
        by_parent.setdefault(parent, []).append(a)
    order: list[tuple[timeline.AgentNode, int]] = []
    stack = [(a, 0) for a in reversed(by_parent.get(None, []))]
    while stack:
        node, depth = stack.pop()
        order.append((node, depth))
        stack.extend((c, depth + 1) for c in reversed(by_parent.get(node.uuid, [])))
    points = sorted(
        {
            p
            for a in agents
            for p in (a.fork_message_id, a.first_id, a.last_id)
            if p is not None and p > 0
        }
    )
    rank = {p: i for i, p in enumerate(points)}
    step, left, top, row = 60.0, 170.0, 30.0, 46.0

    def x(point: int | None) -> float:
        return left + step * rank[point] if point in rank else left

    lanes: list[Lane] = []
    ys: dict[str, float] = {}
    for i, (a, _depth) in enumerate(order):
        y = top + row * i
        ys[a.uuid] = y
        start = x(a.fork_message_id) if a.fork_message_id > 0 else x(a.first_id)
        end = max(start, x(a.last_id))
        parent_y = ys.get(a.parent_uuid) if a.parent_uuid else None
        lanes.append(Lane(a, y, start, end + 24.0, parent_y))
    width = left + step * max(len(points), 1) + 80.0
    height = top + row * max(len(order), 1)
    return lanes, width, height


async def tree(request: Request) -> Response:
    web = web_of(request)
    session_id = int_param(request, "session_id", path=True)
    assert session_id is not None
    session = await web.store.get_session(session_id)
    await web.hub.watch_session(session_id)
    agents = await web.store._run(timeline.agents(session_id))
    lanes, width, height = layout(agents)
    return render(
        request,
        "tree.html",
        {"session": session, "lanes": lanes, "width": width, "height": height},
        fragment="_tree.html",
        live=f"session:{session_id}",
    )


async def event(request: Request) -> Response:
    web = web_of(request)
    message_id = int_param(request, "message_id", path=True)
    assert message_id is not None
    row = await web.store._run(timeline.event(message_id))
    if row is None:
        raise NotFound(f"event {message_id} does not exist")
    return render(request, "event.html", {"event": row})


routes = [
    Route("/sessions", sessions),
    Route("/sessions/{session_id}", session_timeline),
    Route("/sessions/{session_id}/tail", session_tail),
    Route("/sessions/{session_id}/tree", tree),
    Route("/agents/{uuid}", agent),
    Route("/events/{message_id}", event),
]
