"""The web view's pages through Starlette's ``TestClient``, on ``create_app`` over an
``AsyncStore`` of this file's database (seeded once, by the sync face).

Every coordination page answers 200 on the seeded data, 404 for unknown names and 400 for bad
parameters; an agent's hostile text (``<script>``, ``"><img onerror>``, U+202E) appears only
escaped, with the text direction control written out; a 1 MB body is cut on the pages that
list mail; live regions name the channels they follow and render alone with ``?fragment=1``;
write actions are refused (403) without ``--allow-writes``, without or with a wrong CSRF token
and from a foreign origin, and do what they say (303) with all of them, while a bad value is a
400 that writes nothing. The history pages are looked at lightly too. (The browser tests, with
a real Chromium, live elsewhere.)
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio.from_thread
import pytest
from anyio.from_thread import BlockingPortal
from starlette.testclient import TestClient

import ikigai_store as ik
from ikigai_store import notify
from ikigai_store.web import create_app
from ikigai_store.web.coordination import highlight
from ikigai_store.web.reads import task_graph

pytestmark = pytest.mark.db

HOSTILE = '<script>alert(1)</script> "><img src=x onerror=alert(1)> \u202eevil'
BIG = 1_000_000


@dataclass
class Seed:
    session_id: int
    event_ids: list[int]
    hostile_mail: ik.Mail
    big_mail: ik.Mail
    plain_mail: ik.Mail
    ack_mail: ik.Mail
    alice_id: int
    news: ik.Topic
    jobs: ik.Topic
    dead_id: int
    review: ik.Review
    plan: ik.PlanReview
    task_list: ik.TaskList


@pytest.fixture(scope="module")
def seed(ikigai_module_store: ik.Store) -> Seed:
    """One of everything the pages show, some of it hostile or huge."""
    s = ikigai_module_store
    sid = s.create_session("web pages")
    events = [s.append(sid, "user", f"hello {n}").id for n in range(5)]
    events.append(s.append(sid, "assistant", "the parser job is [done]; " + HOSTILE).id)
    alice = s.identities.register("alice", project_key="web", purpose="main")
    for name in ("bob", "worker", "carol"):
        s.identities.register(name, project_key="web")
    s.identities.resolve("web", role="helper", name="helper", parent="alice")
    s.identities.retire("carol")
    plain = s.mail.send("bob", "alice", "hello there", "a plain body")
    s.mail.reply("alice", plain.id, "and back")
    hostile = s.mail.send("bob", ["alice", "worker"], HOSTILE, HOSTILE, priority="urgent")
    big = s.mail.send("bob", "alice", "a big one", "b" * BIG)
    to_ack = s.mail.send("bob", "alice", "ack me", "please")
    news = s.topics.create("news")
    s.topics.subscribe("alice", "news")
    for n in range(3):
        s.mail.publish("bob", "news", f"news {n}", f"item {n}")
    s.topics.commit("alice", "news", 1)
    jobs = s.topics.create("jobs", kind="queue", max_attempts=1)
    s.topics.subscribe("worker", "jobs")
    for n in range(3):
        s.mail.publish("bob", "jobs", f"job {n}", f"do {n}")
    failed = s.topics.claim("worker", "jobs", ttl=300)
    assert failed is not None
    s.topics.release(failed, error=HOSTILE)
    held = s.topics.claim("worker", "jobs", ttl=300)
    assert held is not None
    review = s.reviews.create("bob", reviewers=["alice"], branch=HOSTILE)
    s.reviews.submit(review)
    s.reviews.start(review)
    s.reviews.record_iteration(
        review,
        "alice",
        "request_changes",
        "needs work " + HOSTILE,
        issues=[
            {"issue_type": "bug", "severity": "high", "title": HOSTILE, "description": "x"},
            {"issue_type": "style", "severity": "low", "title": "nit", "description": "y"},
        ],
    )
    review = s.reviews.get(review)
    plan = s.plans.submit("bob", "plans/a.md", HOSTILE, "summary " + HOSTILE)
    tl = s.tasks.create_list("list-1", "bob")
    s.tasks.upsert(tl, "1", subject="design")
    s.tasks.upsert(tl, "2", subject=HOSTILE, blocked_by=["1"])
    s.tasks.upsert(tl, "3", subject="docs", blocked_by=["1", "2"])
    s.tasks.claim(tl, "1", "worker")
    s.leases.acquire("worker", "file:a.py", ttl=300)
    s.leases.acquire("alice", "file:b.py", ttl=300)
    dead = s.topics.dead_letters("jobs")
    assert len(dead) == 1
    return Seed(
        session_id=sid,
        event_ids=events,
        hostile_mail=hostile,
        big_mail=big,
        plain_mail=plain,
        ack_mail=to_ack,
        alice_id=alice.id,
        news=news,
        jobs=jobs,
        dead_id=dead[0].mail.id,
        review=review,
        plan=plan,
        task_list=tl,
    )


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """The event loop the async store and the app share (the TestClient runs requests on it)."""
    with anyio.from_thread.start_blocking_portal() as found:
        yield found


@pytest.fixture(scope="module")
def astore(ikigai_db_url: str, portal: BlockingPortal) -> Iterator[ik.AsyncStore]:
    store = portal.call(lambda: ik.AsyncStore.connect(ikigai_db_url, pool_size=2))
    yield store
    portal.call(store.close)


def _client(store: ik.AsyncStore, portal: BlockingPortal, *, writes: bool) -> TestClient:
    client = TestClient(
        create_app(store, allow_writes=writes),
        base_url="http://127.0.0.1:8765",
        follow_redirects=False,
    )
    client.portal = portal  # requests run on the store's loop
    return client


@pytest.fixture(scope="module")
def client(astore: ik.AsyncStore, portal: BlockingPortal) -> TestClient:
    return _client(astore, portal, writes=False)


@pytest.fixture(scope="module")
def writer(astore: ik.AsyncStore, portal: BlockingPortal) -> TestClient:
    return _client(astore, portal, writes=True)


def _pages(seed: Seed) -> list[str]:
    return [
        "/identities",
        "/identities?retired=1",
        "/identities/alice",
        *(f"/identities/alice?tab={t}" for t in ("unread", "starred", "snoozed", "trash", "sent")),
        f"/threads/{seed.hostile_mail.thread_id}",
        f"/threads/{seed.plan.thread_id}",
        f"/threads/{seed.review.thread_id}",
        f"/mail/{seed.hostile_mail.id}",
        "/topics",
        "/topics/news",
        "/topics/jobs",
        "/reviews",
        "/reviews?state=under_review",
        f"/reviews/{seed.review.review_id}",
        f"/reviews/{seed.review.short_id}",
        "/plans",
        "/plans?state=pending",
        "/tasks",
        "/tasks/list-1",
        "/leases",
        "/activity",
        "/activity?identity=bob&type=plan_submitted",
        "/search",
        "/search?q=alert",
        "/search?q=parser",
        "/sessions",
        f"/sessions/{seed.session_id}",
        f"/sessions/{seed.session_id}/tree",
        f"/events/{seed.event_ids[-1]}",
    ]


def test_every_page_renders(client: TestClient, writer: TestClient, seed: Seed) -> None:
    """Every page answers 200 with a whole HTML page, read-only and with writes on."""
    for web in (client, writer):
        for path in _pages(seed):
            response = web.get(path)
            assert response.status_code == 200, (path, response.text[:300])
            assert response.text.startswith("<!doctype html>"), path
            assert "content-security-policy" in response.headers


def test_pages_show_the_seeded_state(client: TestClient, seed: Seed) -> None:
    """What each page is for is there: counts, offsets and lag, claims with a countdown, dead
    letters with their error, the lit review state, the task graph's states, leases."""
    page = client.get("/identities").text
    assert 'href="/identities/alice"' in page and "carol" not in page
    assert "carol" in client.get("/identities?retired=1").text
    assert re.search(
        r'<tr class="identity" data-id="\d+">\s*<td><a class="who" href="/identities/helper"', page
    )
    inbox = client.get("/identities/alice").text
    rows = re.findall(r'<tr class="mail state-(\w+)" data-id="(\d+)"', inbox)
    assert {int(i) for _, i in rows} >= {seed.plain_mail.id, seed.hostile_mail.id}
    assert f'href="/threads/{seed.plain_mail.thread_id}#m{seed.plain_mail.id}"' in inbox
    assert 'class="badge urgent">urgent<' in inbox
    news = client.get("/topics/news").text
    assert re.search(r'href="/identities/alice"><bdi>alice</bdi></a></td>\s*<td>1 ', news)
    assert "2 behind" in news
    jobs = client.get("/topics/jobs").text
    assert "1 claimed" in jobs and "1 dead" in jobs
    assert re.search(r'class="countdown" data-left="(29\d|300)(\.\d)?"', jobs)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in jobs  # the dead letter's last error
    review = client.get(f"/reviews/{seed.review.review_id}").text
    assert '<g class="state lit" data-state="changes_requested">' in review
    assert review.count("state lit") == 1
    graph = client.get("/tasks/list-1").text
    assert re.findall(r'data-state="(\w+)"', graph) == ["claimed", "blocked", "blocked"]
    leases = client.get("/leases").text
    assert "file:a.py" in leases and "file:b.py" in leases and "force release" not in leases


