"""``ikigai-store mcp`` over stdio: an MCP server that answers at once (standard library only).

A coding agent spawns this process and speaks MCP's JSON-RPC lines on its stdin and stdout. It
answers ``initialize``, ``tools/list`` and ``ping`` itself, from the shipped catalog
(``mcp.catalog``: exactly what the SDK's server would answer), without touching the database, and
hands every other message to an MCP session in the warm local service (``client``; the service
runs the same ``mcp.server.Face``), which it connects to, starting it when none runs, in the
background as soon as ``initialize`` is answered. Invariants:
- the service's session is opened as the client's was: the same ``initialize`` request is
  replayed to it (its answer swallowed), then ``notifications/initialized``; the client's own
  ``initialized`` is not passed on twice; who the server acts as (``--as``/``IKIGAI_AS``,
  ``--role``/``IKIGAI_ROLE``, ``--project``/``CLAUDE_PROJECT_DIR``/the working directory) is
  sent by this process, never read from the service's environment;
- a message is passed on as the bytes it came as, in order; what arrives while the session is
  being opened waits and follows in order;
- a request the service cannot take (it cannot be started or reached, or it went away while the
  request was in flight) is answered, never dropped: ``tools/call`` with a tool error saying why
  (the model sees it), any other request with a JSON-RPC error; the next request tries again
  (resource subscriptions are renewed on the new session);
- end of stdin, SIGINT or SIGTERM ends the process (and so the service's session).
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
from collections.abc import Mapping
from typing import IO, Any

from .._version import __version__
from .._where import describe, instructions
from ..mcp.catalog import load, select_names
from . import client

__all__ = ["Proxy", "main"]

_PRIVATE = "ikigai-proxy:"
_INTERNAL_ERROR = -32603
_PARSE_ERROR = -32700


class Proxy:
    """One stdio MCP session (see the module's invariants).

    ``options``: who the server acts as and which tools (``name``, ``role``, ``project``,
    ``operator``, ``tools``); ``database``: the global ``--database``."""

    def __init__(
        self,
        options: Mapping[str, Any],
        *,
        database: str | None = None,
        stdout: IO[bytes] | None = None,
        catalog: Mapping[str, Any] | None = None,
    ) -> None:
        self.options = dict(options)
        self.target = client.target(database)
        self.out = stdout if stdout is not None else sys.stdout.buffer
        self.catalog = catalog if catalog is not None else load()
        chosen = set(
            select_names(
                str(self.options.get("tools") or "core"),
                ((t["name"], t["area"], t["core"]) for t in self.catalog["tools"]),
            )
        )
        key = "operator" if self.options.get("operator") else "listed"
        self.tools = [t[key] for t in self.catalog["tools"] if t["name"] in chosen]
        self._write_lock = threading.Lock()
        self._lock = threading.Condition()
        self._sock: socket.socket | None = None
        self._connecting = False
        self._queue: list[bytes] = []
        self._in_flight: dict[str, tuple[Any, str]] = {}  # json key of id -> (id, method)
        self._initialize: dict[str, Any] | None = None
        self._subscriptions: set[str] = set()
        self._serial = 0

    # ------------------------------------------------------------------------ the client side

    def write(self, message: Mapping[str, Any]) -> None:
        """Send one message to the client."""
        self._write_raw(json.dumps(message, ensure_ascii=False).encode())

    def _write_raw(self, line: bytes) -> None:
        with self._write_lock:
            self.out.write(line + b"\n")
            self.out.flush()

    def handle(self, line: bytes) -> None:
        """One line from the client."""
        if not line.strip():
            return
        try:
            message = json.loads(line)
        except ValueError as exc:
            self.write(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": _PARSE_ERROR, "message": f"Parse error: {exc}"},
                }
            )
            return
        if not isinstance(message, dict):
            self._forward(line, None)
            return
        try:
            json.dumps(message, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (``"\ud800"``): no text a server can use
            if "id" in message:
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": message["id"],
                        "error": {
                            "code": _PARSE_ERROR,
                            "message": "the message is not valid Unicode: a string holds a lone "
                            "surrogate (\\ud800-\\udfff escapes must come in pairs)",
                        },
                    }
                )
            return
        method = message.get("method")
        is_request = "id" in message and isinstance(method, str)
        if method == "initialize" and is_request and self._initialize is None:
            self._answer_initialize(message)
            return
        if is_request and self._initialize is not None and method in ("tools/list", "ping"):
            result = {"tools": self.tools} if method == "tools/list" else {}
            self.write({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        if method == "notifications/initialized" and self._initialize is not None:
            return  # the session with the service sends its own
        if method in ("resources/subscribe", "resources/unsubscribe"):
            self._track(method, message.get("params"))
        if method == "notifications/cancelled":  # the server answers a cancelled request never
            params = message.get("params")
            if isinstance(params, dict):
                with self._lock:
                    self._in_flight.pop(_key(params.get("requestId")), None)
        self._forward(line, message if is_request else None)

    def _answer_initialize(self, message: dict[str, Any]) -> None:
        params = message.get("params")
        requested = params.get("protocolVersion") if isinstance(params, dict) else None
        versions = self.catalog["handshake_versions"]
        negotiated = (
            requested if requested in versions else self.catalog["latest_handshake_version"]
        )
        result = json.loads(json.dumps(self.catalog["initialize"]))
        result["protocolVersion"] = negotiated
        result["serverInfo"]["version"] = __version__
        result["instructions"] = instructions(
            result["instructions"], describe(self.target.database)
        )
        self._initialize = message
        self.write({"jsonrpc": "2.0", "id": message["id"], "result": result})
        self._connect_in_background()

    def _track(self, method: str, params: object) -> None:
        uri = params.get("uri") if isinstance(params, dict) else None
        if isinstance(uri, str):
            if method == "resources/subscribe":
                self._subscriptions.add(uri)
            else:
                self._subscriptions.discard(uri)

    # ------------------------------------------------------------------------ the service side

    def _forward(self, line: bytes, request: dict[str, Any] | None) -> None:
        with self._lock:
            if request is not None:
                self._in_flight[_key(request["id"])] = (request["id"], str(request["method"]))
            if self._sock is not None:
                try:
                    self._sock.sendall(line + b"\n")
                    return
                except OSError:
                    self._drop_locked("the ikigai-store service went away")
            self._queue.append(line)
            self._start_locked()

    def _connect_in_background(self) -> None:
        with self._lock:
            if self._sock is None:
                self._start_locked()

    def _start_locked(self) -> None:
        if not self._connecting:
            self._connecting = True
            threading.Thread(target=self._connect, name="ikigai-proxy-connect", daemon=True).start()

    def _private_id(self) -> str:
        self._serial += 1
        return f"{_PRIVATE}{self._serial}"

    def _connect(self) -> None:
        """Open the session with the service and pass on what waited; on failure answer it."""
        try:
            sock, buffer = self._open_session()
        except (client.ServiceError, OSError, ValueError) as exc:
            with self._lock:
                self._connecting = False
                self._fail_locked(f"the ikigai-store service could not be reached: {exc}")
            return
        with self._lock:
            self._connecting = False
            try:
                for line in self._queue:
                    sock.sendall(line + b"\n")
            except OSError:
                sock.close()
                self._fail_locked("the ikigai-store service went away")
                return
            self._queue.clear()
            self._sock = sock
        threading.Thread(
            target=self._pump, args=(sock, buffer), name="ikigai-proxy-pump", daemon=True
        ).start()

    def _open_session(self) -> tuple[socket.socket, bytearray]:
        message = client.hello("mcp", options=self.options)
        for attempt in (1, 2):
            sock = client.connect(self.target)
            try:
                sock.settimeout(client.START_SECONDS)
                client.send_line(sock, message)
                buffer = bytearray()
                answer = json.loads(client.read_line(sock, buffer))
                if isinstance(answer, dict) and answer.get("ok") is True:
                    self._open_mcp(sock, buffer)
                    sock.settimeout(None)
                    return sock, buffer
            except BaseException:
                sock.close()
                raise
            sock.close()
            if not (isinstance(answer, dict) and "mismatch" in answer and attempt == 1):
                why = answer.get("error") if isinstance(answer, dict) else answer
                raise client.ServiceError(str(why))
        raise AssertionError("unreachable")  # pragma: no cover

    def _open_mcp(self, sock: socket.socket, buffer: bytearray) -> None:
        """Replay the client's ``initialize`` (and its subscriptions) on the new session; a
        client that opened no session with ``initialize`` speaks to the service directly."""
        if self._initialize is None:
            return
        init_id = self._private_id()
        client.send_line(sock, {**self._initialize, "id": init_id})
        while True:  # nothing else can come before the answer
            reply = json.loads(client.read_line(sock, buffer))
            if isinstance(reply, dict) and reply.get("id") == init_id:
                break
        if "error" in reply:
            raise client.ServiceError(f"the service refused initialize: {reply['error']}")
        client.send_line(sock, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        for uri in sorted(self._subscriptions):
            client.send_line(
                sock,
                {
                    "jsonrpc": "2.0",
                    "id": self._private_id(),
                    "method": "resources/subscribe",
                    "params": {"uri": uri},
                },
            )

    def _pump(self, sock: socket.socket, buffer: bytearray) -> None:
        """Pass the service's lines to the client until the service closes the session."""
        try:
            while True:
                line = client.read_line(sock, buffer)
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if isinstance(message, dict) and ("result" in message or "error" in message):
                    ident = message.get("id")
                    if isinstance(ident, str) and ident.startswith(_PRIVATE):
                        continue
                    with self._lock:
                        self._in_flight.pop(_key(ident), None)
                self._write_raw(line)
        except (OSError, ConnectionError):
            pass
        with self._lock:
            if self._sock is sock:
                self._drop_locked("the ikigai-store service went away")

    def _drop_locked(self, why: str) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
        self._fail_locked(why)

    def _fail_locked(self, why: str) -> None:
        """Answer every request in flight or waiting: ``why``."""
        self._queue.clear()
        failed, self._in_flight = self._in_flight, {}
        for ident, method in failed.values():
            if method == "tools/call":
                text = f"ikigai-store: {why}; nothing was done. Try again."
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": ident,
                        "result": {"content": [{"type": "text", "text": text}], "isError": True},
                    }
                )
            else:
                self.write(
                    {
                        "jsonrpc": "2.0",
                        "id": ident,
                        "error": {"code": _INTERNAL_ERROR, "message": why},
                    }
                )

    def close(self) -> None:
        """End the session with the service."""
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()


def _key(ident: object) -> str:
    return json.dumps(ident)


def main(options: Mapping[str, Any], *, database: str | None = None) -> int:
    """Serve stdin/stdout until stdin ends (0), or SIGINT/SIGTERM ends the process."""
    for signum in (signal.SIGINT, signal.SIGTERM):  # end at once, as by default
        signal.signal(signum, signal.SIG_DFL)
    proxy = Proxy(options, database=database)
    try:
        for line in sys.stdin.buffer:
            proxy.handle(line.rstrip(b"\r\n"))
    finally:
        proxy.close()
    return 0
