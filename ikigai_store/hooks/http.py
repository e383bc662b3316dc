"""Claude Code's ``http`` hooks, answered by a running ``ikigai-store mcp --http``.

Claude Code (2.1.63 and later) has a second hook type besides ``command``: ``{"type": "http",
"url": ..., "headers": ..., "allowedEnvVars": [...], "timeout": N}``. It POSTs the JSON a
command hook reads on stdin (``Content-Type: application/json``) and reads the response as the
command's stdout: a 2xx with a JSON object is the hook's answer (a ``deny``, a ``block``,
additional context), a 2xx with an empty body or ``{}`` says nothing, and a non-2xx status, a
refused connection or a timeout is a non-blocking error: the tool call goes on. A header value
may name environment variables (``$VAR``, ``${VAR}``), filled in only for the names listed in
``allowedEnvVars`` (any other becomes an empty string). (From Claude Code's hooks reference,
"HTTP hooks" and "HTTP response handling", as summarised by third-party guides; not checked
against a recording of the binary.)

Owns ``HookEndpoint``: the route ``POST /hooks/{name}`` for every hook of ``claude.HOOKS``,
served by the same app as ``/mcp`` behind the same bearer-token rule, and running the very
functions of ``ikigai-store hook NAME`` (``claude.run``) on a store the server holds, so a hook
costs a request and a few queries instead of a Python start-up, a store open and a migration
check. Invariants:
- a hook fails open as the command does: any failure while running it (the database down, the
  store not yet openable, a bug, the deadline passed) answers ``200 {}`` (nothing to say) and
  logs one line; never a deny or a block on error. What the request itself gets wrong is a
  4xx, a non-blocking error for Claude Code (so it fails open too): a body that is not one JSON
  object ``400``, an unknown option ``400``, a body over ``MAX_BODY_BYTES`` ``413``, an unknown
  hook ``404``, another method ``405``; on a loopback server a ``Host`` or ``Origin`` that is
  not loopback ``403`` (what a web page's request, or a DNS-rebinding one, carries);
- the hooks run on the server's own ``AsyncStore`` (``use``), else on one opened on the first
  hook (no migration: the server's own open migrated) and shared by every request; a hook that
  fails open on an edit it could not check answers ``failopen.answer`` (the edit allowed,
  saying so) instead of ``{}``;
- who the agent is: the query parameters (``role``, ``as``, ``project``, written by ``hooks
  install --http`` like the command's flags), else the agent's environment forwarded in headers
  (``X-Ikigai-Role``, ``X-Ikigai-As``, ``X-Ikigai-Task-List``: ``IKIGAI_ROLE``, ``IKIGAI_AS``,
  ``CLAUDE_CODE_TASK_LIST_ID``), else the server's own ``--role``/``--as``/``--project``, else
  the command's rules (the event's ``cwd``, ``IKIGAI_ROLE``, ``main``) in the server's
  environment. So an agent's hooks resolve the identity its command hooks would;
- ``prompt``'s mark (the newest mail shown) stays in the state file of the command form, now
  under the server user's state directory: same machine and user for a loopback server, keyed
  by database and identity, so both forms of one agent share it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .._net import hostname, is_loopback
from ..aio import AsyncStore, open_async
from . import failopen
from .claude import (
    AUTO_RESERVE_SECONDS,
    DEADLINE_SECONDS,
    HOOKS,
    HookFailed,
    HookOptions,
    parse_input,
)
from .claude import run as run_hook

__all__ = ["MAX_BODY_BYTES", "PARAMETERS", "HookEndpoint"]

log = logging.getLogger("ikigai_store.hooks")

#: The largest hook body accepted (Claude Code's events are a few KB; a Write's content counts).
MAX_BODY_BYTES = 1024 * 1024
#: The query parameters a hook URL may carry.
PARAMETERS = frozenset({"role", "as", "project", "auto_reserve"})
#: Headers carrying the agent's environment (filled in by Claude Code from ``allowedEnvVars``).
ROLE_HEADER, NAME_HEADER, TASK_LIST_HEADER = "x-ikigai-role", "x-ikigai-as", "x-ikigai-task-list"
#: Connections of the hooks' store (and hooks running at once).
POOL_SIZE = 4
#: How long a hook request waits for a pooled connection (a busy pool fails the hook open).
CHECKOUT_SECONDS = 5.0
_MAX_AUTO_RESERVE = 86400.0
_NOTHING = b"{}"


class _BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class HookEndpoint:
    """``POST /hooks/{name}`` (see the module's invariants) over the database ``url``.

    ``name``, ``role``, ``project``: the server's ``--as``, ``--role``, ``--project``, the
    defaults of every hook request. ``loopback``: the server binds to loopback only (then
    ``Host`` and ``Origin`` must be loopback too). ``deadline``: seconds a hook may take
    before it is answered ``{}``."""

    def __init__(
        self,
        url: str | None,
        *,
        name: str | None = None,
        role: str | None = None,
        project: str | None = None,
        loopback: bool = True,
        pool_size: int = POOL_SIZE,
        deadline: float = DEADLINE_SECONDS,
    ) -> None:
        self.url = url
        self.name, self.role, self.project = name, role, project
        self.loopback = loopback
        self.deadline = deadline
        self._pool_size = pool_size
        self._lock = asyncio.Lock()
        self._store: AsyncStore | None = None
        self._owned = False
        self._closed = False

    def routes(self) -> list[Route]:
        """The Starlette routes to add to the server's app."""
        return [Route("/hooks/{name}", self.handle, methods=["POST"], name="hook")]

    def use(self, store: AsyncStore) -> None:
        """Run the hooks on ``store`` (the server's own, left open by ``close``)."""
        self._store, self._owned = store, False

    async def store(self) -> AsyncStore:
        """The hooks' store: the one given to ``use``, else one opened on first use."""
        async with self._lock:
            if self._closed:
                raise HookFailed("the server is shutting down")
            if self._store is None:
                self._store = await open_async(
                    self.url, migrate=False, pool_size=self._pool_size, timeout=CHECKOUT_SECONDS
                )
                self._owned = True
            return self._store

    async def close(self) -> None:
        """Close the store this endpoint opened; later hooks fail open. Idempotent."""
        async with self._lock:
            self._closed = True
            store, owned, self._store = self._store, self._owned, None
        if store is not None and owned:
            await store.close()

    async def handle(self, request: Request) -> Response:
        """One hook request: its answer, ``{}``, or a 4xx for a bad request."""
        name = request.path_params["name"]
        try:
            self._check_origin(request)
            if name not in HOOKS:
                raise _BadRequest(404, f"no hook {name!r} (hooks: {', '.join(HOOKS)})")
            options = self._options(request)
            event = await _event(request)
        except _BadRequest as bad:
            log.warning("hook %s (http): %s %s", name, bad.status, bad)
            body = json.dumps({"error": str(bad)}).encode()
            return Response(body, status_code=bad.status, media_type="application/json")
        answer = await self._answer(name, event, options)
        body = _NOTHING if answer is None else json.dumps(answer, ensure_ascii=False).encode()
        return Response(body, media_type="application/json")

    async def _answer(
        self, name: str, event: Mapping[str, Any], options: HookOptions
    ) -> dict[str, Any] | None:
        """The hook's answer; on any failure ``failed_open``'s, logged in one line."""
        why = f"gave up after {self.deadline:g} s"
        try:
            # asyncio's timeout cancels once (anyio's would cancel psycopg's own cancel too)
            async with asyncio.timeout(self.deadline):
                return await run_hook(name, event, options, store=self.store)
        except TimeoutError:
            pass
        except Exception as exc:
            why = str(exc) if isinstance(exc, HookFailed) else failopen.one_line(exc)
        log.warning("hook %s (http): %s", name, " ".join(why.split()))
        return failopen.answer(name, event, why)

    def _options(self, request: Request) -> HookOptions:
        query, headers = request.query_params, request.headers
        unknown = sorted(set(query) - PARAMETERS)
        if unknown:
            raise _BadRequest(
                400, f"unknown parameter {unknown[0]!r} (known: {', '.join(sorted(PARAMETERS))})"
            )
        return HookOptions(
            name=query.get("as") or headers.get(NAME_HEADER) or self.name,
            role=query.get("role") or headers.get(ROLE_HEADER) or self.role,
            project=query.get("project") or self.project,
            task_list=headers.get(TASK_LIST_HEADER) or None,
            auto_reserve=_seconds(query.get("auto_reserve")),
            deadline=self.deadline,
        )

    def _check_origin(self, request: Request) -> None:
        """On a loopback server, refuse what a web page (or DNS rebinding) sends."""
        if not self.loopback:
            return
        host = request.headers.get("host", "")
        if not is_loopback(hostname(f"//{host}")):
            raise _BadRequest(403, f"Host {host!r} is not loopback")
        origin = request.headers.get("origin")
        if origin is not None and not is_loopback(hostname(origin)):
            raise _BadRequest(403, f"Origin {origin!r} is not loopback")


def _seconds(value: str | None) -> float | None:
    """``auto_reserve``: absent None, empty the default, else seconds in (0, 86400]."""
    if value is None:
        return None
    if not value:
        return AUTO_RESERVE_SECONDS
    try:
        seconds = float(value)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds <= _MAX_AUTO_RESERVE:
        raise _BadRequest(
            400, f"auto_reserve must be seconds in (0, {_MAX_AUTO_RESERVE:g}], not {value!r}"
        )
    return seconds


async def _event(request: Request) -> dict[str, Any]:
    """The body: one JSON object of at most ``MAX_BODY_BYTES``."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _BadRequest(413, f"the body is over {MAX_BODY_BYTES} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _BadRequest(413, f"the body is over {MAX_BODY_BYTES} bytes")
        chunks.append(chunk)
    try:
        return parse_input(b"".join(chunks).decode("utf-8"))
    except UnicodeDecodeError:
        raise _BadRequest(400, "the body is not UTF-8") from None
    except HookFailed as exc:
        raise _BadRequest(400, str(exc).replace("standard input", "the body")) from None
