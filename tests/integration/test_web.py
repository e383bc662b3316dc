"""The web server's own guarantees, against a real ``ikigai-store web`` process and database:
the guard (loopback Host/Origin, the token on pages and on the event stream, security headers),
the ``/live`` stream (a change per notification, resuming after a reconnection without losing
one, ``reset`` when it cannot), the timeline's tail (nothing skipped when ids commit out of
order) and the timeline's pages. The pages' contents are in test_web_pages.py; the browser
tests in test_web_browser.py.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

import ikigai_store as ik
from ikigai_store.web import live, timeline

pytestmark = pytest.mark.db


class Server:
    """A running ``ikigai-store web`` process."""

    def __init__(self, url: str, *args: str) -> None:
        env = {**os.environ, "IKIGAI_DATABASE_URL": url, "PYTHONUNBUFFERED": "1"}
        if "--token" not in args and "IKIGAI_WEB_TOKEN" not in env:
            args = (*args, "--no-token")  # the open loopback view these tests read
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ikigai_store", "web", "--port", "0", *args],
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        found = re.search(r"serving http://([^/]+):(\d+)/", line)
        assert found, f"no serving line: {line!r}"
        self.host, self.port = found[1], int(found[2])

    def request(
        self,
        path: str,
        *,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: str | None = None,
    ) -> tuple[int, dict[str, str], str]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            got = {k.lower(): v for k, v in response.getheaders()}
            return response.status, got, response.read().decode()
        finally:
            conn.close()

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(10)
        finally:
            if self.proc.stderr is not None:
                self.proc.stderr.close()


@pytest.fixture(scope="module")
def server(ikigai_db_url: str) -> Iterator[Server]:
    running = Server(ikigai_db_url)
    yield running
    assert running.stop() == 0


class Events:
    """An open ``/live`` stream read on a socket: the SSE events as (event, id, data)."""

    def __init__(self, server: Server, headers: dict[str, str] | None = None) -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=10)
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.sock.sendall(
            f"GET /live HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n{extra}\r\n".encode()
        )
        self.buffer = b""
        head = self._until(b"\r\n\r\n")
        self.status = int(head.split(b" ", 2)[1])

    def _until(self, marker: bytes, timeout: float = 5.0) -> bytes:
        deadline = time.monotonic() + timeout
        while marker not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError(f"no {marker!r} within {timeout} s: {self.buffer[-200:]!r}")
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("the stream ended")
            self.buffer += chunk
        found, _, self.buffer = self.buffer.partition(marker)
        return found

    def next(self, timeout: float = 5.0) -> tuple[str, str, Any]:
        """The next event (comments and the retry line skipped); chunked framing is stripped
        by looking for the SSE fields only."""
        while True:
            block = self._until(b"\n\n", timeout).decode()
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in fields:
                return fields["event"], fields.get("id", ""), json.loads(fields["data"])

    def close(self) -> None:
        self.sock.close()


def test_security_headers_and_loopback_host(server: Server) -> None:
    status, headers, body = server.request("/sessions")
    assert status == 200
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-frame-options"] == "DENY"
    assert headers["cache-control"] == "no-store"
    assert '<meta name="csrf-token"' in body
    # DNS rebinding: a page of evil.example resolving to 127.0.0.1 sends its own Host.
    status, _, _ = server.request("/sessions", headers={"Host": f"evil.example:{server.port}"})
    assert status == 403
    status, _, _ = server.request("/sessions", headers={"Origin": "http://evil.example"})
    assert status == 403


def test_token_on_pages_and_streams(ikigai_db_url: str) -> None:
    """With --token: 401 without it, or with a wrong one (non-ASCII included); ?token= sets a
    cookie and redirects to this server's page without the token; the cookie or a bearer
    header opens pages and the event stream."""
    token = "t0ken-with-symbols;=,"
    running = Server(ikigai_db_url, "--token", token)
    try:
        assert running.request("/sessions")[0] == 401
        assert running.request("/sessions?token=wrong")[0] == 401
        events = Events(running)
        assert events.status == 401
        events.close()
        status, headers, _ = running.request(f"/sessions?q=x&token={quote(token)}")
        assert status == 303 and headers["location"] == "/sessions?q=x"
        # The redirect stays on this server: one leading slash, whatever the path held.
        for path in ("//evil.example", "/%2F%2Fevil.example", "/%5Cevil.example"):
            status, headers, _ = running.request(f"{path}?token={quote(token)}")
            assert status == 303 and headers["location"] == "/evil.example", (path, headers)
        # A token that is not ASCII is a wrong token (401), not a server error.
        assert running.request("/sessions?token=%C3%A9")[0] == 401
        assert (
            running.request("/sessions", headers={"Cookie": 'ikigai_web_token="\\351"'})[0] == 401
        )
        cookie = headers["set-cookie"].split(";", 1)[0]
        assert token not in headers["set-cookie"] and "HttpOnly" in headers["set-cookie"]
        assert running.request("/sessions", headers={"Cookie": cookie})[0] == 200
        assert running.request("/static/app.js", headers={"Cookie": cookie})[0] == 200
        bearer = {"Authorization": f"Bearer {token}"}
        assert running.request("/sessions", headers=bearer)[0] == 200
        events = Events(running, {"Cookie": cookie})
        assert events.status == 200
        events.close()
    finally:
        assert running.stop() == 0


def test_off_loopback_needs_a_token(ikigai_db_url: str) -> None:
    env = {**os.environ, "IKIGAI_DATABASE_URL": ikigai_db_url}
    env.pop("IKIGAI_WEB_TOKEN", None)
    done = subprocess.run(
        [sys.executable, "-m", "ikigai_store", "web", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert "without a token" in done.stderr


def test_loopback_needs_a_token_it_makes_unless_told_not_to(ikigai_db_url: str) -> None:
    """Loopback is reachable by every local user: with no token given, the view makes one and
    prints the address to open with it; a request without it is 401, the address logs in.
    ``--no-token`` with a token is a usage error."""
    env = {**os.environ, "IKIGAI_DATABASE_URL": ikigai_db_url, "PYTHONUNBUFFERED": "1"}
    env.pop("IKIGAI_WEB_TOKEN", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ikigai_store", "web", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"serving http://([^/]+):(\d+)/\?token=([\w-]{20,})$", line.strip())
        assert found, line
        host, port, token = found[1], int(found[2]), found[3]
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("GET", "/sessions")
        assert conn.getresponse().status == 401
        conn.close()
        conn = http.client.HTTPConnection(host, port, timeout=10)
        conn.request("GET", f"/?token={token}")
        response = conn.getresponse()
        assert response.status == 303 and "HttpOnly" in (response.getheader("set-cookie") or "")
        conn.close()
    finally:
        proc.terminate()
        proc.communicate(timeout=30)  # closes its stderr pipe
    both = subprocess.run(
        [sys.executable, "-m", "ikigai_store", "web", "--no-token", "--token", "t" * 32],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert both.returncode == 1 and "exclude each other" in both.stderr


@pytest.mark.parametrize("server", ["web", "mcp"])
def test_an_address_it_cannot_serve_on_is_one_error_line(server: str, ikigai_db_url: str) -> None:
    """A port in use, a host that does not resolve, an address not this machine's: ``Error:``
    naming it, exit 1, no traceback (uvicorn itself logs and exits 3)."""
    env = {**os.environ, "IKIGAI_DATABASE_URL": ikigai_db_url}
    command = [
        sys.executable,
        "-m",
        "ikigai_store",
        *(["mcp", "--http"] if server == "mcp" else ["web"]),
    ]
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cases = {
            ("--port", str(port)): f"cannot serve on 127.0.0.1:{port}: Address already in use",
            ("--host", "nowhere.invalid", "--port", "0"): "cannot serve on nowhere.invalid: ",
            ("--host", "192.0.2.1", "--port", "0", "--token", "t" * 32): (
                "cannot serve on 192.0.2.1:0: Cannot assign requested address"
            ),
        }
        for arguments, message in cases.items():
            done = subprocess.run(
                [*command, *arguments], capture_output=True, text=True, env=env, timeout=60
            )
            assert done.returncode == 1, done.stderr
            assert done.stderr.startswith(f"Error: {message}"), done.stderr
            assert done.stderr.count("\n") == 1, done.stderr


def test_live_stream_reports_changes_and_resumes(server: Server, ikigai_db_url: str) -> None:
    """A mail is a ``change`` naming the recipient; after a reconnection with Last-Event-ID
    the missed changes come first; an unknown id gets ``reset``."""
    store = ik.Store(ikigai_db_url, pool_size=1)
    try:
        a = store.identities.register(f"web-a-{time.monotonic_ns()}")
        b = store.identities.register(f"web-b-{time.monotonic_ns()}")
        events = Events(server)
        assert events.status == 200
        time.sleep(0.3)  # the server's LISTEN is in place before the first page asks
        store.mail.send(a, b, "hello", "body")
        event, first_id, _ = _next_mail(events, b.id)
        assert event == "change"
        events.close()
        store.mail.send(a, b, "while away 1", "body")
        store.mail.send(a, b, "while away 2", "body")
        time.sleep(0.5)
        again = Events(server, {"Last-Event-ID": first_id})
        missed = [_next_mail(again, b.id) for _ in range(2)]
        assert all(e == "change" for e, _, _ in missed)
        again.close()
        stale = Events(server, {"Last-Event-ID": "another-server-7"})
        assert stale.next()[0] == "reset"
        stale.close()
    finally:
        store.close()


def test_a_queue_page_registers_its_topic_for_publishes(server: Server, ikigai_db_url: str) -> None:
    """A queue publish notifies only topics someone listens to (migration 0050): before any
    page showed the topic, a publish is no ``change``; once its page was served (the server
    registers the topic), a publish is a ``queue`` change naming it."""
    with ik.Store(ikigai_db_url, pool_size=1) as store:
        pub = store.identities.register(f"web-pub-{time.monotonic_ns()}")
        topic = store.topics.create(f"web-jobs-{time.monotonic_ns()}", "queue")
        events = Events(server)
        time.sleep(0.3)  # the server's LISTEN is in place
        store.mail.publish(pub, topic, "unheard", "x")
        store.mail.send(pub, pub, "marker", "x")  # a change that comes after the publish
        seen: list[Any] = []
        _next_mail(events, pub.id, skipped=seen)
        assert not [d for d in seen if d["c"] == "queue"], seen
        assert server.request(f"/topics/{quote(topic.name, safe='')}")[0] == 200
        store.mail.publish(pub, topic, "heard", "x")
        while True:
            event, _, data = events.next()
            if event == "change" and data["c"] == "queue":
                assert data["ids"] == [topic.id]
                break
        events.close()


def _next_mail(
    events: Events, identity_id: int, skipped: list[Any] | None = None
) -> tuple[str, str, Any]:
    """The next mail change naming ``identity_id``; the events' data before it go to
    ``skipped``."""
    while True:
        event, id_, data = events.next()
        if event == "change" and data["c"] == "mail" and identity_id in (data["ids"] or []):
            return event, id_, data
        if skipped is not None:
            skipped.append(data)


def test_hub_resumes_from_its_buffer_or_resets() -> None:
    """``Hub._missed``: nothing after the newest id, the events after a known one, None (reset)
    for another epoch, an id from the future, or one older than the buffer."""
    hub = live.Hub.__new__(live.Hub)
    live.Hub.__init__(hub, store=None)  # type: ignore[arg-type]
    for n in range(3):
        hub.publish("change", json.dumps({"c": "mail", "ids": [n]}))
    assert hub._missed(None) == []
    assert hub._missed(f"{hub.epoch}-3") == []
    assert [n for n, _ in hub._missed(f"{hub.epoch}-1") or []] == [2, 3]
    assert hub._missed(f"{hub.epoch}-9") is None
    assert hub._missed("00000000-1") is None
    assert hub._missed(f"{hub.epoch}-x") is None
    for _ in range(live.BUFFER):
        hub.publish("change", "{}")
    assert hub._missed(f"{hub.epoch}-1") is None


def test_tail_waits_for_appends_in_flight(ikigai_db_url: str) -> None:
    """An append that took its id first but commits last is not skipped: the tail after the
    other's id waits for it (session_wait_appends), so following by id is safe."""
    store = ik.Store(ikigai_db_url, pool_size=3)
    try:
        sid = store.create_session("tail")
        base = store.append(sid, "user", "before").id
        took_id = threading.Event()
        release = threading.Event()
        early: list[int] = []

        def slow_append() -> None:
            with store.transaction():
                early.append(store.append(sid, "user", "slow").id)
                took_id.set()
                release.wait(5)

        slow = threading.Thread(target=slow_append)
        slow.start()
        assert took_id.wait(5)
        later = store.append(sid, "user", "fast").id
        assert later > early[0]
        threading.Timer(0.1, release.set).start()
        rows = store._run(timeline.tail(sid, base))
        slow.join()
        assert [r.id for r in rows] == [early[0], later]
    finally:
        store.close()


