"""``ikigai-store web`` in a real headless Chromium, on the demo's data.

The demo (``python -m ikigai_store demo``) runs once against this file's database; its session,
agents, identities, review and task list are found through the library, and a queue topic with
a dead letter, a pending plan and a held lease are added beside them. Against spawned servers
(``tests/browser.py``): every page renders without a console error; the timeline's "as the
model sees it" lists exactly the ids ``replay_session`` / ``replay_agent`` return; a mail sent
from Python appears in an open inbox without a reload within a second; agents' hostile text
renders as text; a write is refused (403) without ``--allow-writes`` and without the CSRF
token, and is carried out with both; with ``--token`` every request without it, the event
stream's too, is 401.
"""

from __future__ import annotations

import http.client
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

import ikigai_store as ik
from tests.browser import StartServer, browser, console_errors, page, web_server

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = [pytest.mark.db, pytest.mark.slow]

__all__ = ["browser", "console_errors", "page", "web_server"]  # fixtures, used by this file

#: The promise: a change is on an open page within this many seconds of the commit.
WITHIN = 1.0

TOKEN = "s3cret-" + uuid.uuid4().hex

HOSTILE = {
    "script": "<script>alert(1)</script>",
    "attribute": '"><img src=x onerror=alert(1)>',
    "rtl": "invoice\u202egnp.exe",
}

#: How each hostile text reads on a page: as written, but a text direction control is shown
#: as a visible mark (so it cannot disguise what follows it).
SHOWN = {**HOSTILE, "rtl": "invoice<U+202E>gnp.exe"}


