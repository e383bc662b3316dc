"""Addresses, for the servers that must tell loopback from the rest (the MCP server, its hooks
endpoint, the web view). Owns ``is_loopback``, ``hostname``, ``listen`` (the only I/O: binding
sockets) and ``bound_port``."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from .errors import InvalidArgument

__all__ = ["bound_port", "hostname", "is_loopback", "listen", "listens_on_loopback"]


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (a name, an address, an IPv6 address in brackets) only reaches this
    machine: ``localhost``, ``*.localhost``, 127.0.0.0/8, ``::1``."""
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def hostname(url: str) -> str | None:
    """The host of ``url`` (``//host:port`` for a bare ``Host`` header), None if unreadable."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def bound_port(server: object, default: int) -> int:
    """The port a started uvicorn ``server`` listens on (what ``--port 0`` chose), else
    ``default``."""
    for listening in getattr(server, "servers", ()):
        for sock in listening.sockets:
            return int(sock.getsockname()[1])
    return default


def listen(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``port`` on every address ``host`` resolves to, as uvicorn would bind
    them, for its ``serve(sockets=...)``. Bound here so that a host that does not resolve, or
    an address in use or not this machine's, is ``InvalidArgument`` naming it (uvicorn logs
    and exits the process)."""
    shown = f"[{host}]" if ":" in host else host
    try:
        found = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise InvalidArgument(f"cannot serve on {shown}: {_reason(exc)}") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(found):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.set_inheritable(True)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        raise InvalidArgument(f"cannot serve on {shown}:{port}: {_reason(exc)}") from None
    return sockets


def listens_on_loopback(sockets: list[socket.socket]) -> bool:
    """Whether every one of ``sockets`` is bound to a loopback address (a name such as
    ``x.localhost`` may resolve elsewhere)."""
    return bool(sockets) and all(is_loopback(str(s.getsockname()[0])) for s in sockets)


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or exc)