def test_unknown_names_are_404(client: TestClient, seed: Seed) -> None:
    """Unknown identities, topics, lists, reviews, mail and threads are a 404 page."""
    for path in (
        "/identities/nobody",
        "/topics/nothing",
        "/tasks/no-such-list",
        f"/reviews/{uuid.uuid4()}",
        "/reviews/abcdef12",
        "/mail/999999999",
        "/threads/no-such-thread",
        "/nowhere",
    ):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "<h1>404</h1>" in response.text


def test_bad_parameters_are_400(client: TestClient) -> None:
    """A bad tab, state, type, page cursor or name is a 400 page naming the problem."""
    for path in (
        "/identities/alice?tab=everything",
        "/identities/alice?before=soon",
        "/identities/alice?before=-1",
        "/identities/bad%20name",
        "/reviews?state=done",
        "/reviews/zz",
        "/plans?state=maybe",
        "/activity?type=gossip",
        "/activity?identity=%3Cx%3E",
        "/activity?before=1e9",
        "/sessions?before=x",
        "/events/x",
    ):
        response = client.get(path)
        assert response.status_code == 400, (path, response.status_code)
        assert "<h1>400</h1>" in response.text


def _assert_escaped(html: str, where: str) -> None:
    assert "<script>alert" not in html, where
    assert "<img src=x" not in html, where
    assert "\u202e" not in html, where
    assert "&lt;U+202E&gt;" in html, where


