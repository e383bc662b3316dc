"""Benchmark report: the web view's timeline page, its push latency and its database connections.

Usage: ``python scripts/bench_web.py [--database URL] [--events N] [--requests N] [--sends N]
[--streams N]``

Measured in one run, each against a baseline taken in the same run, with ``ikigai-store web``
spawned on scratch databases (``ikigai_bench_<pid>_web_<role>`` on the server of
``--database``, default the embedded server; dropped at the end, even on failure):

1. server time of the timeline page ``/sessions/<id>`` of a session of ``--events`` events
   (default 100,000) vs one of 1,000 with the same mark and rewind at its end: the median wall
   time of a GET on one keep-alive connection (``http.client``), ``--requests`` per side
   (default 40) in interleaved rounds. Goal: ratio <= 1.5. The same for ``?view=model`` (the
   replayed context), reported without a goal;
2. push latency: an inbox page open in headless Chromium (the system's, through Playwright)
   with a ``MutationObserver`` that stamps ``performance.timeOrigin + performance.now()`` when
   a new ``.mail[data-id]`` appears; ``--sends`` mails (default 50) sent one at a time with
   ``store.mail.send``, each measured from ``time.time()`` just before the send starts (its
   commit is inside: a notification is delivered at commit, often before the sender hears of
   it) to that stamp; p50 / p95, beside the send's own duration and the floor, a bare
   ``LISTEN ikigai_mail`` connection in this process hearing the same sends. Goal: p50 <=
   100 ms (Subtrate refreshes every 5 s);
3. ``--streams`` (default 50) open ``/live`` event streams (raw sockets), while pages are
   being loaded 8 at a time: the client backends on the server's own scratch database (no
   other process uses it; this script's counting connection excluded), sampled every 20 ms,
   vs the store's pool size + 1 listening connection.

Nothing is asserted on timings; the exit status is 1 only on errors or when a check fails
(an event stream that does not answer 200).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import inspect
import socket
import statistics
import threading
import time
import urllib.parse
from collections.abc import Callable

import psycopg
from benchkit import (
    Row,
    Scratch,
    arguments,
    environment,
    interleaved,
    ms,
    pct,
    run,
    server_url,
    step,
    summary,
)
from playwright.sync_api import Page
from webtools import Server, chromium, web_server

import ikigai_store as ik

RATIO_GOAL = 1.5
PUSH_GOAL_S = 0.100
SUBTRATE_POLL_S = 5.0

# ------------------------------------------------------------------------------- timeline

_BULK = """
INSERT INTO messages (session_id, kind, content)
SELECT %(sid)s, CASE WHEN g %% 2 = 1 THEN 'user' ELSE 'assistant' END,
       'turn ' || g || ': the parser reads the include directive, resolves the path '
       || 'against the search list and reports a cycle as an error with both spans'
