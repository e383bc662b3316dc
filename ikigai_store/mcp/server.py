"""``ikigai-store mcp``: the store's operations as MCP tools, and its state as MCP resources
(``resources``: ``ikigai://`` URIs, with subscriptions), over stdio or streamable HTTP.

Owns ``Face`` (the tools and resources bound to one ``AsyncStore`` and one calling identity)
and the two transports. The server acts as one identity: ``--as NAME``, else the agent's
identity in its project (``store.identities.resolve``, keyed by project and role, the same one
its hooks resolve), registered on first use. Invariants:
- a tool acts as that identity: the parameter naming who acts (``sender``, ``identity``,
  ``holder``, ``owner``, ...) is never offered to the caller, so an agent cannot send as
  another or ack another's mail; an ``operator`` server offers ``as_identity`` instead;
- task lists are the server's project's and those of no project (``task_lists``,
  ``available_tasks``): the project key is the server's, never the caller's;
- every failure of a call is a tool error (``isError``) whose text is one line, the library
  error's class and message; nothing a caller sends crashes the server, and a database that
  goes away and comes back only fails the calls made while it was gone;
- over HTTP the server binds to loopback unless told otherwise, and any other address needs
  a bearer token, checked (in constant time) on every request;
- over HTTP the same app answers Claude Code's ``http`` hooks on ``POST /hooks/{name}``
  (``hooks.http``), behind the same token, with the server's ``--as``/``--role``/``--project``
  as their defaults.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
import sys
import typing
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.message import SessionMessage
from pydantic import BaseModel, ValidationError

from .. import __version__
from .._net import bound_port, is_loopback, listen, listens_on_loopback
from .._where import describe, instructions
from ..aio import AsyncStore, open_async
from ..errors import IkigaiStoreError, InvalidArgument
from ..hooks.context import agent_role, project_key
from ..hooks.http import HookEndpoint
from ..models import Identity
from .resources import Resources
from .tools import AS_IDENTITY, Tool

__all__ = ["Face", "is_loopback", "serve_http", "serve_stdio"]

log = logging.getLogger("ikigai_store.mcp")

#: A tool error's text is cut to this many characters (a hostile argument may be echoed).
MAX_ERROR_CHARS = 1000

INSTRUCTIONS = (
    "ikigai-store: mail, file reservations, tasks and reviews shared with the other coding "
    "agents of this project, in PostgreSQL. You act as one identity (`whoami`). Reserve files "
    "before editing them; check your inbox when told mail arrived."
)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Face:
    """MCP tools and resources over one store, acting as one identity (see the module's
    invariants; the resources' own are in ``resources``).

    ``name``: the identity to act as (registered on first use); None resolves the agent's
    identity from ``project`` and ``role``. ``operator``: tools take ``as_identity``."""

    def __init__(
        self,
        store: AsyncStore,
        tools: Sequence[Tool],
        *,
        name: str | None = None,
        project: str | None = None,
        role: str | None = None,
        operator: bool = False,
    ) -> None:
        self.store = store
        self.operator = operator
        self.project = project_key(project)
        self.role = agent_role(role)
        self._name = name
        self._identity: Identity | None = None
        self._tools = {tool.name: tool for tool in tools}
        self._arguments = {tool.name: tool.arguments(operator) for tool in tools}
        self._listed = [
            types.Tool(
                name=tool.name,
                description=tool.description(),
                input_schema=tool.input_schema(operator),
                output_schema=tool.output_schema,
                annotations=types.ToolAnnotations(read_only_hint=tool.read_only or None),
            )
            for tool in tools
        ]
        #: The resources and their subscriptions (``close`` ends them).
        self.resources = Resources(self)

    def database(self) -> str:
        """Which database this server uses, in words (its password masked): said in the
        server's instructions, so a client that started it with another environment than
        the user's (an allow-list, a minimal one) shows which one it got."""
        data_dir = getattr(self.store, "embedded_data_dir", None)
        if data_dir is not None:
            return describe(None, os.fspath(data_dir))
        return describe(str(self.store.url))

    async def identity(self) -> Identity:
        """The identity this server acts as (resolved, and registered, on first use)."""
        if self._identity is None:
            self._identity = await self._resolve(self._name)
        return self._identity

    async def _resolve(self, name: str | None) -> Identity:
        return await self.store.identities.resolve(
            self.project, role=self.role, name=name, working_dir=self.project
        )

    def server(self) -> Server[Any]:
        """A low-level MCP server answering ``tools/list`` and ``tools/call``, the
        ``resources/*`` requests and ``subscriptions/listen``."""

        async def list_tools(
            ctx: Any, params: types.PaginatedRequestParams | None
        ) -> types.ListToolsResult:
            return types.ListToolsResult(tools=self._listed)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await self.call(params.name, params.arguments, progress=_progress_of(ctx))

        return Server(
            "ikigai-store",
            version=__version__,
            instructions=instructions(INSTRUCTIONS, self.database()),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=self.resources.list_resources,
            on_list_resource_templates=self.resources.list_templates,
            on_read_resource=self.resources.read_resource,
            on_subscribe_resource=self.resources.subscribe_resource,
            on_unsubscribe_resource=self.resources.unsubscribe_resource,
            on_subscriptions_listen=self.resources.subscriptions_listen,
        )

    async def close(self) -> None:
        """End the resource subscriptions (before the store closes)."""
        await self.resources.close()

    async def call(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        *,
        progress: Progress | None = None,
    ) -> types.CallToolResult:
        """Run tool ``name``; every failure becomes a tool error (never an exception). With
        ``progress`` (the client gave a ``progressToken``), a call still running reports
        progress every ``PROGRESS_INTERVAL`` seconds (a client may extend its timeout on
        it): ``wait_for_mail`` waits up to 120 s, past many clients' default timeout."""
        tool = self._tools.get(name)
        try:
            if tool is None:
                raise InvalidArgument(f"unknown tool {name!r}")
            kwargs = self._validated(tool, arguments or {})
            acting = kwargs.pop(AS_IDENTITY, None)
            if tool.me is not None:
                kwargs[tool.me] = acting if acting is not None else (await self.identity()).name
            if tool.project is not None:
                kwargs[tool.project] = self.project
            kwargs.update(tool.fixed)
            result = await _reporting(tool.bind(self.store)(**kwargs), progress)
            structured = tool.structured(result)
        except IkigaiStoreError as exc:
            return _error(f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug of ours: the caller gets one line, the log the rest
            log.exception("tool %r failed", name)
            return _error(f"internal error ({type(exc).__name__}); see the server's log")
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=structured
        )

    def _validated(self, tool: Tool, arguments: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments checked against the tool's schema, as keyword arguments."""
        for param, value in arguments.items():
            if _lone_surrogate(param) or _lone_surrogate(value):
                shown = param.encode("utf-8", "backslashreplace").decode()
                raise InvalidArgument(
                    f"bad arguments for {tool.name}: {shown}: holds a lone surrogate, not "
                    "valid Unicode"
                )
        try:
            text = json.dumps(arguments)  # the strict JSON mode reads what a client sent
            model: BaseModel = self._arguments[tool.name].model_validate_json(text)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
                for error in exc.errors(include_url=False, include_input=False)
            )
            raise InvalidArgument(f"bad arguments for {tool.name}: {problems}") from None
        values = {field: getattr(model, field) for field in type(model).model_fields}
        return tool.call_arguments(values)


#: Seconds between two progress notifications of a running call.
PROGRESS_INTERVAL = 5.0

Progress = Callable[[float, str], Awaitable[None]]


def _progress_of(ctx: Any) -> Progress | None:
    """The request's progress reporter, when its client gave a ``progressToken``."""
    meta = getattr(ctx, "meta", None) or {}
    token = meta.get("progressToken", meta.get("progress_token"))
    if isinstance(token, bool) or not isinstance(token, str | int):
        return None
    session, request_id = ctx.session, getattr(ctx, "request_id", None)

    async def report(elapsed: float, message: str) -> None:
        await session.send_progress_notification(
            token, elapsed, message=message, related_request_id=request_id
        )

    return report


async def _cancelled_once(call: Awaitable[Any]) -> Any:
    """Await ``call`` in its own asyncio task. When the caller is cancelled (a client's
    ``notifications/cancelled``), the task is cancelled once and awaited: psycopg then cancels
    the running query and the connection goes back to the pool in a clean state. (anyio's
    cancellation is level-triggered: delivered again into psycopg's own cleanup, it made
    psycopg close the connection and the pool discard it, logging both.)"""
    task = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([task])
        elif not task.cancelled():
            task.exception()  # retrieved: no "exception was never retrieved" warning
        raise


async def _reporting(call: Awaitable[Any], progress: Progress | None) -> Any:
    """Await ``call`` (``_cancelled_once``); meanwhile report progress every
    ``PROGRESS_INTERVAL`` seconds."""
    call = _cancelled_once(call)
    if progress is None:
        return await call
    outcome: list[Any] = []
    failure: list[Exception] = []

    async def run(scope: anyio.CancelScope) -> None:
        try:
            outcome.append(await call)
        except Exception as exc:  # raised below, outside the task group (not as a group)
            failure.append(exc)
        finally:
            scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(run, group.cancel_scope)
        elapsed = 0.0
        while True:
            await anyio.sleep(PROGRESS_INTERVAL)
            elapsed += PROGRESS_INTERVAL
            await progress(elapsed, f"still running after {elapsed:g} s")
    if failure:
        raise failure[0]
    return outcome[0]


def _error(message: str) -> types.CallToolResult:
    line = " ".join(message.split())
    if len(line) > MAX_ERROR_CHARS:
        line = line[: MAX_ERROR_CHARS - 1] + "…"
    return types.CallToolResult(content=[types.TextContent(type="text", text=line)], is_error=True)


# ---------------------------------------------------------------- transports


async def serve_stdio(make_face: Callable[[AsyncStore], Face], url: str | None) -> None:
    """Serve over stdin/stdout until the client closes them (what a coding agent spawns)."""
    async with open_async(url) as store:
        face = make_face(store)
        server = face.server()
        try:
            with open(os.dup(0), encoding="utf-8", errors="replace") as stdin:
                lines = CheckedLines(anyio.wrap_file(stdin))
                async with stdio_server(stdin=typing.cast(Any, lines)) as (read, write):
                    lines.answer_with(write)
                    await server.run(read, write, server.create_initialization_options())
        finally:
            await face.close()


def _lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        return any("\ud800" <= ch <= "\udfff" for ch in value)
    if isinstance(value, dict):
        return any(_lone_surrogate(k) or _lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_lone_surrogate(item) for item in value)
    return False


class CheckedLines:
    """The stdio server's input lines, minus those carrying a lone surrogate (``\\ud800``:
    JSON that is not Unicode, which the SDK drops without a word): a request among them is
    answered with a JSON-RPC parse error (-32700) naming the problem, a notification
    dropped; the others pass through unchanged."""

    def __init__(self, lines: Any) -> None:
        self._lines = lines
        self._answers: Any = None
        self._ready = anyio.Event()

    def answer_with(self, write: Any) -> None:
        """Where the error answers go (the transport's write stream)."""
        self._answers = write
        self._ready.set()

    def __aiter__(self) -> Any:
        return self._checked()

    async def _checked(self) -> Any:
        async for line in self._lines:
            if "\\u" in line and (found := self._refused(line)) is not None:
                if found[0]:
                    await self._ready.wait()
                    error = types.JSONRPCError(
                        jsonrpc="2.0",
                        id=found[1],
                        error=types.ErrorData(
                            code=types.PARSE_ERROR,
                            message="the message is not valid Unicode: a string holds a lone "
                            "surrogate (\\ud800-\\udfff escapes must come in pairs)",
                        ),
                    )
                    await self._answers.send(SessionMessage(error))
                continue
            yield line

    @staticmethod
    def _refused(line: str) -> tuple[bool, Any] | None:
        """(is it a request, its id) of a message carrying a lone surrogate, else None."""
        try:
            message = json.loads(line)
        except ValueError:
            return None
        if not _lone_surrogate(message):
            return None
        request = isinstance(message, dict) and "id" in message and "method" in message
        ident = message.get("id") if request else None
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return (False, None) if not request else (True, None)
        return (True, ident if not _lone_surrogate(ident) else None)


class BearerToken:
    """ASGI middleware: every HTTP request needs ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers", ())).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await _refuse(send)
                return
        await self.app(scope, receive, send)


async def _refuse(send: Send) -> None:
    body = b'{"error": "a bearer token is required (Authorization: Bearer <token>)"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"www-authenticate", b'Bearer realm="ikigai-store"'),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def http_app(
    face: Face, *, host: str, token: str | None, hooks: HookEndpoint | None = None
) -> ASGIApp:
    """The streamable HTTP app (``/mcp``, and ``/hooks/{name}`` with ``hooks``), behind the
    bearer token when there is one."""
    routes = hooks.routes() if hooks is not None else None
    app: ASGIApp = face.server().streamable_http_app(
        host=host, transport_security=rebinding_guard(host), custom_starlette_routes=routes
    )
    return BearerToken(app, token) if token else app


def rebinding_guard(host: str) -> TransportSecuritySettings | None:
    """The ``Host`` and ``Origin`` checks of a loopback bind (against DNS rebinding): this
    address and the usual loopback names, any port. The SDK turns them on by itself only for
    ``127.0.0.1``, ``localhost`` and ``::1`` written so; any other loopback address (the
    rest of 127.0.0.0/8, ``*.localhost``) served every ``Host``. None off loopback, where
    the token guards the server (``serve_http`` refuses such a bind without one)."""
    if not is_loopback(host):
        return None
    bare = host.strip("[]")
    hosts = dict.fromkeys([f"[{bare}]" if ":" in bare else bare, "127.0.0.1", "localhost", "[::1]"])
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in hosts],
        allowed_origins=[f"http://{name}:*" for name in hosts],
    )


async def serve_http(
    make_face: Callable[[AsyncStore], Face],
    url: str | None,
    *,
    host: str,
    port: int,
    token: str | None,
    ready: Callable[[int], None] | None = None,
    hooks: HookEndpoint | None = None,
) -> None:
    """Serve streamable HTTP on ``host:port`` (path ``/mcp``; ``/hooks/{name}`` with
    ``hooks``, closed when the server stops) until interrupted.

    ``InvalidArgument`` for a non-loopback ``host`` without a token. ``ready(port)`` is
    called once listening (the bound port, useful with ``port=0``)."""
    import uvicorn

    sockets = listen(host, port)
    if not (is_loopback(host) and listens_on_loopback(sockets)) and not token:
        for sock in sockets:
            sock.close()
        raise InvalidArgument(
            f"refusing to serve MCP on {host} without a token: give --token (or "
            "IKIGAI_MCP_TOKEN), or bind to 127.0.0.1"
        )
    async with open_async(url) as store:
        face = make_face(store)
        if hooks is not None:
            hooks.use(store)
        app = http_app(face, host=host, token=token, hooks=hooks)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
        server = uvicorn.Server(config)
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(server.serve, sockets)
                while not server.started:
                    if server.should_exit:
                        return
                    await anyio.sleep(0.01)
                if ready is not None:
                    ready(bound_port(server, port))
        finally:
            try:
                await face.close()
            finally:
                if hooks is not None:
                    with anyio.CancelScope(shield=True):
                        await hooks.close()


def run(
    *,
    url: str | None,
    tools: Iterable[Tool],
    name: str | None,
    project: str | None,
    role: str | None,
    operator: bool,
    http: bool,
    host: str,
    port: int,
    token: str | None,
) -> None:
    """The ``ikigai-store mcp`` command's body (blocks until the transport ends)."""
    chosen = tuple(tools)

    def make_face(store: AsyncStore) -> Face:
        return Face(store, chosen, name=name, project=project, role=role, operator=operator)

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(message)s")
    if not http:
        # A client stops its server with SIGINT, then SIGTERM 100 ms later (Claude Code): the
        # blocking stdin reader would hold a graceful exit forever, so SIGINT ends the process
        # as SIGTERM does (the database sees the connections close).
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        anyio.run(serve_stdio, make_face, url)
        return

    def ready(bound: int) -> None:
        print(f"ikigai-store mcp: serving http://{host}:{bound}/mcp", file=sys.stderr, flush=True)

    hooks = HookEndpoint(url, name=name, role=role, project=project, loopback=is_loopback(host))
    anyio.run(
        lambda: serve_http(
            make_face, url, host=host, port=port, token=token, ready=ready, hooks=hooks
        )
    )
