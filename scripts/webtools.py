"""What the web view's scripts share: a spawned ``ikigai-store web``, headless system Chromium,
and the demo's data read back through the library.

Imported by ``scripts/web_screenshots.py`` and ``scripts/bench_web.py`` (run as scripts, so this
directory is on ``sys.path``). Invariant: every server and browser started here is stopped when
its context manager exits, even on failure.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from playwright.sync_api import Browser, sync_playwright

import ikigai_store as ik

#: The system Chromium (Debian's ``chromium``); Playwright's own download is not used.
CHROMIUM = os.environ.get("IKIGAI_CHROMIUM", "/usr/bin/chromium")

#: Headless Chromium as root on a machine without a network (see tests/browser.py).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

_SERVING = re.compile(r"ikigai-store web: serving (http://\S+?)/?$", re.MULTILINE)


@dataclass
class Server:
    """A running ``ikigai-store web``: its base URL (no trailing slash) and process."""

    url: str
    proc: subprocess.Popen[bytes]

    @property
    def host_port(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        return host, int(port)


@contextmanager
def web_server(db_url: str, *args: str, timeout: float = 120) -> Iterator[Server]:
    """``python -m ikigai_store --database DB_URL web --port 0 ARGS`` until the block ends
    (SIGTERM, then a kill after 30 s); ``RuntimeError`` when it does not start."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("IKIGAI_WEB_TOKEN", None)
    command = [sys.executable, "-m", "ikigai_store", "--database", db_url, "web", "--port", "0"]
    with tempfile.TemporaryFile("w+") as log:
        if "--token" not in args:
            args = (*args, "--no-token")
        proc = subprocess.Popen([*command, *args], stdout=subprocess.DEVNULL, stderr=log, env=env)
        try:
            deadline = time.monotonic() + timeout
            while True:
                log.seek(0)
                found = _SERVING.search(log.read())
                if found is not None:
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"ikigai-store web did not start: {log.read().strip()}")
                time.sleep(0.05)
            yield Server(found.group(1), proc)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextmanager
def chromium() -> Iterator[Browser]:
    """Headless system Chromium; ``RuntimeError`` when it is not installed."""
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"no Chromium at {CHROMIUM}: apt-get install chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def run_demo(db_url: str) -> None:
    """``python -m ikigai_store --database DB_URL demo`` (its output discarded);
    ``RuntimeError`` when it fails."""
    done = subprocess.run(
        [sys.executable, "-m", "ikigai_store", "--database", db_url, "demo"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the demo failed ({done.returncode}): {done.stderr.strip()}")


@dataclass(frozen=True)
class Demo:
    """The newest demo's session, agents (root first), identities (main's first), review and
    task list."""

    session_id: int
    agents: tuple[str, ...]
    identities: tuple[str, ...]
    review_id: str
    list_id: str


def find_demo(store: ik.Store) -> Demo:
    """The newest demo run on ``store``'s database, read back through the library."""
    demos = [s for s in store.list_sessions() if (s.title or "").startswith("demo ")]
    if not demos:
        raise RuntimeError("no demo session in this database")
    session = max(demos, key=lambda s: s.id)
    agents = tuple(dict.fromkeys(m.agent_uuid for m in store.messages(session.id) if m.agent_uuid))
    bound = {i.agent_uuid: i.name for i in store.identities.list(include_retired=True)}
    main, explorer = bound[agents[0]], bound[agents[1]]
    review = store.reviews.list(requester=main, limit=1)[0]
    lists = [t for t in store.tasks.lists() if t.owner == main]
    return Demo(session.id, agents, (main, explorer), review.review_id, lists[-1].list_id)
