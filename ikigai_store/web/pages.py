"""What every page of the web view shares: the server's state, rendering, parameters, writes.

Owns ``Web`` (the server's store, hub, templates and settings, on ``app.state.web``),
``render``, ``int_param``, ``write_form`` and the template filters. Invariants:
- everything an agent or a user wrote reaches a page through Jinja's autoescape, and the
  ``text`` filter also shows the Unicode controls that reorder text (bidi overrides and
  isolates) as visible ``<U+202E>`` marks inside a ``<bdi>``: a name cannot disguise what
  follows it;
- a bad parameter is ``InvalidArgument`` (a 400 page), a missing thing ``NotFound`` (404);
- a write is refused (``403``) unless the server runs with ``--allow-writes`` and the form
  carries the CSRF token from a page of this server (``security.csrf_ok``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import resources
from typing import Any, TypeVar

import jinja2
from markupsafe import Markup, escape
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from ..aio import AsyncStore
from ..errors import InvalidArgument
from .live import Hub
from .reads import CONTROLS, visible
from .security import csrf_ok

__all__ = ["Forbidden", "Web", "int_param", "keyset_page", "render", "web_of", "write_form"]

MAX_ID = 2**63 - 1


class Forbidden(Exception):
    """A write this server refuses (``403``): writes are off, or the CSRF check failed."""


@dataclass
class Web:
    """The server's state, shared by every request."""

    store: AsyncStore
    hub: Hub
    templates: Jinja2Templates
    csrf: str
    allow_writes: bool
    token: bool


def web_of(request: Request) -> Web:
    web: Web = request.app.state.web
    return web


def text(value: object, limit: int | None = None) -> Markup:
    """Untrusted text for a page: escaped, bidi controls made visible, isolated in ``<bdi>``;
    cut to ``limit`` characters with how many were left out."""
    if value is None:
        return Markup("")
    raw = str(value)
    cut = ""
    if limit is not None and len(raw) > limit:
        cut = f"… ({len(raw) - limit:,} more characters)"
        raw = raw[:limit]
    escaped = str(escape(raw))
    shown = CONTROLS.sub(
        lambda m: (
            f'<span class="ctl" title="a text direction control">&lt;U+{ord(m[0]):04X}&gt;</span>'
        ),
        escaped,
    )
    more = f'<span class="cut">{escape(cut)}</span>' if cut else ""
    return Markup(f"<bdi>{shown}</bdi>{more}")


def when(value: datetime | None) -> str:
    """A time as the page shows it: UTC, to the second."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def ago(value: datetime | None) -> str:
    """How long ago ``value`` was, roughly (``3m``, ``2h``, ``5d``)."""
    if value is None:
        return ""
    seconds = (datetime.now(UTC) - value).total_seconds()
    return _span(seconds) + " ago" if seconds >= 0 else "in " + _span(-seconds)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def duration(value: timedelta | float | None) -> str:
    if value is None:
        return ""
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    return _span(seconds)


def templates() -> Jinja2Templates:
    """The package's templates, autoescaped, with the filters above."""
    directory = str(resources.files("ikigai_store.web") / "templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(directory), autoescape=True)
    found = Jinja2Templates(env=env)
    found.env.filters.update(text=text, plain=visible, when=when, ago=ago, duration=duration)
    found.env.globals["iso"] = lambda v: v.astimezone(UTC).isoformat() if v else ""
    return found


def render(
    request: Request,
    template: str,
    context: dict[str, Any],
    *,
    fragment: str | None = None,
    live: str | None = None,
    status: int = 200,
) -> HTMLResponse:
    """``template`` with ``context`` (or only ``fragment``, the live region's template, when
    the request asks ``?fragment=1``); ``live``: the changes the page's live region follows
    (``mail:3 task:*``), see ``static/app.js``."""
    web = web_of(request)
    name = fragment if fragment is not None and request.query_params.get("fragment") else template
    response = web.templates.TemplateResponse(
        request,
        name,
        {"csrf": web.csrf, "writes": web.allow_writes, "live": live, **context},
        status_code=status,
    )
    response.headers["cache-control"] = "no-store"
    return response


def int_param(request: Request, name: str, *, path: bool = False) -> int | None:
    """An integer query (or path) parameter in [0, 2**63); None when absent.
    ``InvalidArgument`` for anything else."""
    raw = request.path_params.get(name) if path else request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not str(raw).isdigit() or int(raw) > MAX_ID:
        raise InvalidArgument(f"{name} must be a non-negative integer, got {str(raw)[:40]!r}")
    return int(raw)


R = TypeVar("R")


def keyset_page(rows: list[R], size: int, key: Callable[[R], int]) -> tuple[list[R], int | None]:
    """A page of ``rows`` (read one more than ``size``, to know whether more follow) and the
    id the next page starts below (None: this is the last page)."""
    if len(rows) <= size:
        return rows, None
    rows = rows[:size]
    return rows, key(rows[-1])


async def write_form(request: Request) -> dict[str, str]:
    """The form of a write, once it passed the checks (``Forbidden`` otherwise)."""
    web = web_of(request)
    if not web.allow_writes:
        raise Forbidden("this server is read-only: start it with --allow-writes")
    form = await request.form()
    if not csrf_ok(request, form.get("csrf"), web.csrf):
        raise Forbidden("the form's CSRF token is missing or wrong: reload the page")
    return {k: v for k, v in form.items() if isinstance(v, str)}
