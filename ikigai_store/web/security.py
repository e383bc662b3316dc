"""What stands between the web view and the rest of the world.

Owns ``Guard``, the ASGI middleware in front of every route, and ``csrf_ok``. Invariants:
- on a loopback server every request's ``Host`` (and ``Origin``, when sent) is loopback: a page
  elsewhere cannot reach it through DNS rebinding;
- with a token, every request (pages, fragments, static files, the ``/live`` stream) carries it:
  ``Authorization: Bearer <token>``, or the cookie a browser gets by opening any page once with
  ``?token=<token>`` (then redirected to the same address without it, so the token stays out
  of the history and of ``Referer``); anything else is ``401``;
- every response forbids inline scripts, framing and sniffing (``Content-Security-Policy``,
  ``X-Frame-Options``, ``X-Content-Type-Options``), so an agent's text that escaped escaping
  still could not run;
- a write (any method but GET and HEAD) carries the server's CSRF token in its form and, when
  the browser sends ``Origin``, comes from this server's own origin (``csrf_ok``); the CSRF
  token is random per server process and only ever written into pages, which another origin
  cannot read.
"""

from __future__ import annotations

import hashlib
import hmac
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, quote, urlencode

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._net import hostname, is_loopback

__all__ = ["COOKIE", "Guard", "csrf_ok"]

#: The cookie that carries the token after a ``?token=`` visit.
COOKIE = "ikigai_web_token"

HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; worker-src 'self'; object-src 'none'; base-uri 'none'; "
        b"form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


class Guard:
    """ASGI middleware: loopback ``Host``/``Origin`` checks, the token, security headers."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.loopback:
            host = headers.get("host", "")
            origin = headers.get("origin")
            if not is_loopback(hostname(f"//{host}")):
                await _plain(send, 403, f"Host {host!r} is not loopback")
                return
            if origin is not None and origin != "null" and not is_loopback(hostname(origin)):
                await _plain(send, 403, f"Origin {origin!r} is not loopback")
                return
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token")
            if given is not None and _same(given, self.token):
                await _login(scope, send, self.token)
                return
            if not self._carries_token(headers):
                await _plain(send, 401, "this server needs its token (open it with ?token=...)")
                return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    def _carries_token(self, headers: Headers) -> bool:
        assert self.token is not None
        bearer = headers.get("authorization", "")
        if hmac.compare_digest(bearer.encode(), f"Bearer {self.token}".encode()):
            return True
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except Exception:
            return False
        morsel = cookie.get(COOKIE)
        return morsel is not None and _same(morsel.value, _cookie_value(self.token))


#: What a path keeps unquoted in the ``Location`` of ``_login`` (RFC 3986's pchar and ``/``).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"


def _same(given: str, expected: str) -> bool:
    """Whether ``given`` is ``expected``, in constant time, whatever characters it holds
    (``hmac.compare_digest`` refuses non-ASCII strings with a TypeError: a 500)."""
    return hmac.compare_digest(
        given.encode("utf-8", "surrogatepass"), expected.encode("utf-8", "surrogatepass")
    )


def _cookie_value(token: str) -> str:
    """What the cookie holds: a digest of the token (any token is a valid cookie value)."""
    return hashlib.sha256(b"ikigai-web-cookie:" + token.encode()).hexdigest()


async def _login(scope: Scope, send: Send, token: str) -> None:
    """``?token=`` was right: set the cookie and redirect to the address without the token."""
    query = [
        (k, v)
        for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        if k != "token"
    ]
    # One leading slash: "//host" or "/\\host" would send the browser to another site.
    path = "/" + str(scope.get("path", "/")).lstrip("/\\")
    kept = "?" + urlencode(query, encoding="latin-1") if query else ""  # the bytes as sent
    location = quote(path, safe=_PATH_SAFE) + kept
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("ascii")),
                (
                    b"set-cookie",
                    f"{COOKIE}={_cookie_value(token)}; Path=/; HttpOnly; SameSite=Strict".encode(),
                ),
                (b"content-length", b"0"),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})


async def _plain(send: Send, status: int, message: str) -> None:
    body = (message + "\n").encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *([(b"www-authenticate", b'Bearer realm="ikigai-store"')] if status == 401 else []),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def csrf_ok(request: Request, form_token: object, expected: str) -> bool:
    """Whether a write comes from one of this server's pages: the form's ``csrf`` field is the
    server's token, and ``Origin`` (when the browser sends one) is this server's origin."""
    if not isinstance(form_token, str) or not _same(form_token, expected):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    own = f"{request.url.scheme}://{request.headers.get('host', '')}"
    return origin == own