def test_hostile_text_is_escaped(client: TestClient, seed: Seed) -> None:
    """An agent's subject, body, branch, title, error or task subject shows as text
    everywhere, its text direction control written out, never as markup."""
    for path in (
        "/identities/alice",
        "/identities/worker",
        f"/threads/{seed.hostile_mail.thread_id}",
        f"/mail/{seed.hostile_mail.id}",
        "/topics/jobs",
        "/reviews",
        f"/reviews/{seed.review.review_id}",
        "/plans",
        "/tasks/list-1",
        "/search?q=alert",
        f"/sessions/{seed.session_id}",
    ):
        html = client.get(path).text
        _assert_escaped(html, path)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
    assert "\u202e" not in client.get("/activity").text


def test_hostile_names_in_addresses_are_escaped(client: TestClient) -> None:
    """A name in the address that is markup is refused with the name escaped."""
    for path in (
        "/identities/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/topics/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E",
        "/tasks/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/threads/%3Cscript%3Ealert(1)%3C%2Fscript%3E%E2%80%AE",
    ):
        response = client.get(path)
        assert response.status_code in (400, 404), path
        assert "<script>alert" not in response.text and "<img src=x" not in response.text
        assert "\u202e" not in response.text


def test_search_snippets_mark_matches_only(client: TestClient, seed: Seed) -> None:
    """Search hits link to their event or mail (of ``seed``: asked for, so that the test
    does not depend on which tests ran before it in its worker); the snippet's marks become
    <mark> around the match only, everything else escaped."""
    html = client.get("/search?q=parser").text
    assert re.search(r'<a href="/events/\d+">#\d+</a>', html)
    assert "<mark><bdi>parser</bdi></mark>" in html
    assert "[done]" in html  # the text's own brackets stay text
    marked = highlight("see [done] and [<b>x</b>] [[parser]]", "parser")
    assert str(marked).count("<mark>") == 1
    assert "&lt;b&gt;x&lt;/b&gt;" in marked


