"""The warm local service: one process per (OS user, database) holding the store open for the
hook commands and the MCP stdio servers of that user (``client`` has the protocol and where its
files are).

Owns the listening socket, the one ``AsyncStore`` (its pool and its one listener, shared by every
request and every MCP session; opened on the first request, migrated, and opened again on a later
request while the database cannot be reached), and the service's lifetime. Invariants:
- every connection's peer is checked (``SO_PEERCRED``): another user's is answered one refusal
  line and closed, before anything it sent is read;
- a request of another protocol or version retires this service: it stops listening (removing
  its socket if the path is still its own), answers ``mismatch``, serves the connections it has
  and exits when they end;
- it exits when idle (no connection open, no request) for ``idle`` seconds, on ``stop``, on
  SIGTERM/SIGINT/SIGHUP, and when its socket path no longer is its own (removed, or taken by a
  newer service); exiting closes the store, which releases the embedded server (the last user
  stops it);
- a hook runs ``claude.run`` on the shared store within its deadline; any failure answers
  ``failopen.answer`` and the reason, never a denial; identities come from what the client
  sends (the service drops ``client.IDENTITY_ENV`` from its own environment when it starts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import signal
import socket
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import suppress
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .._version import __version__
from .._where import default_data_dir
from ..aio import AsyncStore, open_async
from ..config import redact
from ..embedded import install_exit_hooks
from ..errors import IkigaiStoreError
from ..hooks import failopen
from ..hooks.claude import DEADLINE_SECONDS, HOOKS, HookFailed, HookOptions
from ..hooks.claude import run as run_hook
from . import client

__all__ = ["DEFAULT_IDLE_SECONDS", "Service", "main"]

log = logging.getLogger("ikigai_store.service")

#: How long the service stays up with nothing to do (``IKIGAI_SERVICE_IDLE``, seconds).
DEFAULT_IDLE_SECONDS = 1800.0
#: Connections of the store's pool (hooks and MCP calls running at once).
POOL_SIZE = 4
#: How long a request waits for a pooled connection.
CHECKOUT_SECONDS = 5.0
#: How long the service waits for another process's migration when it opens the store.
MIGRATION_WAIT_SECONDS = 30.0
#: A log longer than this is emptied when a service starts.
MAX_LOG_BYTES = 1024 * 1024
_UCRED = struct.Struct("3i")


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a Unix socket (None where the platform
    has no way to ask)."""
    if hasattr(socket, "SO_PEERCRED"):
        data = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        return int(_UCRED.unpack(data)[1])
    getpeereid = getattr(os, "getpeereid", None)  # not in the standard library today
    return int(getpeereid(sock.fileno())[0]) if getpeereid is not None else None


class _LinesIn:
    """The MCP SDK's stdin side over a socket: text lines."""

    def __init__(self, stream: BufferedByteReceiveStream) -> None:
        self.stream = stream

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            try:
                line = await self.stream.receive_until(b"\n", client.MAX_LINE_BYTES)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError):
                return
            yield line.decode("utf-8", errors="replace")


