"""CLI ``watch``: print what concerns an identity as it commits, one line each (``store.watch``).

A coding agent is woken instead of polling (``ikigai-store hooks install --wake rewake``) by
an ``asyncRewake`` Stop hook (``--rewake``): the command blocks until something arrives, writes
a digest on stderr and exits 2, which wakes the idle session (or, given Claude Code's messaging
socket, writes the digest there, below). Invariants:
- one watcher per identity: the lease ``watch:<name>``, renewed every third of ``--ttl`` and
  released on exit (SIGTERM, SIGHUP and Ctrl-C included); a second watcher stops at once with
  an ``Error:`` line (with ``--rewake``: silently, exit 0, the running one will wake the agent);
- while the database is unreachable (at start or later) it retries with a backoff and says so
  once on stderr; it then goes on from what it printed (kept in memory, saved to the database
  after each batch), so nothing is missed and nothing printed twice; its lease, if it expired
  meanwhile, is taken again (or, if another watcher took it, this one stops);
- stdout carries notices only (``--json``: one JSON object per line); everything else goes to
  stderr;
- run by Claude Code (``CLAUDE_PID`` in its environment) it never outlives that session: it
  stops, releasing its lease, once that process is gone (no orphan keeps ``watch:<name>``);
- ``--rewake`` in a Claude Code that gives its hooks a messaging socket
  (``CLAUDE_CODE_MESSAGING_SOCKET`` / ``_TOKEN``, 2.1.332 and later) does not hold the hook:
  it detaches and exits 0 at once (so ``claude -p`` finishes), and the detached watcher wakes
  the idle session by writing the digest to that socket as a user message (a new turn), then
  stops, releasing its lease first so the next Stop's watcher can take it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from types import FrameType
from typing import IO

import click

from ..errors import Conflict, DatabaseUnavailable
from ..hooks.context import agent_name, agent_role, project_key
from ..models import Lease, Notice, Seen
from ..store import Store
from ..store import open as open_url
from ..watch import TTL
from .app import cli
from .common import database_option
from .params import DURATION

#: Seconds between two checks that the Claude Code session (``CLAUDE_PID``) still runs.
SESSION_CHECK = 2.0
#: The Claude Code variables of the messaging wake route.
MESSAGING_SOCKET, MESSAGING_TOKEN = "CLAUDE_CODE_MESSAGING_SOCKET", "CLAUDE_CODE_MESSAGING_TOKEN"

#: Seconds before the first reconnection; doubled up to ``MAX_DELAY``.
FIRST_DELAY = 0.2
MAX_DELAY = 5.0


class _Stop(Exception):
    """SIGTERM or SIGHUP: stop, releasing the lease."""


class _Signals:
    """SIGTERM and SIGHUP raise ``_Stop`` (main thread only), except inside ``held()``: there
    the first one waits for the block's end (a second one stops at once)."""

    def __init__(self) -> None:
        self._holding = False
        self._pending: str | None = None

    def _stop(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self._holding and self._pending is None:
            self._pending = name
            return
        raise _Stop(name)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        names = [n for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
        previous = {n: signal.signal(getattr(signal, n), self._stop) for n in names}
        try:
            yield
        finally:
            for n, handler in previous.items():
                signal.signal(getattr(signal, n), handler)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self._pending is not None:
            name, self._pending = self._pending, None
            raise _Stop(name)


def session_alive() -> bool:
    """Whether the Claude Code process that started this one (``CLAUDE_PID``) still runs
    (True when not run by Claude Code)."""
    import psutil

    value = os.environ.get("CLAUDE_PID", "")
    if not value.isdigit():
        return True
    try:
        return bool(psutil.Process(int(value)).status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def send_to_session(path: str, token: str, text: str) -> None:
    """Start a turn in the Claude Code session listening on ``path``: its auth line, then
    ``text`` as a user message (one JSON object a line). ``OSError`` when it cannot."""
    lines = [
        {"type": "auth", "token": token},
        {"type": "user", "message": {"role": "user", "content": text}},
    ]
    payload = "".join(json.dumps(line) + "\n" for line in lines).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(payload)
        conn.shutdown(socket.SHUT_WR)
        with contextlib.suppress(OSError):
            while conn.recv(4096):
                pass


def detach() -> bool:
    """Fork a detached child (its own session, stdio on /dev/null); True in the child, False
    in the parent (which should exit at once)."""
    if os.fork() > 0:
        return False
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    return True


class Watcher:
    """One ``ikigai-store watch`` run (see the module docstring)."""

    def __init__(
        self,
        url: str | None,
        *,
        name: str | None,
        project: str,
        role: str,
        ttl: timedelta,
        as_json: bool,
        rewake: bool,
        out: IO[str],
        err: IO[str],
        messaging: tuple[str, str] | None = None,
    ) -> None:
        self.url, self.name, self.project, self.role = url, name, project, role
        self.ttl, self.as_json, self.rewake = ttl, as_json, rewake
        self.messaging = messaging
        self.out, self.err = out, err
        self._delay = FIRST_DELAY
        self._down = False
        self._lease: Lease | None = None
        self._seen = self._saved = Seen()
        self._signals = _Signals()

    def say(self, text: str) -> None:
        """One line on stderr."""
        with contextlib.suppress(OSError):
            self.err.write(f"ikigai-store watch: {' '.join(text.split())}\n")
            self.err.flush()

    def _outage(self, exc: BaseException) -> None:
        """The database is unreachable: say so once, wait before trying again."""
        if not self._down:
            self.say(f"database unavailable ({exc}); reconnecting")
            self._down = True
        time.sleep(self._delay)
        self._delay = min(self._delay * 2, MAX_DELAY)

    def _recovered(self) -> None:
        if self._down:
            self.say("database reachable again")
        self._down = False
        self._delay = FIRST_DELAY

    def _open(self) -> Store:
        while True:
            try:
                store = open_url(self.url)
            except DatabaseUnavailable as exc:
                self._outage(exc)
                continue
            self._recovered()
            return store

    def _render(self, notice: Notice) -> str:
        if self.as_json:
            return json.dumps({**notice.detail, "text": notice.text}, ensure_ascii=False)
        return notice.text

    def run(self) -> int:
        """Watch until stopped; the exit status (``--rewake``: 2 once something arrived; 0
        when stopped, even while still connecting)."""
        with self._signals.installed():
            try:
                return self._run()
            except (_Stop, KeyboardInterrupt):
                return 0

    def _run(self) -> int:
        with self._open() as store:
            while True:
                try:
                    me = store.identities.resolve(
                        self.project, role=self.role, name=self.name, working_dir=self.project
                    ).name
                    watch = store.watch.start(me, ttl=self.ttl)
                    break
                except DatabaseUnavailable as exc:
                    self._outage(exc)
                except Conflict as exc:
                    if self.rewake:
                        return 0
                    raise click.ClickException(str(exc)) from exc
            self._recovered()
            if not self.rewake:
                self.say(f"watching {me} (one line per mail, task or freed lease)")
            self._lease = watch.lease
            self._seen = self._saved = watch.seen
            try:
                return self._loop(store, me)
            finally:
                if self._seen != self._saved:  # printed, then stopped before it was saved
                    with contextlib.suppress(Exception):
                        store.watch.save(me, self._seen)
                if self._lease is not None:
                    with contextlib.suppress(Exception):
                        store.leases.release(self._lease)

    def _loop(self, store: Store, me: str) -> int:
        period = self.ttl.total_seconds() / 3
        renew_at = time.monotonic() + period
        while True:
            if not session_alive():
                return 0
            try:
                if time.monotonic() >= renew_at:
                    self._lease = self._renew(store, me)
                    renew_at = time.monotonic() + period
                wait = min(SESSION_CHECK, max(0.0, renew_at - time.monotonic()))
                batch = store.watch.next(me, seen=self._seen, timeout=wait)
                self._recovered()
            except DatabaseUnavailable as exc:
                self._outage(exc)
                renew_at = 0.0  # renew (or take again) first thing after the outage
                continue
            lines = [self._render(n) for n in batch.notices]
            if lines and self.messaging is not None:
                return self._message(store, me, lines, batch.seen)
            # Printed means seen: a stop between the two would print them again next time.
            with self._signals.held():
                if lines and self.rewake:
                    self.err.write(
                        f"ikigai-store: {len(lines)} new for {me}:\n"
                        + "".join(f"  {line}\n" for line in lines)
                    )
                    self.err.flush()
                elif lines:
                    self.out.write("".join(line + "\n" for line in lines))
                    self.out.flush()
                self._seen = batch.seen
            if self._seen != self._saved:
                with contextlib.suppress(DatabaseUnavailable):  # kept in memory meanwhile
                    store.watch.save(me, self._seen)
                    self._saved = self._seen
            if lines and self.rewake:
                return 2

    def _message(self, store: Store, me: str, lines: list[str], seen: Seen) -> int:
        """Wake the session through its messaging socket: the lease is released first (the
        next Stop's watcher takes it), what was sent is saved as seen."""
        assert self.messaging is not None
        if self._lease is not None:
            with contextlib.suppress(Exception):
                store.leases.release(self._lease)
            self._lease = None
        text = f"ikigai-store: {len(lines)} new for {me}:\n" + "".join(
            f"  {line}\n" for line in lines
        )
        try:
            send_to_session(*self.messaging, text)
        except OSError as exc:
            self.say(f"could not wake the session ({exc})")
            return 0
        self._seen = seen
        return 0

    def _renew(self, store: Store, me: str) -> Lease:
        """The watcher's lease renewed, or taken again if it expired (an outage); a watcher
        that took it meanwhile stops this one."""
        if self._lease is not None:
            with contextlib.suppress(Conflict):
                return store.leases.renew(self._lease, self.ttl)
        try:
            return store.watch.start(me, ttl=self.ttl).lease
        except Conflict as exc:
            if self.rewake:
                raise _Stop("another watcher") from exc
            raise click.ClickException(f"stopped: {exc}") from exc


@cli.command("watch")
@click.option("--as", "name", metavar="NAME", default=None, help="The identity to watch.")
@click.option("--role", default=None, help="The agent's role in its project (default: main).")
@click.option(
    "--project", default=None, metavar="DIR", help="The project directory (default: cwd)."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option(
    "--rewake",
    is_flag=True,
    help="For Claude Code's asyncRewake hook: wait for something new, write it on stderr "
    "and exit 2 (exit 0 at once if the identity is already watched).",
)
@click.option(
    "--ttl",
    type=DURATION,
    default=f"{int(TTL.total_seconds())}s",
    show_default=True,
    help="The watcher's lease (renewed every third of it): how long a killed watcher "
    "keeps others out.",
)
def watch_command(
    name: str | None,
    role: str | None,
    project: str | None,
    as_json: bool,
    rewake: bool,
    ttl: timedelta,
) -> None:
    """Print what concerns the agent's identity as it commits: new mail (review and plan
    events included), tasks it may claim, resources it waited for that became free.

    Blocks on LISTEN (no polling); one line per thing on stdout. The identity is --as, else
    the agent's in its project and role (the one its hooks and MCP server resolve).
    """
    messaging = None
    socket_path, token = os.environ.get(MESSAGING_SOCKET), os.environ.get(MESSAGING_TOKEN)
    if rewake and socket_path and token:
        if not detach():
            return  # the hook is done; the detached child watches
        messaging = (socket_path, token)
    watcher = Watcher(
        database_option(),
        name=agent_name(name),
        project=project_key(project),
        role=agent_role(role),
        ttl=ttl,
        as_json=as_json,
        rewake=rewake,
        out=sys.stdout,
        err=sys.stderr,
        messaging=messaging,
    )
    sys.exit(watcher.run())