def test_a_big_body_is_cut_on_lists(client: TestClient, seed: Seed) -> None:
    """A 1 MB body costs the inbox and the thread a bounded cut, with the whole on its
    own page."""
    inbox = client.get("/identities/alice")
    assert len(inbox.text) < 100_000
    assert "more characters" in inbox.text
    thread = client.get(f"/threads/{seed.big_mail.thread_id}").text
    assert len(thread) < 100_000
    assert f'href="/mail/{seed.big_mail.id}">the whole mail</a>' in thread
    whole = client.get(f"/mail/{seed.big_mail.id}").text
    assert whole.count("b" * 1000) >= BIG // 1000 - 1


def test_live_regions_name_their_channels(
    client: TestClient, seed: Seed, portal: BlockingPortal, astore: ik.AsyncStore
) -> None:
    """Each page's live region follows the right channel and renders alone as a fragment."""
    key = portal.call(lambda: astore._run(notify.thread_hash(seed.hostile_mail.thread_id)))
    review_key = portal.call(lambda: astore._run(notify.thread_hash(seed.review.thread_id)))
    expected = {
        "/identities/alice": f"mail:{seed.alice_id}",
        f"/threads/{seed.hostile_mail.thread_id}": f"thread:{key}",
        "/topics/jobs": f"queue:{seed.jobs.id} mail:*",
        f"/reviews/{seed.review.review_id}": f"thread:{review_key}",
        "/tasks/list-1": f"task:{seed.task_list.id}",
        "/tasks": "task:*",
        "/leases": "lease:*",
        "/activity": "mail:* task:* lease:*",
        "/identities": "mail:*",
        "/topics": "queue:* mail:*",
        "/plans": "mail:*",
        "/reviews": "mail:*",
    }
    for path, live in expected.items():
        html = client.get(path).text
        found = re.search(r'data-live="([^"]*)" data-src="([^"]*)"', html)
        assert found is not None, path
        assert found[1] == live, path
        src = found[2].replace("&amp;", "&")
        assert src.endswith("fragment=1"), path
        fragment = client.get(src)
        assert fragment.status_code == 200, src
        assert "<html" not in fragment.text and "<nav>" not in fragment.text, src
    fragment = client.get("/identities/alice?tab=unread&fragment=1").text
    assert f'class="mail state-unread" data-id="{seed.hostile_mail.id}"' in fragment
    assert "data-live" not in client.get("/activity?before=999999").text


def _csrf(client: TestClient, path: str = "/plans") -> str:
    found = re.search(r'<meta name="csrf-token" content="([^"]+)">', client.get(path).text)
    assert found is not None
    return found[1]


def _acked(store: ik.Store, mail_id: int) -> datetime | None:
    for item in store.mail.inbox("alice", limit=200):
        if item.mail.id == mail_id:
            return item.acked_at
    raise AssertionError(f"mail {mail_id} is not in alice's inbox")