class _LinesOut:
    """The MCP SDK's stdout side over a socket."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream

    async def write(self, text: str) -> None:
        await self.stream.send(text.encode())

    async def flush(self) -> None:
        return None


class Service:
    """The service of one database (``database`` None: the configured default) listening on
    ``socket_path``; see the module's invariants."""

    def __init__(self, database: str | None, socket_path: str, *, idle: float) -> None:
        self.database = database
        self.socket_path = socket_path
        self.idle = idle
        self.started = time.time()
        self._store: AsyncStore | None = None
        self._opening = anyio.Lock()
        self._connections = 0
        self._served = 0
        self._last = time.monotonic()
        self._inode: int | None = None
        self._listener: anyio.abc.SocketListener | None = None
        self._stopping = anyio.Event()
        self._retired = False

    # ---------------------------------------------------------------------------- lifetime

    async def run(self, ready: Callable[[str], None]) -> None:
        """Listen until told to stop; ``ready("ready")`` once clients can connect (or
        ``ready(why)`` when it cannot listen)."""
        try:
            listener = await self._listen()
        except OSError as exc:
            ready(f"cannot listen on {self.socket_path}: {exc}")
            return
        self._listener = listener
        log.info("listening on %s (version %s, pid %d)", self.socket_path, __version__, os.getpid())
        ready("ready")
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._warm)
                group.start_soon(self._accept, listener, group)
                group.start_soon(self._watch)
                group.start_soon(self._signals)
                await self._stopping.wait()
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._unlisten()
                if self._store is not None:
                    await self._store.close()
            log.info("stopped after %d requests", self._served)

    async def _listen(self) -> anyio.abc.SocketListener:
        """Bind a fresh socket beside the path and move it there (replacing a stale one)."""
        temporary = f"{self.socket_path}.{os.getpid()}"
        with suppress(FileNotFoundError):
            os.unlink(temporary)
        listener = await anyio.create_unix_listener(temporary, mode=0o600)
        os.replace(temporary, self.socket_path)
        self._inode = os.stat(self.socket_path).st_ino
        return listener

    def _owns_path(self) -> bool:
        try:
            return os.stat(self.socket_path).st_ino == self._inode
        except OSError:
            return False

    async def _unlisten(self) -> None:
        """Stop accepting; remove the socket path while it is still ours."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        if self._owns_path():
            with suppress(OSError):
                os.unlink(self.socket_path)
        with suppress(OSError):
            await listener.aclose()

    def stop(self, why: str) -> None:
        """Stop now (closing every connection)."""
        if not self._stopping.is_set():
            log.info("stopping: %s", why)
            self._stopping.set()

    async def _retire(self) -> None:
        """Stop listening; exit once the connections left have ended."""
        if not self._retired:
            self._retired = True
            log.info("retiring: a client of another version asked")
            await self._unlisten()

    async def _watch(self) -> None:
        """Exit when idle, retired and done, or no longer at the socket path."""
        tick = max(0.05, min(5.0, self.idle / 4))
        while True:
            await anyio.sleep(tick)
            if self._retired:
                if self._connections == 0:
                    self.stop("retired, and its last connection ended")
                continue
            if not self._owns_path():
                self.stop(f"{self.socket_path} is no longer this service's socket")
            elif self._connections == 0 and time.monotonic() - self._last >= self.idle:
                self.stop(f"idle for {self.idle:g} s")

    async def _signals(self) -> None:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
            async for signum in signals:
                self.stop(signal.Signals(signum).name)

    async def _accept(self, listener: anyio.abc.SocketListener, group: anyio.abc.TaskGroup) -> None:
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            while True:
                stream = await listener.accept()
                group.start_soon(self._serve, stream)

    async def _warm(self) -> None:
        """Open the store and import the MCP server before the first request needs them."""
        try:
            await self.store()
        except Exception as exc:  # the first request tries again and reports it
            log.warning("cannot open the store yet: %s", failopen.one_line(exc))
        await anyio.to_thread.run_sync(_import_mcp)

    # ---------------------------------------------------------------------------- the store

    async def store(self) -> AsyncStore:
        """The shared store, opened (and migrated) on first use; a failed open is tried again
        by the next request."""
        async with self._opening:
            if self._store is None:
                self._store = await open_async(
                    self.database,
                    pool_size=POOL_SIZE,
                    timeout=CHECKOUT_SECONDS,
                    migration_lock_timeout=MIGRATION_WAIT_SECONDS,
                )
            return self._store

    # ---------------------------------------------------------------------------- requests

    async def _serve(self, stream: anyio.abc.SocketStream) -> None:
        self._connections += 1
        self._last = time.monotonic()
        try:
            async with stream:
                raw = stream.extra(anyio.abc.SocketAttribute.raw_socket)
                uid = peer_uid(raw)
                if uid != os.geteuid():
                    log.warning("refused a connection from uid %s", uid)
                    await _send(stream, {"ok": False, "error": "refused: not this user's service"})
                    return
                buffered = BufferedByteReceiveStream(stream)
                try:
                    line = await buffered.receive_until(b"\n", client.MAX_LINE_BYTES)
                    message = json.loads(line)
                except (anyio.EndOfStream, anyio.IncompleteRead, anyio.DelimiterNotFound):
                    return
                except ValueError:
                    await _send(stream, {"ok": False, "error": "the request is not JSON"})
                    return
                self._served += 1
                await self._dispatch(message, stream, buffered)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away
        finally:
            self._connections -= 1
            self._last = time.monotonic()

    async def _dispatch(
        self, message: object, stream: anyio.abc.SocketStream, buffered: BufferedByteReceiveStream
    ) -> None:
        if not isinstance(message, dict):
            await _send(stream, {"ok": False, "error": "the request is not a JSON object"})
            return
        if message.get("protocol") != client.PROTOCOL or message.get("version") != __version__:
            await self._retire()
            await _send(
                stream,
                {
                    "ok": False,
                    "mismatch": __version__,
                    "error": f"the service is version {__version__}; it is being replaced",
                },
            )
            return
        op = message.get("op")
        if op == "hook":
            await _send(stream, await self._hook(message))
        elif op == "status":
            await _send(stream, self.status())
        elif op == "stop":
            await _send(stream, self.status())
            self.stop("asked to")
        elif op == "mcp":
            await self._mcp(message, stream, buffered)
        else:
            await _send(stream, {"ok": False, "error": f"unknown op {op!r}"})

    def status(self) -> dict[str, Any]:
        """What ``ikigai-store service status`` shows."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        peak = usage.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        return {
            "ok": True,
            "pid": os.getpid(),
            "version": __version__,
            "database": (
                redact(self.database) if self.database else f"embedded, in {default_data_dir()}"
            ),
            "socket": self.socket_path,
            "started": self.started,
            "uptime": round(time.time() - self.started, 3),
            "idle_timeout": self.idle,
            "connections": self._connections - 1,  # not the one asking
            "requests": self._served,
            "store_open": self._store is not None,
            "rss_bytes": _rss_bytes(),
            "peak_rss_bytes": peak,
        }

    async def _hook(self, message: Mapping[str, Any]) -> dict[str, Any]:
        name, event = message.get("hook"), message.get("event")
        if name not in HOOKS:
            return {"ok": False, "error": f"no hook {name!r} (hooks: {', '.join(HOOKS)})"}
        try:
            options = _hook_options(message.get("options"))
            # asyncio's timeout cancels once (anyio's would cancel psycopg's own cancel too)
            async with asyncio.timeout(options.deadline):
                if not isinstance(event, dict):
                    raise HookFailed("standard input is not a JSON object (Claude Code's input)")
                answer = await run_hook(name, event, options, store=self.store)
            return {"ok": True, "answer": answer}
        except TimeoutError:
            why = f"gave up after {DEADLINE_SECONDS:g} s"
        except HookFailed as exc:
            why = str(exc)
        except Exception as exc:
            why = failopen.one_line(exc)
            if not isinstance(exc, IkigaiStoreError):  # a bug of ours: the whole trace
                log.exception("hook %s failed", name)
        return {"ok": True, "answer": failopen.answer(name, event, why), "failed": why}

    async def _mcp(
        self,
        message: Mapping[str, Any],
        stream: anyio.abc.SocketStream,
        buffered: BufferedByteReceiveStream,
    ) -> None:
        """Serve one MCP session (the proxy's) on this connection."""
        from mcp.server.stdio import stdio_server

        from ..mcp.server import Face
        from ..mcp.tools import select

        options = message.get("options")
        options = options if isinstance(options, dict) else {}
        try:
            tools = select(str(options.get("tools") or "core"))
            store = await self.store()
        except (ValueError, IkigaiStoreError) as exc:
            await _send(stream, {"ok": False, "error": failopen.one_line(exc)})
            return
        face = Face(
            store,
            tools,
            name=_text(options.get("name")),
            project=_text(options.get("project")),
            role=_text(options.get("role")),
            operator=options.get("operator") is True,
        )
        await _send(stream, {"ok": True})
        server = face.server()
        try:
            async with stdio_server(
                stdin=_LinesIn(buffered),  # type: ignore[arg-type]
                stdout=_LinesOut(stream),  # type: ignore[arg-type]
            ) as (read, write):
                await server.run(read, write, server.create_initialization_options())
        finally:
            with anyio.CancelScope(shield=True):
                await face.close()


