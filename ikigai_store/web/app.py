"""The web view's ASGI application and its server.

Owns ``create_app`` (a Starlette app over an ``AsyncStore``) and ``serve`` (uvicorn, the
``ikigai-store web`` command's body). Invariants:
- bound to loopback unless told otherwise; any other address needs a token (``serve`` refuses
  to start without one), checked on every request and every event stream (``security.Guard``);
- read-only unless ``allow_writes``; a write also needs the page's CSRF token;
- the server holds the store's pool plus one LISTEN connection, however many browsers and
  streams are open (``live.Hub``); stopping ends every stream at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import secrets
from collections.abc import AsyncIterator, Callable
from importlib import resources

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from .._net import bound_port, is_loopback, listen, listens_on_loopback
from ..aio import AsyncStore, open_async
from ..errors import DatabaseUnavailable, IkigaiStoreError, InvalidArgument, NotFound
from . import coordination, history
from .live import Hub
from .pages import Forbidden, Web, render, templates, web_of
from .security import Guard

__all__ = ["create_app", "serve"]

log = logging.getLogger("ikigai_store.web")


async def index(request: Request) -> Response:
    return RedirectResponse("/sessions", status_code=303)


async def live(request: Request) -> Response:
    """The Server-Sent Events stream every page listens to (``live.Hub``)."""
    hub = web_of(request).hub
    last = request.headers.get("last-event-id") or request.query_params.get("last")
    return StreamingResponse(
        hub.stream(last),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


def _error(request: Request, status: int, message: str) -> Response:
    if request.query_params.get("fragment") or request.url.path.endswith("/tail"):
        return Response(html.escape(message), status_code=status, media_type="text/plain")
    return render(request, "error.html", {"status": status, "message": message}, status=status)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error(request, 404, str(exc) if isinstance(exc, NotFound) else "no such page")


async def _bad(request: Request, exc: Exception) -> Response:
    return _error(request, 400, str(exc))


async def _forbidden(request: Request, exc: Exception) -> Response:
    return _error(request, 403, str(exc))


async def _unavailable(request: Request, exc: Exception) -> Response:
    return _error(request, 503, f"the database is unavailable: {exc}")


async def _failed(request: Request, exc: Exception) -> Response:
    return _error(request, 400, f"{type(exc).__name__}: {exc}")


def create_app(
    store: AsyncStore,
    *,
    allow_writes: bool = False,
    token: str | None = None,
    loopback: bool = True,
) -> ASGIApp:
    """The web view over ``store`` (which stays the caller's to close). ``token``: required on
    every request; ``loopback``: the server only listens on loopback (then ``Host`` and
    ``Origin`` must be loopback too)."""
    hub = Hub(store)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        hub.start()
        try:
            yield
        finally:
            await hub.close()

    static = StaticFiles(directory=str(resources.files("ikigai_store.web") / "static"))
    routes: list[BaseRoute] = [
        Route("/", index),
        Route("/live", live),
        Mount("/static", static, name="static"),
        *history.routes,
        *coordination.routes,
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={
            404: _not_found,
            NotFound: _not_found,
            InvalidArgument: _bad,
            Forbidden: _forbidden,
            DatabaseUnavailable: _unavailable,
            IkigaiStoreError: _failed,
        },
    )
    app.state.web = Web(
        store=store,
        hub=hub,
        templates=templates(),
        csrf=secrets.token_urlsafe(32),
        allow_writes=allow_writes,
        token=token is not None,
    )
    return Guard(app, token=token, loopback=loopback)


async def serve(
    url: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    allow_writes: bool = False,
    ready: Callable[[int], None] | None = None,
) -> None:
    """Serve the web view on ``host:port`` until interrupted (SIGINT/SIGTERM).

    ``InvalidArgument`` for a non-loopback ``host`` without a token. ``ready(port)`` is called
    once listening (the bound port, useful with ``port=0``)."""
    import uvicorn

    sockets = listen(host, port)
    loopback = is_loopback(host) and listens_on_loopback(sockets)
    if not loopback and not token:
        for sock in sockets:
            sock.close()
        raise InvalidArgument(
            f"refusing to serve the web view on {host} without a token: give --token (or "
            "IKIGAI_WEB_TOKEN), or bind to 127.0.0.1"
        )
    async with open_async(url) as store:
        app = create_app(store, allow_writes=allow_writes, token=token, loopback=loopback)
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        hub: Hub = app.app.state.web.hub  # type: ignore[attr-defined]

        async def end_streams_on_exit() -> None:
            while not server.should_exit:
                await asyncio.sleep(0.05)
            await hub.close()

        closer = asyncio.get_running_loop().create_task(end_streams_on_exit())
        starting = asyncio.get_running_loop().create_task(server.serve(sockets))
        try:
            while not server.started:
                if starting.done():
                    await starting
                    return
                await asyncio.sleep(0.01)
            if ready is not None:
                ready(bound_port(server, port))
            await starting
        finally:
            closer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await closer