FROM generate_series(1, %(n)s) AS g
"""


def session_of(url: str, events: int, title: str) -> int:
    """A session of ``events`` events: a few turns, the bulk, then a mark, a detour, a rewind
    to the mark and a last exchange (so the replayed context holds nearly every event)."""
    with ik.Store(url, pool_size=1) as store:
        sid = store.create_session(title)
        for i in range(3):
            store.append(sid, "user", f"opening turn {i}")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(_BULK, {"sid": sid, "n": max(0, events - 12)})
        mark = store.append(sid, "mark", "before-detour", {"label": "before-detour"})
        for i in range(3):
            store.append(sid, "assistant", f"detour {i}")
        store.append(
            sid,
            "rewind",
            "before-detour",
            {"target_message_id": mark.id, "target_label": "before-detour"},
        )
        for i in range(4):
            store.append(sid, "user" if i % 2 == 0 else "assistant", f"closing turn {i}")
        assert store.count_messages(sid) == max(events, 12)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM (ANALYZE) messages")
    return sid


class Client:
    """GETs on one keep-alive connection to the server; a non-200 is an error."""

    def __init__(self, server: Server) -> None:
        host, port = server.host_port
        self.conn = http.client.HTTPConnection(host, port, timeout=60)

    def get(self, path: str) -> None:
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"GET {path} answered {response.status}: {body[:200]!r}")

    def getter(self, path: str) -> Callable[[], None]:
        return lambda: self.get(path)

    def close(self) -> None:
        self.conn.close()


def measure_timeline(scratch: Scratch, events: int, requests: int) -> list[Row]:
    print(f"\n[1] the timeline page: a {events:,}-event session vs a 1,000-event one")
    url = scratch.create("timeline")
    with step(f"write the sessions ({events:,} + 1,000 events)"):
        big = session_of(url, events, "bench web: long")
        small = session_of(url, 1000, "bench web: short")
    rows = []
    with web_server(url) as server:
        for view, label in (("", "timeline page"), ("?view=model", "timeline ?view=model")):
            client = Client(server)
            sides = {
                "short": client.getter(f"/sessions/{small}{view}"),
                "long": client.getter(f"/sessions/{big}{view}"),
            }
            per_round = 5
            with step(f"{label}: {requests} GETs per side"):
                timings = interleaved(
                    sides, rounds=max(2, requests // per_round), per_round=per_round, warmup=3
                )
            client.close()
            ratio = timings.ratio("long", "short")
            print(f"    {1000:>7,}: {timings.line('short')}")
            print(f"    {events:>7,}: {timings.line('long')}")
            print(f"    {timings.round_ratios('long', 'short')}")
            goal, met = (f"<= {RATIO_GOAL}x", ratio <= RATIO_GOAL) if not view else ("", None)
            rows.append(
                Row(
                    f"{label}: {events:,} vs 1,000 events, p50 server time",
                    f"{ms(timings.p50('long'))} vs {ms(timings.p50('short'))} = {ratio:.2f}x",
                    goal,
                    met,
                )
            )
    return rows


# ------------------------------------------------------------------------------- push

_OBSERVE = """() => {
  window.__seen = {};
  const stamp = () => {
    const now = performance.timeOrigin + performance.now();
    for (const el of document.querySelectorAll('.mail[data-id]')) {
      if (!(el.dataset.id in window.__seen)) window.__seen[el.dataset.id] = now;
    }
  };
  stamp();
  new MutationObserver(stamp).observe(document.body, {childList: true, subtree: true});
}"""


def stamp_of(page: Page, mail_id: int, timeout: float = 10) -> float:
    """The observer's stamp of ``mail_id``'s row (ms since the epoch), polled (the page's CSP
    forbids the eval that ``wait_for_function`` needs; the stamp is taken in the page, so the
    polling does not move it)."""
    deadline = time.monotonic() + timeout
    while True:
        stamp = page.evaluate("id => window.__seen[id]", str(mail_id))
        if stamp is not None:
            return float(stamp)
        if time.monotonic() > deadline:
            raise RuntimeError(f"mail #{mail_id} did not appear in the open inbox in {timeout} s")
        time.sleep(0.002)


def bare_listener(url: str, stop: threading.Event) -> tuple[list[float], threading.Thread]:
    """A LISTEN ikigai_mail connection in a thread (it ends after ``stop``): the
    ``time.time()`` of each notification it hears, appended to the list returned."""
    heard: list[float] = []
    ready = threading.Event()

    def listen() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("LISTEN ikigai_mail")
            ready.set()
            while not stop.is_set():
                for _ in conn.notifies(timeout=0.2):
                    heard.append(time.time())

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    ready.wait(10)
    return heard, thread


def measure_push(scratch: Scratch, sends: int) -> list[Row]:
    print(f"\n[2] push latency: {sends} mails sent into an inbox open in Chromium")
    url = scratch.create("push")
    stop = threading.Event()
    dom: list[float] = []
    floor: list[float] = []
    took: list[float] = []
    with (
        ik.Store(url, pool_size=2) as store,
        web_server(url) as server,
        chromium() as browser,
    ):
        sender, me = store.identities.register("Sender"), store.identities.register("Reader")
        heard, listener = bare_listener(url, stop)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        inbox = f"{server.url}/identities/{urllib.parse.quote(me.name, safe='')}"
        response = page.goto(inbox)
        if response is None or response.status != 200:
            raise RuntimeError(f"{inbox} answered {response.status if response else 'nothing'}")
        page.wait_for_selector('#live-status[data-state="live"]', state="attached")
        page.evaluate(_OBSERVE)
        try:
            with step(f"{sends} sends, one at a time, after 5 to warm up"):
                for i in range(5 + sends):
                    before = len(heard)
                    started = time.time()
                    mail = store.mail.send(sender, me, f"bench {i}", "pushed, not polled")
                    sent = time.time()
                    stamped = stamp_of(page, mail.id) / 1000
                    deadline = time.monotonic() + 5
                    while len(heard) == before and time.monotonic() < deadline:
                        time.sleep(0.001)
                    if i >= 5:
                        dom.append(stamped - started)
                        took.append(sent - started)
                        floor.append(heard[before] - started)
                    time.sleep(0.05)
        finally:
            stop.set()
            listener.join(timeout=10)
    p50, p95 = pct(dom, 0.5), pct(dom, 0.95)
    print(f"    DOM   : p50 {ms(p50)}  p95 {ms(p95)}  max {ms(max(dom))}")
    print(f"    send  : p50 {ms(pct(took, 0.5))}  p95 {ms(pct(took, 0.95))}")
    print(f"    NOTIFY: p50 {ms(pct(floor, 0.5))}  p95 {ms(pct(floor, 0.95))}")
    return [
        Row("store.mail.send itself (to its commit): p50 / p95", _pair(took), "", None),
        Row(
            "send issued -> new .mail row in the open inbox's DOM: p50 / p95",
            _pair(dom),
            f"p50 <= {ms(PUSH_GOAL_S)}",
            p50 <= PUSH_GOAL_S,
        ),
        Row("send issued -> bare LISTEN hears NOTIFY (floor): p50 / p95", _pair(floor), "", None),
        Row("DOM / NOTIFY floor (p50)", f"{p50 / pct(floor, 0.5):.1f}x", "", None),
        Row(
            "Subtrate's 5 s poll (mean wait 2.5 s) / DOM p50",
            f"{SUBTRATE_POLL_S / 2 / p50:,.0f}x",
            "",
            None,
        ),
    ]


def _pair(xs: list[float]) -> str:
    return f"{ms(pct(xs, 0.5))} / {ms(pct(xs, 0.95))}"


# ------------------------------------------------------------------------------- streams

_BACKENDS = """
SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND pid <> pg_backend_pid()
  AND backend_type = 'client backend'