def _import_mcp() -> None:
    with suppress(ImportError):  # without the mcp extra, only hooks are served
        import mcp.server.stdio  # noqa: F401

        from ..mcp import server  # noqa: F401


def _hook_options(raw: object) -> HookOptions:
    fields = raw if isinstance(raw, dict) else {}
    seconds = fields.get("auto_reserve")
    return HookOptions(
        name=_text(fields.get("name")),
        role=_text(fields.get("role")),
        project=_text(fields.get("project")),
        task_list=_text(fields.get("task_list")),
        auto_reserve=float(seconds) if isinstance(seconds, int | float) else None,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


async def _send(stream: anyio.abc.ByteStream, message: Mapping[str, Any]) -> None:
    await stream.send(json.dumps(message, ensure_ascii=False).encode() + b"\n")


# -------------------------------------------------------------------------------- running


def idle_seconds(value: str | None) -> float:
    """``IKIGAI_SERVICE_IDLE`` (seconds, > 0), else the default."""
    if not value:
        return DEFAULT_IDLE_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise SystemExit(f"IKIGAI_SERVICE_IDLE must be a positive number of seconds, not {value!r}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    """Run the service in this process (``python -m ikigai_store.service`` after it forked, or
    ``ikigai-store service run``) until it stops; 0 on a normal stop."""
    parser = argparse.ArgumentParser(prog="ikigai-store service run")
    parser.add_argument("--ready-fd", type=int, default=None)
    parser.add_argument("--database", default=None)
    parser.add_argument("--idle", type=float, default=None)
    args = parser.parse_args(argv)
    ready_fd: int | None = args.ready_fd

    def ready(what: str) -> None:
        nonlocal ready_fd
        print(f"ikigai-store service: {what}", file=sys.stderr, flush=True)
        if ready_fd is not None:
            with suppress(OSError):
                os.write(ready_fd, what.encode() + b"\n")
                os.close(ready_fd)
            ready_fd = None

    try:
        for name in client.IDENTITY_ENV:
            os.environ.pop(name, None)
        database = args.database or os.environ.pop("IKIGAI_SERVICE_DATABASE", None)
        where = client.target(database)
        client.private_dir(where.directory)
        idle = (
            args.idle
            if args.idle is not None
            else idle_seconds(os.environ.get("IKIGAI_SERVICE_IDLE"))
        )
        _trim(where.log_path)
        logging.basicConfig(
            stream=sys.stderr,
            level=logging.INFO,
            format="%(asctime)s %(process)d %(name)s: %(message)s",
        )
        install_exit_hooks()  # the embedded server is released by a normal exit
        service = Service(where.database, where.socket_path, idle=idle)
    except (client.ServiceError, SystemExit, OSError) as exc:
        ready(str(exc))
        return 1
    anyio.run(service.run, ready)
    return 0


def _trim(path: str) -> None:
    with suppress(OSError):
        if os.stat(path).st_size > MAX_LOG_BYTES:
            os.truncate(path, 0)