@dataclass(frozen=True)
class Demo:
    """What the demo (and this file) wrote, as the library reads it back."""

    session_id: int
    agents: tuple[str, ...]  # main first, then the fork
    identities: tuple[str, ...]  # main's, then explorer's
    thread_id: str
    review_id: str
    list_id: str
    topic: str
    dead_mail_id: int
    plan_id: str
    resource: str


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def demo(ikigai_db_url: str, ikigai_module_store: ik.Store) -> Demo:
    """Run the demo on this file's database, then add a dead letter, a plan and a lease."""
    subprocess.run(
        [sys.executable, "-m", "ikigai_store", "--database", ikigai_db_url, "demo"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    store = ikigai_module_store
    [session] = [s for s in store.list_sessions() if (s.title or "").startswith("demo ")]
    agents = tuple(dict.fromkeys(m.agent_uuid for m in store.messages(session.id) if m.agent_uuid))
    bound = {i.agent_uuid: i.name for i in store.identities.list(include_retired=True)}
    names = tuple(bound[agent] for agent in agents)
    assert len(agents) == 2 and len(names) == 2, (agents, names)
    [review] = store.reviews.list(requester=names[0])
    [task_list] = store.tasks.lists()
    [thread_id] = [m.thread_id for m in store.mail.sent(names[0]) if m.subject == "Lexer API"]

    owner, worker = store.identities.register(fresh("op")), store.identities.register(fresh("wk"))
    topic = store.topics.create(fresh("jobs"), "queue", max_attempts=1)
    store.topics.subscribe(worker, topic)
    dead = store.mail.publish(owner, topic, "Rebuild", "rebuild the index")
    claim = store.topics.claim(worker, topic)
    assert claim is not None and claim.mail.id == dead.id
    store.topics.release(claim, error="disk full")
    assert [d.mail.id for d in store.topics.dead_letters(topic)] == [dead.id]
    plan = store.plans.submit(owner, "plans/web.md", "Web view", "Pages, live, safe.")
    resource = f"file:/{fresh('repo')}/main.py"
    store.leases.acquire(worker, resource, ttl=3600)
    return Demo(
        session_id=session.id,
        agents=agents,
        identities=names,
        thread_id=thread_id,
        review_id=review.review_id,
        list_id=task_list.list_id,
        topic=topic.name,
        dead_mail_id=dead.id,
        plan_id=plan.plan_review_id,
        resource=resource,
    )


def q(value: str) -> str:
    return urllib.parse.quote(value, safe="")


#: Every page of the contract, on the demo's data.
PAGES: dict[str, Callable[[Demo], str]] = {
    "root": lambda d: "/",
    "sessions": lambda d: "/sessions",
    "sessions search": lambda d: "/sessions?q=demo",
    "timeline": lambda d: f"/sessions/{d.session_id}",
    "timeline as the model sees it": lambda d: f"/sessions/{d.session_id}?view=model",
    "fork tree": lambda d: f"/sessions/{d.session_id}/tree",
    "root agent": lambda d: f"/agents/{d.agents[0]}",
    "forked agent": lambda d: f"/agents/{d.agents[1]}",
    "forked agent as the model sees it": lambda d: f"/agents/{d.agents[1]}?view=model",
    "identities": lambda d: "/identities",
    "inbox": lambda d: f"/identities/{q(d.identities[0])}",
    "thread": lambda d: f"/threads/{q(d.thread_id)}",
    "topics": lambda d: "/topics",
    "topic": lambda d: f"/topics/{q(d.topic)}",
    "reviews": lambda d: "/reviews",
    "review": lambda d: f"/reviews/{q(d.review_id)}",
    "plans": lambda d: "/plans",
    "tasks": lambda d: "/tasks",
    "task list": lambda d: f"/tasks/{q(d.list_id)}",
    "leases": lambda d: "/leases",
    "activity": lambda d: "/activity",
    "search": lambda d: "/search?q=approach",
}


def shown(d: Demo) -> dict[str, str]:
    """Text some pages must show, beside rendering without errors."""
    return {
        "sessions search": "demo",
        "timeline": "Improve A",
        "inbox": "Parser done",
        "thread": "Lexer API",
        "topics": d.topic,
        "topic": "Rebuild",
        "review": "EOF token missing",
        "plans": "Web view",
        "task list": "Write the parser",
        "leases": d.resource,
        "search": "Approach",
    }


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_renders_without_console_errors(
    name: str, demo: Demo, web_server: StartServer, page: Page
) -> None:
    """Each page of the contract answers 200 with HTML, and the browser logs no error on it
    (nor while its live stream connects)."""
    base = web_server()
    response = page.goto(base + PAGES[name](demo), wait_until="load")
    assert response is not None and response.status == 200, name
    assert "text/html" in (response.headers.get("content-type") or "")
    page.wait_for_timeout(300)  # let scripts run and the event stream connect
    body = page.locator("body").inner_text()
    expected = shown(demo).get(name)
    if expected is not None:
        assert expected in body, f"{name}: {expected!r} is not on the page"


def event_ids(page: Page) -> list[int]:
    ids = page.eval_on_selector_all(".event[data-id]", "els => els.map(e => e.dataset.id)")
    return [int(x) for x in ids]


def test_the_model_view_is_the_librarys_replay(
    demo: Demo, web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """``?view=model`` of the session and of each agent lists exactly the ids, in order, of
    ``replay_session`` / ``replay_agent``; the full timeline lists every event."""
    store, base = ikigai_module_store, web_server()
    page.goto(f"{base}/sessions/{demo.session_id}?view=model")
    assert event_ids(page) == store.replay_session(demo.session_id).message_ids
    for agent in demo.agents:
        page.goto(f"{base}/agents/{agent}?view=model")
        assert event_ids(page) == store.replay_agent(agent).message_ids, agent
    page.goto(f"{base}/sessions/{demo.session_id}")
    assert event_ids(page) == [m.id for m in store.messages(demo.session_id)]
    page.goto(f"{base}/sessions/{demo.session_id}/tree")
    for agent in demo.agents:  # a node opens the agent's replayed context
        assert page.locator(f'svg a[href*="/agents/{agent}"]').count() >= 1, agent


def open_live(page: Page, url: str) -> None:
    """Open ``url`` and wait until its live badge says the event stream is open (the stream
    lives in a SharedWorker, out of the page's own network events)."""
    response = page.goto(url)
    assert response is not None and response.status == 200, url
    page.wait_for_selector('#live-status[data-state="live"]', state="attached")
    page.evaluate("window.__notReloaded = true")


def test_a_mail_appears_in_an_open_inbox_within_a_second(
    demo: Demo, web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """A mail sent from Python is on an already open inbox page within 1 s of the send,
    without a reload."""
    store, base = ikigai_module_store, web_server()
    sender, me = store.identities.register(fresh("s")), store.identities.register(fresh("me"))
    open_live(page, f"{base}/identities/{q(me.name)}")
    for i in range(3):
        started = time.monotonic()
        mail = store.mail.send(sender, me, f"Live {i}", "pushed, not polled")
        page.wait_for_selector(f'.mail[data-id="{mail.id}"]', timeout=WITHIN * 1000 * 3)
        delay = time.monotonic() - started
        assert delay <= WITHIN, f"mail #{mail.id} appeared {delay:.3f} s after the send"
        assert f"Live {i}" in page.locator(f'.mail[data-id="{mail.id}"]').inner_text()
    assert page.evaluate("window.__notReloaded") is True


def test_an_event_appears_in_an_open_timeline_within_a_second(
    web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """Events appended from Python are on an already open timeline within 1 s of the
    append, in id order, without a reload."""
    store, base = ikigai_module_store, web_server()
    sid = store.create_session("live timeline")
    first = store.append(sid, "user", "before the page opened")
    open_live(page, f"{base}/sessions/{sid}")
    appended = [first.id]
    for i in range(3):
        started = time.monotonic()
        message = store.append(sid, "assistant", f"live event {i}")
        page.wait_for_selector(f'.event[data-id="{message.id}"]', timeout=WITHIN * 1000 * 3)
        delay = time.monotonic() - started
        assert delay <= WITHIN, f"event #{message.id} appeared {delay:.3f} s after the append"
        appended.append(message.id)
    assert event_ids(page) == appended
    assert page.evaluate("window.__notReloaded") is True


def assert_inert(page: Page, dialogs: list[str]) -> None:
    """No dialog fired and no element came from the hostile text."""
    page.wait_for_timeout(200)
    assert dialogs == []
    assert page.locator('img[src="x"]').count() == 0
    assert page.evaluate("document.querySelectorAll('script:not([src])').length") == 0
    assert "\u202e" not in page.locator("body").inner_text()


def test_hostile_text_renders_as_text(
    demo: Demo, web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """``<script>``, an attribute break-out with ``onerror``, an RTL override and a 1 MB body,
    as mail (pushed live into an open inbox, then its thread) and as events (the timeline and
    search): no dialog, no injected element, the text shown as written (the override as a
    visible mark, never applied), the pages fast."""
    store, base = ikigai_module_store, web_server()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    sender, me = store.identities.register(fresh("evil")), store.identities.register(fresh("v"))
    open_live(page, f"{base}/identities/{q(me.name)}")
    sent = []
    for kind, text in HOSTILE.items():
        mail = store.mail.send(sender, me, f"{kind} {text}", f"body {text}")
        page.wait_for_selector(f'.mail[data-id="{mail.id}"]')
        shown_as = page.locator(f'.mail[data-id="{mail.id}"]').inner_text()
        assert SHOWN[kind] in shown_as, kind
        sent.append(mail)
    big = "A" * (1 << 20) + HOSTILE["script"]
    huge = store.mail.send(sender, me, "one megabyte", big)
    page.wait_for_selector(f'.mail[data-id="{huge.id}"]')
    assert_inert(page, dialogs)
    assert page.evaluate("window.__notReloaded") is True

    started = time.monotonic()
    page.goto(f"{base}/identities/{q(me.name)}")
    assert time.monotonic() - started < 5
    assert_inert(page, dialogs)

    for mail in [*sent, huge]:
        started = time.monotonic()
        response = page.goto(f"{base}/threads/{q(mail.thread_id)}")
        assert response is not None and response.status == 200
        assert time.monotonic() - started < 5, "the thread page took over 5 s"
        assert_inert(page, dialogs)
        text = page.locator("body").inner_text()
        assert mail.subject.replace("\u202e", "<U+202E>") in text
    assert HOSTILE["script"] in text or "A" * 1000 in text  # the huge body, maybe cut

    sid = store.create_session(f"hostile {HOSTILE['attribute']}")
    ids = [store.append(sid, "user", text).id for text in HOSTILE.values()]
    ids.append(store.append(sid, "assistant", big).id)
    started = time.monotonic()
    page.goto(f"{base}/sessions/{sid}")
    assert time.monotonic() - started < 5, "the timeline took over 5 s"
    assert_inert(page, dialogs)
    for message_id, text in zip(ids, SHOWN.values(), strict=False):
        assert text in page.locator(f'.event[data-id="{message_id}"]').inner_text()
    for path in (
        f"/search?q={q(HOSTILE['script'])}",
        f"/sessions?q={q(HOSTILE['attribute'])}",
        f"/search?q={q(HOSTILE['attribute'])}",
    ):
        response = page.goto(base + path)
        assert response is not None and response.status == 200, path
        assert_inert(page, dialogs)


# ------------------------------------------------------------------------------------ writes


@dataclass(frozen=True)
class Write:
    """One write action of the contract: its path, form fields, and how to see it done."""

    path: str
    fields: dict[str, str]
    done: Any  # (store) -> bool


def writes(store: ik.Store, d: Demo) -> dict[str, Write]:
    """The four actions, each on a thing made for it (so each is carried out at most once)."""
    sender, me = store.identities.register(fresh("a")), store.identities.register(fresh("b"))
    mail = store.mail.send(sender, me, "to ack", "b")
    worker = store.identities.register(fresh("w"))
    topic = store.topics.create(fresh("q"), "queue", max_attempts=1)
    store.topics.subscribe(worker, topic)
    dead = store.mail.publish(sender, topic, "dead", "b")
    claim = store.topics.claim(worker, topic)
    assert claim is not None
    store.topics.release(claim, error="boom")
    resource = f"file:/{fresh('w')}/x.py"
    store.leases.acquire(worker, resource, ttl=3600)
    plan = store.plans.submit(sender, "plans/p.md", "Plan", "Summary")

    def acked(s: ik.Store) -> bool:
        [item] = [i for i in s.mail.inbox(me) if i.mail.id == mail.id]
        return item.acked_at is not None

    return {
        "ack": Write(f"/identities/{q(me.name)}/mail/{mail.id}/ack", {}, acked),
        "requeue": Write(
            f"/topics/{q(topic.name)}/dead/{dead.id}/requeue",
            {},
            lambda s: dead.id not in [x.mail.id for x in s.topics.dead_letters(topic)],
        ),
        "release": Write(
            "/leases/release", {"resource": resource}, lambda s: s.leases.held(resource) == []
        ),
        "decide": Write(
            f"/plans/{plan.plan_review_id}/decide",
            {"state": "approved", "comment": "go"},
            lambda s: s.plans.get(plan.plan_review_id).state == "approved",
        ),
    }


def csrf_of(page: Page) -> str:
    token = page.get_attribute('meta[name="csrf-token"]', "content")
    assert token, "no <meta name=csrf-token> on the page"
    return token


@pytest.mark.parametrize("action", ["ack", "requeue", "release", "decide"])
def test_writes_need_allow_writes_and_the_csrf_token(
    action: str, demo: Demo, web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """Without ``--allow-writes`` a write is 403 even with the page's CSRF token; with it, a
    write without the token or with a wrong one is 403 and changes nothing; with both it is
    carried out."""
    store = ikigai_module_store
    write = writes(store, demo)[action]

    def post(base: str, csrf: str | None) -> int:
        fields = dict(write.fields) | ({"csrf": csrf} if csrf is not None else {})
        response = page.request.post(base + write.path, form=fields, max_redirects=0)
        return response.status

    read_only = web_server()
    page.goto(read_only + "/sessions")
    assert post(read_only, csrf_of(page)) == 403
    assert not write.done(store)

    writable = web_server("--allow-writes")
    page.goto(writable + "/sessions")
    assert post(writable, None) == 403
    assert post(writable, "not-the-token") == 403
    assert not write.done(store)
    status = post(writable, csrf_of(page))
    assert status in (200, 204, 302, 303), status
    assert write.done(store)


# ------------------------------------------------------------------------------------ token


def request(base: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    """Status and content type of a GET (the body is not read: /live never ends)."""
    parts = urllib.parse.urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        conn.request("GET", path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or ""
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/sessions", "/identities", "/live", "/search?q=x"])
def test_the_token_is_checked_on_every_request(
    path: str, demo: Demo, web_server: StartServer
) -> None:
    """With ``--token``, a request without it or with a wrong one is 401, the event stream
    too; ``Authorization: Bearer`` with it is served."""
    base = web_server(token=TOKEN)
    assert request(base, path)[0] == 401
    assert request(base, path, {"Authorization": "Bearer wrong"})[0] == 401
    assert request(base, f"{path}{'&' if '?' in path else '?'}token=wrong")[0] == 401
    status, content_type = request(base, path, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200
    expected = "text/event-stream" if path == "/live" else "text/html"
    assert expected in content_type


def test_a_token_in_the_url_becomes_a_cookie(
    demo: Demo, web_server: StartServer, page: Page, ikigai_module_store: ik.Store
) -> None:
    """Visiting a page with ``?token=`` once redirects to the URL without it and sets a
    cookie: later pages and the event stream are served (a live event arrives)."""
    store, base = ikigai_module_store, web_server(token=TOKEN)
    sid = store.create_session("behind a token")
    store.append(sid, "user", "hello")
    response = page.goto(f"{base}/sessions/{sid}?token={TOKEN}")
    assert response is not None and response.status == 200
    assert TOKEN not in page.url and page.url.endswith(f"/sessions/{sid}")
    open_live(page, f"{base}/sessions/{sid}")
    message = store.append(sid, "assistant", "pushed through the cookie's stream")
    page.wait_for_selector(f'.event[data-id="{message.id}"]', timeout=WITHIN * 1000 * 3)
    for path in PAGES.values():
        response = page.goto(base + path(demo))
        assert response is not None and response.status != 401, path(demo)