"""


def open_stream(server: Server) -> socket.socket:
    """A raw ``GET /live`` whose headers were read (200); the body is left unread."""
    host, port = server.host_port
    sock = socket.create_connection((host, port), timeout=10)
    sock.sendall(
        f"GET /live HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(4096)
        if not chunk:
            break
        head += chunk
    status = head.split(b"\r\n", 1)[0]
    if b" 200 " not in status + b" ":
        sock.close()
        raise RuntimeError(f"/live answered {status!r}")
    return sock


def measure_streams(scratch: Scratch, streams: int) -> list[Row]:
    pool = inspect.signature(ik.open_async).parameters["pool_size"].default
    print(f"\n[3] {streams} open /live streams: the server's database connections")
    url = scratch.create("streams")
    with ik.Store(url, pool_size=1) as store:
        sid = store.create_session("bench web: streams")
        for i in range(20):
            store.append(sid, "user", f"event {i}")
        who = store.identities.register("Reader").name
    inbox = f"/identities/{urllib.parse.quote(who, safe='')}"
    paths = ["/sessions", f"/sessions/{sid}", inbox, "/topics", "/activity"]
    with web_server(url) as server, psycopg.connect(url, autocommit=True) as db:

        def backends() -> int:
            row = db.execute(_BACKENDS).fetchone()
            return int(row[0]) if row else 0

        time.sleep(0.5)
        idle = backends()
        sockets = [open_stream(server) for _ in range(streams)]
        peak = 0
        loading = threading.Event()

        def fetch(path: str) -> None:
            client = Client(server)
            try:
                client.get(path)
            finally:
                client.close()

        def load_pages() -> None:
            with concurrent.futures.ThreadPoolExecutor(8) as workers:
                while not loading.is_set():
                    list(workers.map(fetch, paths * 2))

        try:
            with step(f"{streams} streams open; pages loaded 8 at a time for 3 s"):
                loader = threading.Thread(target=load_pages, daemon=True)
                loader.start()
                deadline = time.monotonic() + 3
                samples = []
                while time.monotonic() < deadline:
                    samples.append(backends())
                    time.sleep(0.02)
                loading.set()
                loader.join(timeout=30)
            peak = max(samples)
            settled = backends()
        finally:
            for sock in sockets:
                sock.close()
    print(f"    before any stream: {idle}; during: median {statistics.median(samples):.0f}")
    return [
        Row(
            f"{streams} /live streams answered 200",
            f"{len(sockets)}",
            "all",
            len(sockets) == streams,
            check=True,
        ),
        Row(
            f"server's DB connections, {streams} streams open + page loads (peak)",
            f"{peak} (idle {idle}, after {settled})",
            f"<= pool {pool} + 1 listener",
            peak <= pool + 1,
        ),
    ]


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--events", type=int, default=100_000, help="the long session's events")
    parser.add_argument("--requests", type=int, default=40, help="GETs per side (default 40)")
    parser.add_argument("--sends", type=int, default=50, help="mails pushed (default 50)")
    parser.add_argument("--streams", type=int, default=50, help="open /live streams (50)")
    options = parser.parse_args()
    started = time.perf_counter()
    server = server_url(options.database)
    environment(server)
    scratch = Scratch(server, "web")
    try:
        rows = measure_timeline(scratch, options.events, options.requests)
        rows += measure_push(scratch, options.sends)
        rows += measure_streams(scratch, options.streams)
    finally:
        scratch.drop_all()
    return summary(rows, started)


if __name__ == "__main__":
    run(main)
