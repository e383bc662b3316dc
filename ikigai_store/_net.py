"""Addresses, for the servers that must tell loopback from the rest (the MCP server, its hooks
endpoint, the web view). Owns ``is_loopback``, ``hostname`` and ``bound_port``; no I/O."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["bound_port", "hostname", "is_loopback"]


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