def test_writes_are_refused_unless_allowed_and_from_this_server(
    client: TestClient, writer: TestClient, seed: Seed, ikigai_module_store: ik.Store
) -> None:
    """An ack is 403 on a read-only server, and on a writing one without the CSRF token,
    with a wrong one (non-ASCII included), or from a foreign origin; nothing is written."""
    path = f"/identities/alice/mail/{seed.ack_mail.id}/ack"
    token = _csrf(writer)
    assert "writes on" in writer.get("/plans").text and "writes on" not in client.get("/plans").text
    assert 'action="/plans/' not in client.get("/plans").text
    refused = [
        client.post(path, data={"csrf": _csrf(client)}),
        writer.post(path, data={}),
        writer.post(path, data={"csrf": token + "x"}),
        writer.post(path, data={"csrf": _csrf(client)}),  # another server's token
        writer.post(path, data={"csrf": token}, headers={"origin": "http://localhost:9999"}),
        writer.post(path, data={"csrf": token}, headers={"origin": "https://evil.example"}),
        writer.post(path, data={"csrf": "é" + token[1:]}),  # not ASCII: a 403, not a 500
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert _acked(ikigai_module_store, seed.ack_mail.id) is None


def test_writes_act_and_redirect(
    writer: TestClient, seed: Seed, ikigai_module_store: ik.Store
) -> None:
    """With writes on and the token: ack, requeue, force release and decide act, then 303."""
    s = ikigai_module_store
    to_ack = s.mail.send("bob", "alice", "ack me too", "please")
    s.topics.create("jobs2", kind="queue", max_attempts=1)
    s.topics.subscribe("worker", "jobs2")
    s.mail.publish("bob", "jobs2", "job", "do it")
    claim = s.topics.claim("worker", "jobs2", ttl=60)
    assert claim is not None
    s.topics.release(claim, error="failed")
    s.leases.acquire("alice", "file:c.py", ttl=300)
    plan = s.plans.submit("bob", "plans/c.md", "to decide", "decide me")
    token = _csrf(writer)
    own = {"origin": "http://127.0.0.1:8765"}
    response = writer.post(
        f"/identities/alice/mail/{to_ack.id}/ack", data={"csrf": token}, headers=own
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/identities/alice"
    assert _acked(s, to_ack.id) is not None
    response = writer.post(f"/topics/jobs2/dead/{claim.mail.id}/requeue", data={"csrf": token})
    assert response.status_code == 303
    assert s.topics.dead_letters("jobs2") == []
    response = writer.post("/leases/release", data={"csrf": token, "resource": "file:c.py"})
    assert response.status_code == 303
    assert "file:c.py" not in [lease.resource for lease in s.leases.held()]
    response = writer.post(
        f"/plans/{plan.plan_review_id}/decide",
        data={"csrf": token, "state": "changes_requested", "comment": "split it " + HOSTILE},
        headers={"referer": "http://127.0.0.1:8765/plans?state=pending"},
    )
    assert response.status_code == 303
    assert response.headers["location"] == "http://127.0.0.1:8765/plans?state=pending"
    decided = s.plans.get(plan.plan_review_id)
    assert decided.state == "changes_requested" and decided.reviewed_by == "User"
    _assert_escaped(writer.get("/plans").text, "/plans")


def test_bad_writes_are_400_and_write_nothing(
    writer: TestClient, seed: Seed, ikigai_module_store: ik.Store
) -> None:
    """A bad decision, a mail that is no dead letter of the topic, an empty resource, a mail
    the identity did not receive: 400 (or 404), nothing written."""
    s = ikigai_module_store
    token = _csrf(writer)
    plan = seed.plan.plan_review_id
    for data in (
        {"csrf": token, "state": "maybe"},
        {"csrf": token, "state": "approved", "reviewed_by": "<script>"},
        {"csrf": token, "state": "pending"},
    ):
        assert writer.post(f"/plans/{plan}/decide", data=data).status_code == 400
    assert (
        writer.post(
            "/plans/not-a-plan/decide", data={"csrf": token, "state": "approved"}
        ).status_code
        == 400
    )
    assert s.plans.get(plan).state == "pending"
    assert (
        writer.post(
            f"/topics/news/dead/{seed.plain_mail.id}/requeue", data={"csrf": token}
        ).status_code
        == 400
    )
    assert (
        writer.post(
            f"/topics/jobs/dead/{seed.plain_mail.id}/requeue", data={"csrf": token}
        ).status_code
        == 400
    )
    assert writer.post("/leases/release", data={"csrf": token}).status_code == 400
    assert (
        writer.post("/leases/release", data={"csrf": token, "resource": "x" * 600}).status_code
        == 400
    )
    assert {"file:a.py", "file:b.py"} <= {lease.resource for lease in s.leases.held()}
    response = writer.post(
        f"/identities/worker/mail/{seed.plain_mail.id}/ack", data={"csrf": token}
    )
    assert response.status_code == 404
    assert writer.get(f"/identities/alice/mail/{seed.plain_mail.id}/ack").status_code == 405


def test_history_pages_page(client: TestClient, seed: Seed) -> None:
    """The sessions list, a timeline page before an id, and the tail after one."""
    sid, ids = seed.session_id, seed.event_ids
    assert f'data-id="{sid}"' in client.get("/sessions").text
    assert f'data-id="{sid}"' not in client.get(f"/sessions?before={sid}").text
    page = client.get(f"/sessions/{sid}?before={ids[3]}").text
    shown = [int(i) for i in re.findall(r'<li class="event[^"]*" id="e(\d+)"', page)]
    assert shown == ids[:3]
    tail = client.get(f"/sessions/{sid}/tail?after={ids[3]}").text
    assert [int(i) for i in re.findall(r'id="e(\d+)"', tail)] == ids[4:]


def test_task_graph_layers_follow_blockers() -> None:
    """A blocker is drawn left of what it blocks; its arrow ends at the blocked task."""
    now = datetime.now(UTC)

    def task(key: str, blocked_by: tuple[str, ...], status: str = "pending") -> ik.Task:
        return ik.Task(
            id=int(key),
            list_id="l",
            external_id=key,
            subject=f"t{key}",
            description=None,
            active_form=None,
            metadata={},
            status=status,
            owner=None,
            blocked_by=blocked_by,
            blocks=(),
            created_at=now,
            updated_at=now,
            started_at=None,
            completed_at=None,
        )

    graph = task_graph([task("3", ("2",)), task("2", ("1",)), task("1", (), "completed")])
    x = {n.task.external_id: n.x for n in graph.nodes}
    assert x["1"] < x["2"] < x["3"]
    assert {n.task.external_id: n.state for n in graph.nodes} == {
        "1": "completed",
        "2": "available",
        "3": "blocked",
    }
    assert len(graph.edges) == 2 and graph.width > 3 * 170


def test_an_inbox_pages_by_before(
    client: TestClient, seed: Seed, ikigai_module_store: ik.Store
) -> None:
    """An inbox shows 50 mails, newest first, and an "older" link to the rest."""
    s = ikigai_module_store
    s.identities.register("pager")
    sent = [s.mail.send("bob", "pager", f"m{n}", "x").id for n in range(55)]
    first = client.get("/identities/pager").text
    ids = [int(i) for i in re.findall(r'<tr class="mail state-\w+" data-id="(\d+)"', first)]
    assert ids == sent[::-1][:50]
    found = re.search(r'href="\?tab=inbox&amp;before=(\d+)">older', first)
    assert found is not None and int(found[1]) == sent[5]
    rest = client.get(f"/identities/pager?before={found[1]}").text
    ids = [int(i) for i in re.findall(r'<tr class="mail state-\w+" data-id="(\d+)"', rest)]
    assert ids == sent[::-1][50:]
    assert "older" not in rest


def test_a_pop_is_shown_and_its_target_struck(
    client: TestClient, ikigai_module_store: ik.Store
) -> None:
    """A timeline marks the event a pop removed as popped (not live), and the pop links to it;
    the events replay keeps stay live."""
    store = ikigai_module_store
    sid = store.create_session("pops")
    kept = store.append(sid, "user", "kept")
    dropped = store.append(sid, "assistant", "dropped")
    assert store.pop_session(sid) == dropped
    pop = store.messages(sid)[-1]
    page = client.get(f"/sessions/{sid}").text
    states = {
        int(i): classes.split()
        for classes, i in re.findall(r'<li class="event ([^"]*)" id="e(\d+)"', page)
    }
    assert "live" in states[kept.id]
    assert "popped" in states[dropped.id] and "live" not in states[dropped.id]
    assert "pop" in states[pop.id] and "live" not in states[pop.id]
    assert f"popped #{dropped.id}" in page