def test_tail_gives_up_on_a_long_transaction(ikigai_db_url: str, server: Server) -> None:
    """An append held open past the lock timeout: the tail answers X-Retry (the page asks
    again) instead of blocking appends behind it."""
    store = ik.Store(ikigai_db_url, pool_size=2)
    try:
        sid = store.create_session("held")
        with store.transaction():
            store.append(sid, "user", "held open")
            status, headers, body = server.request(f"/sessions/{sid}/tail?after=0")
        assert status == 200 and headers.get("x-retry") == "1" and body == ""
        status, headers, body = server.request(f"/sessions/{sid}/tail?after=0")
        assert status == 200 and "x-retry" not in headers and "held open" in body
    finally:
        store.close()


def test_timeline_pages_by_id(ikigai_db_url: str, server: Server) -> None:
    """The newest page first; ?before= goes back; ?after= forward; a long content is cut."""
    store = ik.Store(ikigai_db_url, pool_size=1)
    try:
        sid = store.create_session("pages")
        ids = [store.append(sid, "user", f"n{i}").id for i in range(timeline.PAGE + 5)]
        big = store.append(sid, "assistant", "x" * 10_000).id
        status, _, body = server.request(f"/sessions/{sid}")
        shown = [int(i) for i in re.findall(r'class="event[^"]*"[^>]*data-id="(\d+)"', body)]
        assert status == 200 and shown == [*ids, big][-timeline.PAGE :]
        assert "8,000 more characters" in body and "x" * 2001 not in body
        status, _, body = server.request(f"/sessions/{sid}?before={shown[0]}")
        older = [int(i) for i in re.findall(r'class="event[^"]*"[^>]*data-id="(\d+)"', body)]
        assert older == ids[: len(ids) + 1 - timeline.PAGE]
        assert server.request(f"/sessions/{sid}?before=abc")[0] == 400
        assert server.request("/sessions/999999999")[0] == 404
        status, _, body = server.request(f"/events/{big}")
        assert status == 200 and "x" * 10_000 in body
    finally:
        store.close()
