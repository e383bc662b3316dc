"""Browser test harness: the web server in a subprocess, Debian's Chromium through Playwright.

Fixtures (import them into a test module, as ``tests/integration/test_web_browser.py`` does):

- ``web_server`` (module): a factory. ``web_server("--allow-writes", token="T")`` spawns
  ``python -m ikigai_store --database <ikigai_db_url> web --port 0 ...`` (once per distinct set of
  arguments in the module), waits for its one line ``ikigai-store web: serving http://H:P/``
  on stderr and returns that base URL (``http://H:P``, no trailing slash). At the end of the
  module every server gets SIGTERM and must exit 0 without having written a traceback; its
  stderr is shown when it did.
- ``browser`` (session): headless Chromium, the system's ``/usr/bin/chromium`` (Playwright's
  own download is not reachable here). When it or the ``playwright`` package is missing the
  browser tests are skipped, except in CI (``CI`` set) or with ``IKIGAI_REQUIRE_BROWSER=1``
  (which ``.ci/run`` exports): then they fail, so CI never passes by skipping them.
- ``console_errors`` and ``page`` (function): a fresh context and page (1280 x 900) per test;
  every console message of type error and every uncaught page error is recorded in
  ``console_errors``, and the test fails at teardown if any were recorded (a test that provokes
  one on purpose removes it from the list).

Invariant: every process and browser context started here is stopped by its fixture.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, Protocol

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "StartServer",
    "WebServer",
    "browser",
    "console_errors",
    "page",
    "web_server",
]

#: The system Chromium (Debian's ``chromium`` package), overridable for other machines.
CHROMIUM = os.environ.get("IKIGAI_CHROMIUM", "/usr/bin/chromium")

#: Headless Chromium as root on a machine without a network: no sandbox (root), no GPU, and
#: none of Chromium's own background connections (refused here, and noise in any case).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

#: The line the server prints on stderr once it listens.
SERVING = re.compile(r"^ikigai-store web: serving (http://\S+?)/?$")

#: Seconds a server may take to start (migrations, the embedded server) and to stop.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0


def browser_required() -> bool:
    """True in CI or with ``IKIGAI_REQUIRE_BROWSER=1``: a missing browser fails, not skips."""
    return bool(os.environ.get("CI")) or os.environ.get("IKIGAI_REQUIRE_BROWSER") == "1"


def _unavailable(reason: str) -> NoReturn:
    if browser_required():
        pytest.fail(f"{reason} (required: CI or IKIGAI_REQUIRE_BROWSER=1 is set)", pytrace=False)
    pytest.skip(reason)


class Lines:
    """The lines a process writes on one stream, read by a thread."""

    def __init__(self, stream: IO[str]) -> None:
        self.items: list[str] = []
        self._cond = threading.Condition()
        self._stream = stream
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._stream:
            with self._cond:
                self.items.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.items.append("")  # end of stream
            self._cond.notify_all()

    def find(self, pattern: re.Pattern[str], timeout: float) -> re.Match[str] | None:
        """The first line matching ``pattern``; None when none came within ``timeout``
        seconds or the stream ended without one."""

        def found() -> re.Match[str] | None:
            return next(filter(None, map(pattern.match, self.items)), None)

        with self._cond:
            self._cond.wait_for(lambda: found() or self.items[-1:] == [""], timeout)
            return found()

    def close(self) -> str:
        """After the process exited: everything it wrote."""
        self._thread.join(timeout=10)
        self._stream.close()
        return "\n".join(self.items)


class WebServer:
    """``ikigai-store web --port 0`` in a subprocess on one database."""

    def __init__(self, db_url: str, *args: str, token: str | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("IKIGAI_WEB_TOKEN", None)
        command = [sys.executable, "-m", "ikigai_store", "--database", db_url, "web"]
        command += ["--port", "0", *args]
        command += ["--no-token"] if token is None else ["--token", token]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env
        )
        assert self.proc.stderr is not None
        self._err = Lines(self.proc.stderr)
        found = self._err.find(SERVING, START_TIMEOUT)
        if found is None:
            output = self.stop()
            raise AssertionError(f"ikigai-store web printed no serving line; stderr:\n{output}")
        #: ``http://HOST:PORT``, without the trailing slash.
        self.url = found.group(1)

    def stop(self) -> str:
        """SIGTERM, then everything it wrote on stderr (killed after STOP_TIMEOUT)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self._err.close()


class StartServer(Protocol):
    def __call__(self, *args: str, token: str | None = None) -> str: ...


@pytest.fixture(scope="module")
def web_server(ikigai_db_url: str) -> Iterator[StartServer]:
    """Start ``ikigai-store web`` on this module's database; its base URL. One server per
    distinct arguments, shared by the module's tests; each must stop cleanly (exit 0 on
    SIGTERM, no traceback written) at the end of the module."""
    servers: dict[tuple[tuple[str, ...], str | None], WebServer] = {}

    def start(*args: str, token: str | None = None) -> str:
        key = (args, token)
        if key not in servers:
            servers[key] = WebServer(ikigai_db_url, *args, token=token)
        return servers[key].url

    yield start
    failures = []
    for (args, _), server in servers.items():
        output = server.stop()
        if server.proc.returncode != 0 or "Traceback" in output:
            failures.append(
                f"ikigai-store web {' '.join(args)} exited {server.proc.returncode} on SIGTERM "
                f"(0 expected, and no traceback); stderr:\n{output}"
            )
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless system Chromium (see the module docstring for when it skips or fails), for one
    test module: Playwright's sync API keeps an asyncio loop running in this thread while it
    is open, and every later ``asyncio.run``/``anyio.run`` of the worker would fail."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install playwright)")
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        found = shutil.which("chromium")
        _unavailable(
            f"no Chromium at {CHROMIUM} (apt-get install chromium chromium-driver"
            + (f"; or IKIGAI_CHROMIUM={found}" if found else "")
            + ")"
        )
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def console_errors() -> list[str]:
    """The console errors and uncaught page errors of this test's ``page``."""
    return []


@pytest.fixture
def page(browser: Browser, console_errors: list[str]) -> Iterator[Page]:
    """A page in a fresh browser context (1280 x 900, no shared cookies); the test fails at
    teardown if the page logged a console error or threw an uncaught error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(10_000)
    opened = context.new_page()

    def on_console(message: Any) -> None:
        if message.type == "error":
            where = message.location.get("url", "") if message.location else ""
            console_errors.append(f"console.error: {message.text} ({where or opened.url})")

    def on_page_error(error: Any) -> None:
        console_errors.append(f"page error: {error} ({opened.url})")

    opened.on("console", on_console)
    opened.on("pageerror", on_page_error)
    try:
        yield opened
    finally:
        context.close()
    if console_errors:
        pytest.fail("the page logged errors:\n" + "\n".join(console_errors), pytrace=False)


def wait_until(predicate: Any, timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Poll ``predicate()`` until it is true or ``timeout`` seconds passed; its last value."""
    deadline = time.monotonic() + timeout
    while True:
        value = bool(predicate())
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval)
